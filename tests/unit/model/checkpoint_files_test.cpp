// The names of a checkpoint directory (src/train/checkpoint_files.h): which files count as
// checkpoints and as set aside, and that setting aside never overwrites an earlier set-aside file.
#include "src/train/checkpoint_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, pipe, setuid

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

// checkpoint_directory_problem as a user without read permission on `dir`: root reads any
// directory, so as root the check runs in a child that has become `nobody`. Its answer comes
// back through a pipe.
std::string problem_without_read_permission(const std::string& dir) {
  std::filesystem::permissions(dir, std::filesystem::perms::owner_write | std::filesystem::perms::owner_exec |
                                        std::filesystem::perms::group_write | std::filesystem::perms::group_exec |
                                        std::filesystem::perms::others_write | std::filesystem::perms::others_exec);
  if (::geteuid() != 0) return checkpoint_directory_problem(dir);
  int ends[2];
  if (::pipe(ends) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ends[0]);
    constexpr uid_t kNobody = 65534;
    const std::string answer = ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0 ? checkpoint_directory_problem(dir)
                                                                              : "setuid failed";
    const ssize_t written = ::write(ends[1], answer.data(), answer.size());
    ::_exit(written == static_cast<ssize_t>(answer.size()) ? 0 : 1);
  }
  ::close(ends[1]);
  std::string answer;
  char buffer[256];
  for (ssize_t n; (n = ::read(ends[0], buffer, sizeof buffer)) > 0;) answer.append(buffer, static_cast<size_t>(n));
  ::close(ends[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return answer;
}

TEST_F(CheckpointFiles, ADirectoryThatTakesFilesButCannotBeListedIsRefused) {
  EXPECT_EQ(checkpoint_directory_problem(dir_), "");
  touch(checkpoint_name(5));
  const std::string problem = problem_without_read_permission(dir_);
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all);
  EXPECT_NE(problem.find("checkpoint.dir '" + dir_ + "': cannot list it (Permission denied)"), std::string::npos)
      << problem;
}

TEST_F(CheckpointFiles, ADirectoryInACheckpointsPlaceIsRefusedBeforeTraining) {
  touch(checkpoint_name(5));
  EXPECT_EQ(checkpoint_name_clash(dir_), "");
  std::filesystem::create_directory(dir_ + "/" + checkpoint_name(10));
  const std::string clash = checkpoint_directory_problem(dir_);
  EXPECT_EQ(clash, "checkpoint.dir '" + dir_ + "': 'step-000000010.h5' is a directory, where the run would write the "
                   "checkpoint of step 10, and a checkpoint cannot replace it; move it out of checkpoint.dir");
  std::filesystem::remove(dir_ + "/" + checkpoint_name(10));
  // A link to a checkpoint file is one; a directory named `latest` would fail the publishing rename.
  std::filesystem::create_symlink(dir_ + "/" + checkpoint_name(5), dir_ + "/" + checkpoint_name(6));
  EXPECT_EQ(checkpoint_name_clash(dir_), "");
  std::filesystem::create_directory(dir_ + "/latest");
  EXPECT_NE(checkpoint_name_clash(dir_).find("'latest' is a directory, where the run names its newest checkpoint"),
            std::string::npos);
  EXPECT_EQ(checkpoint_name_clash(dir_ + "/missing"), "");
}

}  // namespace
}  // namespace trident::train
