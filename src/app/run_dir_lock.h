// One training at a time in a run.dir: rank 0 holds an exclusive flock(2) on run.dir/lock for
// the whole run. A second `trident train` into the same directory (a job submitted twice, an
// interactive run beside a batch one) is refused at start-up instead of mixing its checkpoints,
// metrics and config.ini with the first's. The kernel drops the lock when the process ends,
// however it ends, so no stale lock survives a crash or kill -9. The file's text names the
// holder (host, pid, start time), for the refusal's message.
#pragma once

#include <string>

namespace trident::app {

class RunDirLock {
 public:
  RunDirLock() = default;  // holds nothing (the ranks other than 0)
  // Locks run_dir/lock (run_dir must exist). io::UserError naming the holder when another
  // process holds it. On a file system without locks (flock fails otherwise) nothing is held
  // and nothing refused: `unsupported_reason` then says why, for a note.
  explicit RunDirLock(const std::string& run_dir);
  ~RunDirLock();
  RunDirLock(RunDirLock&& other) noexcept;
  RunDirLock& operator=(RunDirLock&& other) noexcept;
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  // Who holds run_dir/lock now ("host H, pid P, since ..."), or "" when nobody does (or there is
  // no lock file): for `trident check`, which must not take the lock itself.
  static std::string current_holder(const std::string& run_dir);

  bool held() const { return fd_ >= 0; }
  const std::string& unsupported_reason() const { return unsupported_reason_; }

 private:
  int fd_ = -1;
  std::string unsupported_reason_;
};

}  // namespace trident::app
