// The names of a checkpoint directory (src/train/checkpoint_files.h): which files count as
// checkpoints and as set aside, and that setting aside never overwrites an earlier set-aside file.
#include "src/train/checkpoint_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace trident::train {
namespace {

class CheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("trident-checkpoint-files-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << name; }

  std::string dir_;
};

TEST_F(CheckpointFiles, CheckpointsAndSetAsideFilesAreToldApart) {
  for (const char* name : {"step-000000010.h5", "step-000000005.h5", "step-000000015.h5.bad", "step-000000015.h5.bad.2",
                           "step-000000020.h5.tmp", "latest", "step-000000015.h5.bad.x", "notes.h5.bad"}) {
    touch(name);
  }
  std::filesystem::create_directories(dir_ + "/step-000000020.h5");  // a directory: not a checkpoint
  EXPECT_EQ(list_checkpoint_files(dir_), (std::vector<std::string>{"step-000000005.h5", "step-000000010.h5"}));
  EXPECT_EQ(list_set_aside_files(dir_),
            (std::vector<std::string>{"step-000000015.h5.bad", "step-000000015.h5.bad.2"}));
}

// A copy named otherwise (step-best.h5) is no checkpoint: it sorted after every padded name, so a
// restart took it as the newest (an older step), and its name's step threw std::stoll on rank 0
// alone. Steps beyond 9 digits sort by number.
TEST_F(CheckpointFiles, OnlyStepNumbersNameCheckpointsInStepOrder) {
  for (const char* name : {"step-best.h5", "step-.h5", "step-12a.h5", "step-+15.h5", "step-000000006.h5",
                           "step-1000000000.h5", "step-999999999.h5"}) {
    touch(name);
  }
  EXPECT_EQ(list_checkpoint_files(dir_),
            (std::vector<std::string>{"step-000000006.h5", "step-999999999.h5", "step-1000000000.h5"}));
  EXPECT_EQ(checkpoint_step_of_name("step-000000030.h5"), 30);
  EXPECT_EQ(checkpoint_step_of_name("step-best.h5"), -1);
  EXPECT_EQ(checkpoint_step_of_name("step-30.h5.bad"), -1);
  EXPECT_EQ(checkpoint_name(1000000000), "step-1000000000.h5");
}

TEST_F(CheckpointFiles, SettingAsideTakesTheFirstFreeName) {
  const std::string name = checkpoint_name(15);
  EXPECT_EQ(name, "step-000000015.h5");
  EXPECT_EQ(set_aside_name(dir_, name), name + ".bad");
  touch(name + ".bad");
  EXPECT_EQ(set_aside_name(dir_, name), name + ".bad.2");
  touch(name + ".bad.2");
  EXPECT_EQ(set_aside_name(dir_, name), name + ".bad.3");
  EXPECT_EQ(set_aside_name(dir_, checkpoint_name(10)), checkpoint_name(10) + ".bad");
}

}  // namespace
}  // namespace trident::train
