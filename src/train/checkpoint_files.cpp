#include "src/train/checkpoint_files.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace trident::train {

std::string checkpoint_name(int64_t steps_done) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09lld.h5", static_cast<long long>(steps_done));
  return name;
}

std::vector<std::string> list_checkpoint_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.rfind("step-", 0) == 0 && file.size() > suffix.size() &&
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.push_back(file);
    }
  }
  std::sort(names.begin(), names.end());  // zero-padded step numbers sort in order
  return names;
}

}  // namespace trident::train
