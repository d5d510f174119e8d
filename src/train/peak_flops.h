// The peak for MFU when the deck gives none (log.peak_tflops = 0): a known GPU's datasheet peak
// for the precision trained in, else the measured rate of the backend's matmul on this rank.
#pragma once

#include <string>

#include "kernels/backend.h"

namespace trident::train {

// A GPU's dense peak in FLOP/s for the precision's GEMMs, from its datasheet: bf16 and fp16
// train on the tensor cores (the "dense bf16 peak"), fp32 on the CUDA cores (fp32
// GEMMs run without TF32). `device` is a backend name ("cuda (NVIDIA H100 80GB HBM3, sm_90)").
// Sets `which` to the datasheet entry used ("H100 SXM, dense bf16"). 0 for a GPU not in the
// table, and for CPUs.
double datasheet_peak_flops(const std::string& device, kernels::Precision precision, std::string& which);

// FLOP/s of the best 512 x 512 x 512 matmul after a warm-up call, timed for at least
// kPeakWindowSeconds and kPeakMinProducts products (at most kPeakMaxProducts): a window of a few
// milliseconds can fall wholly inside a burst of other load on a shared node, measure a low
// peak, and show MFU above 100% once the load is gone.
inline constexpr double kPeakWindowSeconds = 0.2;
inline constexpr int kPeakMinProducts = 5;
inline constexpr int kPeakMaxProducts = 400;
double measure_matmul_flops(kernels::Backend& backend);

}  // namespace trident::train
