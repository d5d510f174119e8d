// check_metrics: assertions over metrics.jsonl files for the script tests.
//
//   check_metrics compare A.jsonl B.jsonl KEY RTOL   every step's KEY within RTOL (relative); the rows'
//       steps must be the same; null on both sides agrees only on a step both skipped (fp16)
//   check_metrics floor RUN.jsonl DATASET.h5 WITHIN  last val_loss <= (1 + WITHIN) * entropy rate
//       (the last row with a val_loss: null there fails)
//   check_metrics compare-params A.h5 B.h5 RTOL       two parameter files (docs/param-file.md):
//       the same dataset names and shapes, and relative differences in the 2-norm,
//       rel(x, y) = ||x - y||_2 / max(||x||_2, ||y||_2):
//         - all parameters as one vector:  rel <= RTOL
//         - every tensor on its own:       rel <= 10 * RTOL
//       The per-tensor limit is looser because one tensor can sit at ~1e-4 on every layout for
//       a known reason: the attention key bias (row 1 of blockN.attn.qkv.bias) has a gradient
//       that is zero in exact arithmetic (softmax ignores a shift common to all keys), so its
//       values are rounding noise amplified by AdamW (~1e-6, against ~1e-2 for the query and
//       value biases). A wrong slice or owner makes a tensor differ by O(1), far above either
//       limit. Element-wise differences are printed but not checked: AdamW's first steps
//       are ~lr * sign(gradient), so a gradient element that is ~0 can flip with rounding.
//       The padded vocabulary may differ between layouts: `wte` (the tied token embedding,
//       [padded vocab, C]) is compared on the rows both files have, and the extra rows of the
//       longer one must be exactly zero.
//   check_metrics describe FILE.h5                    a parameter file's contents, one per line,
//       for scripts to grep: every dataset as `NAME [D0, D1, ...]` (name order), every integer
//       root attribute as `@NAME = VALUE`, and the string attributes `format` and `source` as
//       `@NAME = TEXT` and `deck` as `@deck = N lines` when present.
//
// Prints what it compared; exits 1 on a failed assertion, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "io/metrics_log.h"
#include "io/param_file.h"
#include "io/token_dataset.h"

using Rows = std::vector<std::vector<std::pair<std::string, double>>>;

