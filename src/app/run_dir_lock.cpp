#include "src/app/run_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>  // flock
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>  // std::strerror
#include <ctime>
#include <string>
#include <utility>

#include "io/user_error.h"

namespace trident::app {

namespace {

// "host H, pid P, since 2026-11-25 09:40:12 UTC": who holds the lock, as it wrote itself.
std::string holder_text() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[64] = {};
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return std::string("host ") + host + ", pid " + std::to_string(::getpid()) + ", since " + when;
}

std::string read_text(int fd) {
  char buffer[512] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string text = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

RunDirLock::RunDirLock(const std::string& run_dir) {
  const std::string path = run_dir + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw io::UserError("run.dir '" + run_dir + "': cannot create " + path + " (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int reason = errno;
    if (reason == EWOULDBLOCK) {
      const std::string holder = read_text(fd);
      ::close(fd);
      throw io::UserError("run.dir '" + run_dir + "' is in use by another training (" +
                          (holder.empty() ? std::string("its lock is held") : holder) +
                          "): two runs in one directory would mix their checkpoints and metrics; wait for it to "
                          "end, or give this one another run.dir");
    }
    ::close(fd);
    unsupported_reason_ = std::string("cannot lock ") + path + " (" + std::strerror(reason) + ")";
    return;
  }
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) == 0) {
    // The holder's name is for the message above only: a failed write changes nothing else.
    [[maybe_unused]] const ssize_t written = ::pwrite(fd, text.data(), text.size(), 0);
  }
  fd_ = fd;
}

std::string RunDirLock::current_holder(const std::string& run_dir) {
  const int fd = ::open((run_dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string holder;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
  } else if (errno == EWOULDBLOCK) {
    holder = read_text(fd);
    if (holder.empty()) holder = "its lock is held";
  }
  ::close(fd);
  return holder;
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
}

RunDirLock::RunDirLock(RunDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), unsupported_reason_(std::move(other.unsupported_reason_)) {}

RunDirLock& RunDirLock::operator=(RunDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    unsupported_reason_ = std::move(other.unsupported_reason_);
  }
  return *this;
}

}  // namespace trident::app
