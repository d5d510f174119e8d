// Measures the rate of the backend's matmul on this rank (512^3 products, best of several),
// as the peak for MFU when the deck gives none (log.peak_tflops = 0) on a CPU.
#pragma once

#include "kernels/backend.h"

namespace trident::train {

// FLOP/s of the best of a few 512 x 512 x 512 matmuls.
double measure_matmul_flops(kernels::Backend& backend);

}  // namespace trident::train
