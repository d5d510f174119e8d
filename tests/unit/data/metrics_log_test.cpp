// run.dir/metrics.jsonl (io/metrics_log.h): a resumed run keeps the lines up to its checkpoint's
// step, rewritten through a .tmp file, and counts are written in full.
#include "io/metrics_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

using testing::ScratchDir;

std::string contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MetricsLog, ResumeKeepsTheStepsUpToTheCheckpointAndAppends) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsLog log(path);
    for (int step = 1; step <= 5; ++step) log.write({{"step", step}, {"loss", 2.5 / step}});
  }
  {
    MetricsLog log(path, 3);  // resumed after step 3: the interrupted run's 4 and 5 are dropped
    log.write({{"step", 4}, {"loss", 0.25}});
  }
  EXPECT_EQ(contents(path),
            "{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2, \"loss\": 1.25}\n{\"step\": 3, \"loss\": 0.833333333}\n"
            "{\"step\": 4, \"loss\": 0.25}\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A resume without an earlier file starts one.
  const std::string fresh = dir.file("fresh.jsonl");
  { MetricsLog(fresh, 7).write({{"step", 8}}); }
  EXPECT_EQ(contents(fresh), "{\"step\": 8}\n");
}

TEST(MetricsLog, AResumeDropsLinesCutShortAndSaysWhatIsMissing) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsLog log(path);
    for (int step = 1; step <= 4; ++step) log.write({{"step", step}, {"loss", 1.0}});
  }
  // A crash of the node cut the file inside step 2's line: steps 3 and 4 are gone.
  std::filesystem::resize_file(path, contents(path).find("\n") + 10);
  {
    MetricsLog log(path, 4);
    EXPECT_EQ(log.resume_note(), "metrics: " + path + ": 1 line(s) cut short dropped; it holds 1 of steps 1 to 4 " +
                                     "(the others were lost)");
    log.write({{"step", 5}, {"loss", 0.5}});
  }
  EXPECT_EQ(contents(path), "{\"step\": 1, \"loss\": 1}\n{\"step\": 5, \"loss\": 0.5}\n");
  // A whole history says nothing; a missing one says where it starts again.
  EXPECT_EQ(MetricsLog(path, 1).resume_note(), "");
  EXPECT_EQ(MetricsLog(dir.file("gone.jsonl"), 9).resume_note(),
            "metrics: " + dir.file("gone.jsonl") + " was not there: it starts again at step 10");
}

TEST(MetricsLog, CountsAreWrittenInFull) {
  ScratchDir dir;
  const std::string path = dir.file("metrics.jsonl");
  { MetricsLog(path).write({{"step", 2147483647.0}, {"tokens", 1099511627776.0}, {"lr", 6e-4}, {"x", 1.0 / 0.0}}); }
  // %.9g wrote 2147483647 as 2.14748365e+09, which a resume read back as step 2.
  EXPECT_EQ(contents(path), "{\"step\": 2147483647, \"tokens\": 1099511627776, \"lr\": 0.0006, \"x\": null}\n");
  { MetricsLog log(path, 2147483647); }
  EXPECT_EQ(contents(path), "{\"step\": 2147483647, \"tokens\": 1099511627776, \"lr\": 0.0006, \"x\": null}\n");
}

}  // namespace
}  // namespace trident::io
