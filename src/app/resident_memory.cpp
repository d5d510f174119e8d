#include "src/app/resident_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace trident::app {

namespace {

std::size_t status_field_kib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in(line.substr(field.size() + 1));
      std::size_t kib = 0;
      in >> kib;
      return kib;
    }
  }
  return 0;
}

}  // namespace

std::size_t resident_bytes() { return status_field_kib("VmRSS") * 1024; }
std::size_t peak_resident_bytes() { return status_field_kib("VmHWM") * 1024; }

}  // namespace trident::app
