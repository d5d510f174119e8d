// io/disk_space.h: a file the writers are about to write is checked against the room on its disk
// and against the process's file size limit (ulimit -f), before any byte is written: past the
// limit a write killed the rank with SIGXFSZ, and under MPI-IO (with the signal ignored) left the
// other ranks waiting.
#include "io/disk_space.h"

#include <gtest/gtest.h>
#include <sys/resource.h>  // getrlimit, setrlimit

#include <string>

#include "io/user_error.h"
#include "tests/unit/data/data_test_support.h"

namespace trident::io {
namespace {

// Lowers this process's soft RLIMIT_FSIZE for the scope (the hard limit stays, so it comes back).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    struct rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    applied_ = ::setrlimit(RLIMIT_FSIZE, &lowered) == 0;
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &saved_); }
  bool applied() const { return applied_; }

 private:
  struct rlimit saved_ {};
  bool applied_ = false;
};

TEST(DiskSpace, AFileLargerThanTheFileSizeLimitIsRefusedBeforeWriting) {
  testing::ScratchDir dir;
  const std::string file = dir.file("out.h5");
  EXPECT_NO_THROW(check_free_space(file, "dataset 'out.h5'", 4096));
  std::string message;
  {
    const FileSizeLimit limit(1000000);
    ASSERT_TRUE(limit.applied());
    EXPECT_NO_THROW(check_file_size_limit("dataset 'out.h5'", 1000000));
    try {
      check_free_space(file, "dataset 'out.h5'", 4100000);
    } catch (const UserError& e) {
      message = e.what();
    }
  }
  EXPECT_EQ(message, "dataset 'out.h5': needs 4.1 MB, past this process's file size limit of 1.0 MB (ulimit -f); "
                     "raise it (ulimit -f unlimited) in the job script");
  EXPECT_NO_THROW(check_file_size_limit("dataset 'out.h5'", 4100000));  // the limit is back
}

}  // namespace
}  // namespace trident::io