namespace {

double field(const std::vector<std::pair<std::string, double>>& row, const std::string& key) {
  for (const auto& [k, v] : row)
    if (k == key) return v;
  return NAN;
}

bool has_field(const std::vector<std::pair<std::string, double>>& row, const std::string& key) {
  return std::any_of(row.begin(), row.end(), [&key](const auto& entry) { return entry.first == key; });
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
    // Rows are paired by position: their steps must agree too (a resumed log with stale rows,
    // or one that skipped a step, would otherwise compare the wrong steps, or pass).
    if (!(field(a[i], "step") == field(b[i], "step"))) {
      std::printf("FAIL: row %zu is step %.0f in %s, step %.0f in %s\n", i + 1, field(a[i], "step"), a_path.c_str(),
                  field(b[i], "step"), b_path.c_str());
      ++failures;
      continue;
    }
    const double x = field(a[i], key), y = field(b[i], key);
    // A skipped fp16 step has no gradient norm (null): two runs skipping the same step agree.
    if (std::isnan(x) && std::isnan(y) && field(a[i], "skipped") == 1.0 && field(b[i], "skipped") == 1.0) continue;
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
  // The last evaluation's: a null there (a non-finite loss) fails, rather than an earlier one
  // standing in for it.
  double val = NAN;
  for (const auto& row : rows)
    if (has_field(row, "val_loss")) val = field(row, "val_loss");
  const double floor = info.entropy_rate_nats;
  std::printf("final val_loss %.4f, entropy rate %.4f nats, ratio %.3f (limit %.3f)\n", val, floor, val / floor,
              1.0 + within);
  return std::isfinite(val) && val <= (1.0 + within) * floor ? 0 : 1;
}

// How much looser one tensor may be than the whole model (see the header comment).
constexpr double kTensorFactor = 10.0;

// ||x - y||_2 / max(||x||_2, ||y||_2), 0 when both are zero.
struct NormDiff {
  double diff2 = 0.0, a2 = 0.0, b2 = 0.0;
  double relative() const {
    const double scale = std::sqrt(std::max(a2, b2));
    return scale > 0.0 ? std::sqrt(diff2) / scale : (diff2 > 0.0 ? INFINITY : 0.0);
  }
};

int compare_params(const std::string& a_path, const std::string& b_path, double rtol) {
  const auto a = trident::io::read_param_file(a_path), b = trident::io::read_param_file(b_path);
  int failures = 0;
  for (const auto& [name, entry] : a) {
    if (b.find(name) == b.end()) {
      std::printf("FAIL: tensor %s is in %s but not in %s\n", name.c_str(), a_path.c_str(), b_path.c_str());
      ++failures;
    }
  }
  for (const auto& [name, entry] : b) {
    if (a.find(name) == a.end()) {
      std::printf("FAIL: tensor %s is in %s but not in %s\n", name.c_str(), b_path.c_str(), a_path.c_str());
      ++failures;
    }
  }
  NormDiff total;
  double worst_tensor = 0.0, worst_element = 0.0;
  std::string worst_tensor_name, worst_element_name;
  std::size_t elements = 0;
  for (const auto& [name, a_entry] : a) {
    const auto found = b.find(name);
    if (found == b.end()) continue;
    const auto& [a_shape, a_values] = a_entry;
    const auto& [b_shape, b_values] = found->second;
    // The elements both files have: all of them, except for wte (padded vocabulary, row-major
    // [Vp, C]) whose leading dimension may differ: its common leading rows.
    std::size_t common = a_values.size();
    if (a_shape != b_shape) {
      const bool padded_rows = name == "wte" && a_shape.size() == 2 && b_shape.size() == 2 && a_shape[1] == b_shape[1];
      if (!padded_rows) {
        std::printf("FAIL: tensor %s has different shapes in the two files\n", name.c_str());
        ++failures;
        continue;
      }
      common = std::min(a_values.size(), b_values.size());
      const auto& longer = a_values.size() > b_values.size() ? a_values : b_values;
      std::size_t nonzero = 0;
      for (std::size_t i = common; i < longer.size(); ++i) nonzero += longer[i] != 0.0f ? 1 : 0;
      if (nonzero != 0) {
        std::printf("FAIL: tensor %s: %zu non-zero elements in the padding rows of the longer vocabulary\n",
                    name.c_str(), nonzero);
        ++failures;
      }
    }
    NormDiff tensor;
    for (std::size_t i = 0; i < common; ++i) {
      const double x = a_values[i], y = b_values[i];
      tensor.diff2 += (x - y) * (x - y);
      tensor.a2 += x * x;
      tensor.b2 += y * y;
      // Informational only: the largest element-wise |a-b| / max(|a|, |b|, 1e-3).
      const double rel = std::fabs(x - y) / std::max({std::fabs(x), std::fabs(y), 1e-3});
      if (!(rel <= worst_element)) {
        worst_element = std::isnan(rel) ? INFINITY : rel;
        worst_element_name = name + "[" + std::to_string(i) + "]";
      }
    }
    total.diff2 += tensor.diff2;
    total.a2 += tensor.a2;
    total.b2 += tensor.b2;
    elements += common;
    const double rel = tensor.relative();
    if (!(rel <= worst_tensor)) {
      worst_tensor = std::isnan(rel) ? INFINITY : rel;
      worst_tensor_name = name;
    }
    if (!(rel <= kTensorFactor * rtol)) {
      std::printf("FAIL: tensor %s: relative difference %.3g > %.3g\n", name.c_str(), rel, kTensorFactor * rtol);
      ++failures;
    }
  }
  const double whole = total.relative();
  if (!(whole <= rtol)) {
    std::printf("FAIL: all parameters: relative difference %.3g > %.3g\n", whole, rtol);
    ++failures;
  }
  std::printf("parameters: %zu tensors, %zu elements; relative 2-norm difference %.3g (limit %.3g), worst tensor "
              "%.3g in %s (limit %.3g); largest element-wise |a-b|/max(|a|,|b|,1e-3) %.3g in %s (not checked)\n",
              a.size(), elements, whole, rtol, worst_tensor, worst_tensor_name.empty() ? "-" : worst_tensor_name.c_str(), kTensorFactor * rtol,
              worst_element, worst_element_name.empty() ? "-" : worst_element_name.c_str());
  return failures || a.empty() ? 1 : 0;
}

int describe(const std::string& path) {
  for (const auto& [name, entry] : trident::io::read_param_file(path)) {
    std::string shape;
    for (const int64_t d : entry.first) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::printf("%s [%s]\n", name.c_str(), shape.c_str());
  }
  for (const auto& [name, value] : trident::io::read_param_file_int_attributes(path)) {
    std::printf("@%s = %lld\n", name.c_str(), static_cast<long long>(value));
  }
  // The reader has no listing of string attributes: ask for the ones the writers set.
  for (const char* name : {"format", "checksum_algorithm", "source"}) {
    if (const auto value = trident::io::read_param_file_string_attribute(path, name)) {
      std::printf("@%s = %s\n", name, value->c_str());
    }
  }
  if (const auto deck = trident::io::read_param_file_string_attribute(path, "deck")) {
    std::printf("@deck = %lld lines\n", static_cast<long long>(std::count(deck->begin(), deck->end(), '\n')));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "compare" && argc == 6) return compare(argv[2], argv[3], argv[4], std::atof(argv[5]));
    if (mode == "floor" && argc == 5) return floor_check(argv[2], argv[3], std::atof(argv[4]));
    if (mode == "compare-params" && argc == 5) return compare_params(argv[2], argv[3], std::atof(argv[4]));
    if (mode == "describe" && argc == 3) return describe(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "check_metrics: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr,
               "usage: check_metrics compare A B KEY RTOL | floor METRICS DATASET WITHIN |\n"
               "       check_metrics compare-params A.h5 B.h5 RTOL   (||a-b||_2 / max(||a||_2, ||b||_2) <= RTOL over\n"
               "       all parameters and <= 10 * RTOL per tensor; wte compared on the common rows, the extra\n"
               "       padded rows must be zero)\n"
               "       check_metrics describe FILE.h5   (every dataset `NAME [shape]`, attributes `@NAME = VALUE`)\n");
  return 2;
}
