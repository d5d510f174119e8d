#include "io/metrics_log.h"

#include <unistd.h>  // fsync

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "io/user_error.h"

namespace trident::io {

MetricsLog::MetricsLog(const std::string& path, int64_t resume_after) : path_(path) {
  auto fail = [&path](const char* what) {
    throw UserError("metrics file '" + path + "': " + what + " (" + std::strerror(errno) + ")");
  };
  std::ifstream in;
  if (resume_after > 0) in.open(path);
  if (!in.is_open()) {
    if (resume_after > 0) {
      resume_note_ = "metrics: " + path + " was not there: it starts again at step " + std::to_string(resume_after + 1);
    }
    file_ = std::fopen(path.c_str(), "w");
    if (!file_) fail("cannot create");
    return;
  }
  // The kept lines go to PATH.tmp, renamed over PATH: a crash in between leaves the whole history
  // (one file or the other), where rewriting PATH in place would leave it truncated.
  const std::string temporary = path + ".tmp";
  std::FILE* kept = std::fopen(temporary.c_str(), "w");
  if (!kept) fail("cannot create its .tmp");
  std::string line;
  bool written = true;
  int64_t cut = 0;
  std::set<int64_t> steps;
  while (written && std::getline(in, line)) {
    // A line cut short (the file is flushed each step, not synced: a crash of the node can cut
    // its end) is dropped rather than kept as a line no JSON reader takes.
    if (line.size() < 2 || line.front() != '{' || line.back() != '}') {
      cut += line.empty() ? 0 : 1;
      continue;
    }
    const std::size_t at = line.find("\"step\": ");
    if (at == std::string::npos) continue;
    const int64_t step = std::strtoll(line.c_str() + at + 8, nullptr, 10);
    if (step <= resume_after) {
      written = std::fputs((line + "\n").c_str(), kept) >= 0;
      if (step >= 1) steps.insert(step);
    }
  }
  const int64_t held = static_cast<int64_t>(steps.size());
  if (cut > 0 || held < resume_after) {
    resume_note_ = "metrics: " + path;
    if (cut > 0) resume_note_ += ": " + std::to_string(cut) + " line(s) cut short dropped";
    if (held < resume_after) {
      resume_note_ += std::string(cut > 0 ? "; it" : ":") + " holds " + std::to_string(held) + " of steps 1 to " +
                      std::to_string(resume_after) + " (the others were lost)";
    }
  }
  written = written && std::fflush(kept) == 0 && ::fsync(fileno(kept)) == 0;
  if (std::fclose(kept) != 0 || !written) fail("cannot write its .tmp");
  if (std::rename(temporary.c_str(), path.c_str()) != 0) fail("cannot replace it with its .tmp");
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) fail("cannot open to append");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const std::vector<std::pair<std::string, double>>& fields) {
  std::string line = "{";
  char number[64];
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const double v = fields[i].second;
    if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
      // Counts (steps, tokens) in full: %.9g wrote 2^31 steps as 2.14748365e+09.
      std::snprintf(number, sizeof number, "%.0f", v);
    } else if (std::isfinite(v)) {
      std::snprintf(number, sizeof number, "%.9g", v);
    } else {
      std::snprintf(number, sizeof number, "null");  // JSON has no NaN/Inf
    }
    line += (i ? ", \"" : "\"") + fields[i].first + "\": " + number;
  }
  line += "}\n";
  if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0) {
    throw UserError("metrics file '" + path_ + "': write failed (" + std::strerror(errno) + ")");
  }
}

std::vector<std::vector<std::pair<std::string, double>>> read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("metrics file '" + path + "': cannot read");
  std::vector<std::vector<std::pair<std::string, double>>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::pair<std::string, double>> row;
    std::size_t pos = 0;
    // Our own flat format only: "key": number | null, separated by commas.
    while ((pos = line.find('"', pos)) != std::string::npos) {
      const std::size_t end = line.find('"', pos + 1);
      const std::string key = line.substr(pos + 1, end - pos - 1);
      std::size_t value_start = line.find(':', end) + 1;
      std::size_t value_end = line.find_first_of(",}", value_start);
      std::string text = line.substr(value_start, value_end - value_start);
      double value = text.find("null") != std::string::npos ? NAN : std::strtod(text.c_str(), nullptr);
      row.emplace_back(key, value);
      pos = value_end;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace trident::io
