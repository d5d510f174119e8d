#include "src/app/resident_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace trident::app {

std::size_t proc_field_kib(const char* path, const std::string& field) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in(line.substr(field.size() + 1));
      std::size_t kib = 0;
      in >> kib;
      return kib;
    }
  }
  return 0;
}

std::size_t resident_bytes() { return proc_field_kib("/proc/self/status", "VmRSS") * 1024; }
std::size_t peak_resident_bytes() { return proc_field_kib("/proc/self/status", "VmHWM") * 1024; }

}  // namespace trident::app
