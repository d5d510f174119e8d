// The choice among timed answers of cuBLASLt's heuristic (run.matmul_algorithms = timed,
// lt_matmul.cuh), host-only so that it is tested without a GPU.
#pragma once

#include <cstddef>
#include <vector>

namespace trident::kernels::cuda {

// What the timing found at one product shape (cuBLASLt's column-major m x n x k).
struct TimedMatmulShape {
  int m, n, k;
  int answers;      // the heuristic's answers that were timed
  int chosen;       // the index kept among them (0: the heuristic's first)
  float first_ms;   // the first answer's time a call
  float chosen_ms;  // the kept one's
};

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
