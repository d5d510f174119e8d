// The CUDA backend's LayerNorm (alone and fused with the residual add) and GELU against the
// CPU twin, forward and backward.
// (twin_test_support.h: the measure and the tolerances; cuda_backend_test.cpp: how the shapes and
// starting values are chosen.)
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

struct RowShape {
  const char* name;
  int N, C;
};
constexpr RowShape kLayernormShapes[] = {
    {"N=74 C=48", 74, 48},
    {"N=5 C=771 (rows longer than a block)", 5, 771},
};

// --- layernorm ---------------------------------------------------------------------------------

TEST_F(TwinBackends, LayernormForwardMatchesCpu) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    auto inp = twin(uniform(count_of(s.N, s.C), -2.0f, 3.0f));  // mean ~0.5: centring matters
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    auto out = twin(uniform(count_of(s.N, s.C), 5.0f, 9.0f));  // garbage: overwritten
    auto mean = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto rstd = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    run_on_both([&](Backend& b, Side side) {
      b.layernorm_forward(out.on(side), mean.on(side), rstd.on(side), inp.on(side), weight.on(side),
                          bias.on(side), s.N, s.C);
    });
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(mean, kReductionTolerance, "mean");
    expect_twins_agree(rstd, kReductionTolerance, "rstd");
  }
}

// The fused residual add + LayerNorm: against the CPU's fused twin within the LayerNorm's
// tolerance (the add is one IEEE rounding on both sides, so the residual is identical), and on
// the GPU bit-identical to its own add followed by its own LayerNorm (the contract in
// backend.h), also with the residual overwriting an input.
TEST_F(TwinBackends, FusedResidualLayernormMatchesCpuAndItsParts) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    const std::size_t n = count_of(s.N, s.C);
    auto a = twin(uniform(n, -2.0f, 3.0f));
    auto b = twin(uniform(n, -1.0f, 1.0f));
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    auto residual = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    auto out = twin(uniform(n, 5.0f, 9.0f));
    auto mean = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    auto rstd = twin(uniform(count_of(s.N, 1), 5.0f, 9.0f));
    run_on_both([&](Backend& be, Side side) {
      be.residual_layernorm_forward(residual.on(side), out.on(side), mean.on(side), rstd.on(side), a.on(side),
                                    b.on(side), weight.on(side), bias.on(side), s.N, s.C);
    });
    expect_twins_agree(residual, 0.0, "residual");
    expect_twins_agree(out, kReductionTolerance, "out");
    expect_twins_agree(mean, kReductionTolerance, "mean");
    expect_twins_agree(rstd, kReductionTolerance, "rstd");

    // The GPU's parts, then the fused kernel in place: the residual overwriting a, then b
    // (both allowed by the contract); the same bits.
    auto sum = twin(uniform(n, 5.0f, 9.0f));
    auto parts_out = twin(uniform(n, 5.0f, 9.0f));
    for (auto* residual_in_place : {&a, &b}) {
      gpu_->add(sum.on(Side::kGpu), a.on(Side::kGpu), b.on(Side::kGpu), n);
      gpu_->layernorm_forward(parts_out.on(Side::kGpu), mean.on(Side::kGpu), rstd.on(Side::kGpu), sum.on(Side::kGpu),
                              weight.on(Side::kGpu), bias.on(Side::kGpu), s.N, s.C);
      gpu_->residual_layernorm_forward(residual_in_place->on(Side::kGpu), out.on(Side::kGpu), mean.on(Side::kGpu),
                                       rstd.on(Side::kGpu), a.on(Side::kGpu), b.on(Side::kGpu), weight.on(Side::kGpu),
                                       bias.on(Side::kGpu), s.N, s.C);
      EXPECT_EQ(residual_in_place->values(Side::kGpu), sum.values(Side::kGpu));
      EXPECT_EQ(out.values(Side::kGpu), parts_out.values(Side::kGpu));
    }
  }
}

TEST_F(TwinBackends, LayernormBackwardAccumulatesLikeCpu) {
  for (const RowShape& s : kLayernormShapes) {
    SCOPED_TRACE(s.name);
    const std::vector<float> inp_host = uniform(count_of(s.N, s.C), -2.0f, 3.0f);
    auto inp = twin(inp_host);
    auto weight = twin(uniform(count_of(s.C, 1), 0.5f, 1.5f));
    auto bias = twin(uniform(count_of(s.C, 1), -0.5f, 0.5f));
    // The saved statistics both twins use: the CPU forward's.
    std::vector<float> mean_host(count_of(s.N, 1));
    std::vector<float> rstd_host(count_of(s.N, 1));
    {
      auto out = twin(std::vector<float>(count_of(s.N, s.C)));
      auto mean = twin(mean_host);
      auto rstd = twin(rstd_host);
      cpu_->layernorm_forward(out.on(Side::kCpu), mean.on(Side::kCpu), rstd.on(Side::kCpu),
                              inp.on(Side::kCpu), weight.on(Side::kCpu), bias.on(Side::kCpu), s.N,
                              s.C);
      mean_host = mean.values(Side::kCpu);
      rstd_host = rstd.values(Side::kCpu);
    }
    auto mean = twin(mean_host);
    auto rstd = twin(rstd_host);
    auto dout = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
    auto dinp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
    auto dweight = twin(uniform(count_of(s.C, 1), -1.0f, 1.0f));
    auto dbias = twin(uniform(count_of(s.C, 1), -1.0f, 1.0f));
    run_on_both([&](Backend& b, Side side) {
      b.layernorm_backward(dinp.on(side), dweight.on(side), dbias.on(side), dout.on(side),
                           inp.on(side), weight.on(side), mean.on(side), rstd.on(side), s.N, s.C);
    });
    expect_twins_agree(dinp, kReductionTolerance, "dinp");
    expect_twins_agree(dweight, kReductionTolerance, "dweight");
    expect_twins_agree(dbias, kReductionTolerance, "dbias");
  }
}


// --- GELU --------------------------------------------------------------------------------------

TEST_F(TwinBackends, GeluForwardMatchesCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto inp = twin(uniform(n, -6.0f, 6.0f));  // both tails and the curved middle
    auto out = twin(uniform(n, 5.0f, 9.0f));   // garbage: overwritten
    run_on_both([&](Backend& b, Side side) { b.gelu_forward(out.on(side), inp.on(side), n); });
    expect_twins_agree(out, kElementwiseTolerance, "out");
  }
}

// dinp overwritten (garbage start), and in place (dinp = dout), as the model's MLP runs it.
TEST_F(TwinBackends, GeluBackwardMatchesCpu) {
  for (const std::size_t n : {kSmallLength, kLargeLength}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    auto inp = twin(uniform(n, -6.0f, 6.0f));
    auto dout = twin(uniform(n, -1.0f, 1.0f));
    auto dinp = twin(uniform(n, 5.0f, 9.0f));  // garbage: overwritten
    auto in_place = twin(dout.values(Side::kCpu));
    run_on_both([&](Backend& b, Side side) {
      b.gelu_backward(dinp.on(side), inp.on(side), dout.on(side), n);
      b.gelu_backward(in_place.on(side), inp.on(side), in_place.on(side), n);
    });
    expect_twins_agree(dinp, kGeluBackwardTolerance, "dinp");
    expect_twins_agree(in_place, kGeluBackwardTolerance, "dinp in place");
  }
}


}  // namespace
}  // namespace trident::kernels::gpu_test
