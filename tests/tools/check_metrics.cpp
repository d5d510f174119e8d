// check_metrics: assertions over metrics.jsonl files for the script tests.
//
//   check_metrics compare A.jsonl B.jsonl KEY RTOL   every step's KEY within RTOL (relative)
//   check_metrics floor RUN.jsonl DATASET.h5 WITHIN  last val_loss <= (1 + WITHIN) * entropy rate
//
// Prints what it compared; exits 1 on a failed assertion, 2 on bad input.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/metrics_log.h"
#include "io/token_dataset.h"

using Rows = std::vector<std::vector<std::pair<std::string, double>>>;

namespace {

double field(const std::vector<std::pair<std::string, double>>& row, const std::string& key) {
  for (const auto& [k, v] : row)
    if (k == key) return v;
  return NAN;
}

int compare(const std::string& a_path, const std::string& b_path, const std::string& key, double rtol) {
  const Rows a = trident::io::read_metrics(a_path), b = trident::io::read_metrics(b_path);
  if (a.size() != b.size() || a.empty()) {
    std::printf("FAIL: %zu rows in %s, %zu in %s\n", a.size(), a_path.c_str(), b.size(), b_path.c_str());
    return 1;
  }
  double worst = 0.0;
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = field(a[i], key), y = field(b[i], key);
    const double rel = std::fabs(x - y) / std::max(std::fabs(x), 1e-30);
    worst = std::max(worst, rel);
    if (!(rel <= rtol)) {
      std::printf("FAIL: step %zu %s %.9g vs %.9g (relative difference %.3g > %.3g)\n", i + 1, key.c_str(), x, y,
                  rel, rtol);
      ++failures;
    }
  }
  std::printf("%s: %zu steps compared, largest relative difference %.3g (tolerance %.3g)\n", key.c_str(), a.size(),
              worst, rtol);
  return failures ? 1 : 0;
}

int floor_check(const std::string& metrics, const std::string& dataset, double within) {
  const auto info = trident::io::read_token_file_info(dataset);
  const Rows rows = trident::io::read_metrics(metrics);
  double val = NAN;
  for (const auto& row : rows)
    if (!std::isnan(field(row, "val_loss"))) val = field(row, "val_loss");
  const double floor = info.entropy_rate_nats;
  std::printf("final val_loss %.4f, entropy rate %.4f nats, ratio %.3f (limit %.3f)\n", val, floor, val / floor,
              1.0 + within);
  return std::isfinite(val) && val <= (1.0 + within) * floor ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "compare" && argc == 6) return compare(argv[2], argv[3], argv[4], std::atof(argv[5]));
    if (mode == "floor" && argc == 5) return floor_check(argv[2], argv[3], std::atof(argv[4]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "check_metrics: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "usage: check_metrics compare A B KEY RTOL | floor METRICS DATASET WITHIN\n");
  return 2;
}
