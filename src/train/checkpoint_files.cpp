#include "src/train/checkpoint_files.h"

#include <fcntl.h>   // open
#include <unistd.h>  // close, unlink, getpid

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>      // std::isfinite
#include <cstdio>
#include <cstring>  // std::strerror
#include <filesystem>
#include <map>
#include <system_error>

#include "io/param_file.h"  // read_param_file_int_attributes
#include "io/path_lookup.h"  // uncreatable_directory
#include "io/user_error.h"

namespace trident::train {

std::string checkpoint_directory(const std::string& run_dir, const std::string& checkpoint_dir) {
  return !checkpoint_dir.empty() && checkpoint_dir.front() == '/' ? checkpoint_dir : run_dir + "/" + checkpoint_dir;
}

std::string checkpoint_directory_problem(const std::string& dir) {
  if (std::string problem = io::uncreatable_directory("checkpoint.dir", dir); !problem.empty()) return problem;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "checkpoint.dir '" + dir + "': cannot create it (" + ec.message() + ")";
  const std::string probe = dir + "/.write-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return "checkpoint.dir '" + dir + "': cannot create a file there (" + std::strerror(errno) +
           "): the first checkpoint would fail";
  }
  ::close(fd);
  ::unlink(probe.c_str());
  // A directory that takes files but cannot be listed (mode -wx) would make every listing empty:
  // run.restart = auto would start afresh over a run's checkpoints, and none would be pruned.
  std::filesystem::directory_iterator listing(dir, ec);
  if (ec) {
    return "checkpoint.dir '" + dir + "': cannot list it (" + ec.message() +
           "): restarts and checkpoint.keep read its checkpoints";
  }
  return checkpoint_name_clash(dir);
}

std::string checkpoint_name_clash(const std::string& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const int64_t step = checkpoint_step_of_name(name);
    if (step < 0 && name != "latest") continue;
    // status follows a link: a link to a checkpoint file is a checkpoint; to a directory it is not.
    std::error_code kind_error;
    const std::filesystem::file_type kind = std::filesystem::status(it->path(), kind_error).type();
    if (kind_error || kind == std::filesystem::file_type::regular) continue;
    const std::string what = step >= 0 ? "where the run would write the checkpoint of step " + std::to_string(step)
                                       : "where the run names its newest checkpoint";
    return "checkpoint.dir '" + dir + "': '" + name + "' is " +
           (kind == std::filesystem::file_type::directory ? "a directory" : "not a regular file") + ", " + what +
           ", and a checkpoint cannot replace it; move it out of checkpoint.dir";
  }
  return "";
}

std::string checkpoint_metadata_problem(const std::string& path) {
  std::map<std::string, int64_t> attributes;
  std::map<std::string, double> doubles;
  bool has_deck = false;
  try {
    attributes = io::read_param_file_int_attributes(path);
    doubles = io::read_param_file_double_attributes(path);
    has_deck = io::read_param_file_string_attribute(path, "deck").has_value();
  } catch (const io::UserError& e) {
    return e.what();
  }
  const auto step = attributes.find("step");
  if (step == attributes.end()) return "parameter file '" + path + "': no step attribute";
  // Every checkpoint has both: without `samples` the data position is lost, without `deck` the
  // restart could not check that the model, optimizer and seed are the checkpointed run's.
  if (attributes.count("samples") == 0) return "parameter file '" + path + "': no samples attribute (damaged metadata)";
  if (!has_deck) return "parameter file '" + path + "': no deck attribute (damaged metadata)";
  if (step->second < 0) {
    return "parameter file '" + path + "': its step attribute is " + std::to_string(step->second) + " (damaged metadata)";
  }
  if (const auto scale = doubles.find("loss_scale"); scale != doubles.end() && !(std::isfinite(scale->second) && scale->second > 0)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", scale->second);
    return "parameter file '" + path + "': its loss_scale attribute is " + value + " (damaged metadata)";
  }
  if (const auto clean = attributes.find("loss_scale_clean_steps"); clean != attributes.end() && clean->second < 0) {
    return "parameter file '" + path + "': its loss_scale_clean_steps attribute is " + std::to_string(clean->second) +
           " (damaged metadata)";
  }
  const int64_t named = checkpoint_step_of_name(std::filesystem::path(path).filename().string());
  if (named < 0 || step->second == named) return "";
  return "parameter file '" + path + "': its step attribute is " + std::to_string(step->second) +
         " where its name says " + std::to_string(named) + " (damaged metadata)";
}

std::string checkpoint_name(int64_t steps_done) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%09lld.h5", static_cast<long long>(steps_done));
  return name;
}

namespace {

// The step of `file` when it is "step-" + digits + `suffix` ("step-000000030.h5" -> 30), else -1:
// a copy named otherwise (step-best.h5) is no checkpoint of the run.
int64_t named_step(const std::string& file, const std::string& suffix) {
  constexpr std::size_t kPrefix = 5;  // "step-"
  if (file.rfind("step-", 0) != 0 || file.size() <= kPrefix + suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits = file.substr(kPrefix, file.size() - kPrefix - suffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return -1;
  }
  return std::stoll(digits);
}

}  // namespace

int64_t checkpoint_step_of_name(const std::string& name) { return named_step(name, ".h5"); }

std::vector<std::string> list_checkpoint_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    // A directory of a checkpoint's name (a user's copy of one) is neither read nor set aside.
    std::error_code kind_error;
    if (it->is_directory(kind_error)) continue;
    if (const int64_t step = named_step(file, suffix); step >= 0) found.emplace_back(step, file);
  }
  // By step (a name of more than 9 digits sorts after the padded ones by number, not by text).
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [step, file] : found) names.push_back(std::move(file));
  return names;
}

std::vector<std::string> list_set_aside_files(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    const size_t bad = file.rfind(".h5.bad");
    if (file.rfind("step-", 0) != 0 || bad == std::string::npos) continue;
    const std::string tail = file.substr(bad + 7);  // "" or ".N"
    const bool numbered = tail.size() > 1 && tail[0] == '.' &&
                          std::all_of(tail.begin() + 1, tail.end(), [](unsigned char c) { return std::isdigit(c); });
    if (tail.empty() || numbered) names.push_back(file);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string set_aside_name(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::string candidate = name + ".bad";
  for (int n = 2; std::filesystem::exists(dir + "/" + candidate, ec); ++n) {
    candidate = name + ".bad." + std::to_string(n);
  }
  return candidate;
}

}  // namespace trident::train
