// The std::bad_alloc a backend throws when an allocation fails, saying what failed: the memory
// (host, or which GPU), the bytes asked for and, on a GPU, what was still free, so that the
// rank's last words name the problem rather than "std::bad_alloc". Callers that catch
// std::bad_alloc still catch it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <new>
#include <string>
#include <utility>

namespace trident::kernels {

class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

// Bytes as MiB with one decimal, for those messages.
inline std::string mib(std::size_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

}  // namespace trident::kernels
