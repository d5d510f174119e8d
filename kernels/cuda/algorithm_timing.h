// The choice among timed answers of cuBLASLt's heuristic (run.matmul_algorithms = timed,
// lt_matmul.cuh), host-only so that it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace trident::kernels::cuda {

// What the timing found at one product shape (cuBLASLt's column-major m x n x k).
struct TimedMatmulShape {
  int m, n, k;
  int answers;      // the heuristic's answers that were timed
  int chosen;       // the index kept among them (0: the heuristic's first)
  float first_ms;   // the first answer's time a call
  float chosen_ms;  // the kept one's
  bool adopted = false;  // taken from a table (the ranks' agreed one, or a checkpoint's), not timed here
};

// A shape's chosen answer as a choice table keeps it (kernels/choice_table.h: the VALUE of its
// line): "answer 2 of 8 (first 0.1234 ms, chosen 0.1011 ms)", the index counted from 0.
inline std::string format_chosen_answer(const TimedMatmulShape& s) {
  char text[96];
  std::snprintf(text, sizeof text, "answer %d of %d (first %.4f ms, chosen %.4f ms)", s.chosen, s.answers,
                static_cast<double>(s.first_ms), static_cast<double>(s.chosen_ms));
  return text;
}

// The answer, its count and times of such a value (m, n, k and adopted left as they are);
// nullopt when the text is not one, or the answer is not among the answers.
inline std::optional<TimedMatmulShape> parse_chosen_answer(const std::string& value, TimedMatmulShape shape = {}) {
  int consumed = 0;
  if (std::sscanf(value.c_str(), "answer %d of %d (first %f ms, chosen %f ms)%n", &shape.chosen, &shape.answers,
                  &shape.first_ms, &shape.chosen_ms, &consumed) != 4 ||
      static_cast<std::size_t>(consumed) != value.size() || shape.chosen < 0 || shape.chosen >= shape.answers) {
    return std::nullopt;
  }
  return shape;
}

// Of the heuristic's answers in its order, timed in milliseconds (negative: the answer failed to
// run), the index to keep: the first answer unless another is faster than it by more than
// `margin` (a fraction; the timing's noise, so that equal kernels do not flip between runs), then
// the fastest; where the first failed, the fastest that ran; -1 when none ran.
inline int fastest_answer(const std::vector<float>& ms, float margin) {
  int fastest = -1;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (ms[i] >= 0.0f && (fastest < 0 || ms[i] < ms[static_cast<std::size_t>(fastest)])) {
      fastest = static_cast<int>(i);
    }
  }
  if (fastest <= 0 || ms[0] < 0.0f) return fastest;
  return ms[static_cast<std::size_t>(fastest)] < (1.0f - margin) * ms[0] ? fastest : 0;
}

}  // namespace trident::kernels::cuda
