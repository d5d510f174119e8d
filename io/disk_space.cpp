#include "io/disk_space.h"

#include <fcntl.h>  // open, fallocate
#include <sys/resource.h>  // getrlimit
#include <sys/statvfs.h>
#include <unistd.h>  // close

#include <cerrno>
#include <cstdio>   // snprintf
#include <cstring>  // std::strerror
#include <filesystem>

#include "io/user_error.h"

namespace trident::io {

namespace {

// Bytes available to this user where `file` lives, or -1 when the system cannot say.
double available_bytes(const std::string& file) {
  const std::string directory = std::filesystem::path(file).parent_path().string();
  struct statvfs disk {};
  if (::statvfs(directory.empty() ? "." : directory.c_str(), &disk) != 0) return -1.0;
  return static_cast<double>(disk.f_bavail) * static_cast<double>(disk.f_frsize);
}

[[noreturn]] void throw_no_space(const std::string& label, int64_t bytes, double free_bytes, int reason) {
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, "needs %.1f MB, %.1f MB free", static_cast<double>(bytes) / 1e6,
                free_bytes / 1e6);
  throw UserError(label + ": not enough space on its disk (" + sizes + "; " + std::strerror(reason) + ")");
}

}  // namespace

void check_file_size_limit(const std::string& label, int64_t bytes) {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  if (static_cast<double>(bytes) <= static_cast<double>(limit.rlim_cur)) return;
  char sizes[128];
  std::snprintf(sizes, sizeof sizes, "needs %.1f MB, past this process's file size limit of %.1f MB",
                static_cast<double>(bytes) / 1e6, static_cast<double>(limit.rlim_cur) / 1e6);
  throw UserError(label + ": " + sizes + " (ulimit -f); raise it (ulimit -f unlimited) in the job script");
}

void check_free_space(const std::string& file, const std::string& label, int64_t bytes) {
  check_file_size_limit(label, bytes);
  const double free_bytes = available_bytes(file);
  if (free_bytes >= 0.0 && free_bytes < static_cast<double>(bytes)) throw_no_space(label, bytes, free_bytes, ENOSPC);
}

void reserve_disk_space(const std::string& file, const std::string& label, int64_t bytes) {
  check_file_size_limit(label, bytes);  // fallocate's FALLOC_FL_KEEP_SIZE does not check it
  const int fd = ::open(file.c_str(), O_WRONLY);
  if (fd < 0) throw UserError(label + ": cannot open '" + file + "' (" + std::strerror(errno) + ")");
  const int failed = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  ::close(fd);
  if (failed == 0) return;
  if (failed == EOPNOTSUPP || failed == ENOSYS) {
    check_free_space(file, label, bytes);
    return;
  }
  throw_no_space(label, bytes, available_bytes(file), failed);
}

}  // namespace trident::io
