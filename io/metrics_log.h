// MetricsLog: run.dir/metrics.jsonl, one JSON object per line (per step, per evaluation), so a
// run can be plotted or compared with any tool. Written by one rank (rank 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace trident::io {

class MetricsLog {
 public:
  // Starts PATH afresh, or, for a run resumed after `resume_after` steps, keeps its lines of
  // steps up to resume_after (dropping any the interrupted run wrote after its checkpoint) and
  // appends. Throws UserError naming the file when it cannot be written.
  explicit MetricsLog(const std::string& path, int64_t resume_after = 0);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // Writes {"k1": v1, ...} with numbers at 9 significant digits (exact float round trip), whole
  // numbers below 2^53 (steps, tokens) in full, and flushes so a crashed run keeps every line
  // written.
  void write(const std::vector<std::pair<std::string, double>>& fields);
  // For a resumed run, what the kept history lacks ("" when nothing): lines cut short (dropped),
  // steps up to resume_after that are not there, or the whole file gone.
  const std::string& resume_note() const { return resume_note_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string resume_note_;
};

// Reads back the lines of a metrics file: each line as (key, value) pairs. For tests and tools.
std::vector<std::vector<std::pair<std::string, double>>> read_metrics(const std::string& path);

}  // namespace trident::io
