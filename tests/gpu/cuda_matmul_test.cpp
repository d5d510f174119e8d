// The CUDA backend's linear layers against the CPU twin: matmul forward and backward in fp32
// and TF32, and the bias and weight gradients' sums, the same bits run to run.
// (twin_test_support.h: the measure and the tolerances; cuda_backend_test.cpp: how the shapes and
// starting values are chosen.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend.h"              // Backend, BackendOptions
#include "tests/gpu/twin_test_support.h"  // TwinBackends, expect_twins_agree, tolerances

namespace trident::kernels::gpu_test {
namespace {

// --- matmul ------------------------------------------------------------------------------------

struct MatmulShape {
  const char* name;
  int N, C, OC;
};
constexpr MatmulShape kMatmulShapes[] = {
    {"N=74 C=48 OC=144", 74, 48, 144},
    {"N=74 C=48 OC=61 (an LM head)", 74, 48, 61},
    // N*OC = 462600 > 1024 blocks * 256 threads: the bias broadcast's grid-stride loop takes
    // several turns; OC = 771 leaves the last dbias block of 32 columns partial.
    {"N=600 C=48 OC=771 (bias broadcast past one grid pass)", 600, 48, 771},
};

TEST_F(TwinBackends, MatmulForwardMatchesCpu) {
  for (const MatmulShape& s : kMatmulShapes) {
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(std::string(s.name) + (with_bias ? ", with bias" : ", without bias"));
      auto inp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
      auto weight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto bias = twin(uniform(count_of(s.OC, 1), -1.0f, 1.0f));
      auto out = twin(uniform(count_of(s.N, s.OC), 5.0f, 9.0f));  // garbage: overwritten
      run_on_both([&](Backend& b, Side side) {
        b.matmul_forward(out.on(side), inp.on(side), weight.on(side),
                         with_bias ? bias.on(side) : nullptr, s.N, s.C, s.OC);
      });
      expect_twins_agree(out, kReductionTolerance, "out");
    }
  }
}

// With every input bf16- or fp16-representable, the TF32 tensor-core GEMMs that
// set_gemm_input_precision turns on are exact on the inputs and accumulate in fp32: the same
// tolerance as fp32 math. Unrounded inputs would be rounded to TF32 (2^-11 relative) and fail it.
TEST_F(TwinBackends, Tf32GemmsAgreeWithFp32OnRoundedInputs) {
  for (const Precision p : {Precision::kBf16, Precision::kFp16}) {
    gpu_->set_gemm_input_precision(p);
    for (const MatmulShape& s : kMatmulShapes) {
      SCOPED_TRACE(std::string(precision_name(p)) + ", " + s.name);
      auto rounded = [p](std::vector<float> v) {
        for (float& x : v) x = round_to_precision(x, p);
        return v;
      };
      auto inp = twin(rounded(uniform(count_of(s.N, s.C), -1.0f, 1.0f)));
      auto weight = twin(rounded(uniform(count_of(s.OC, s.C), -1.0f, 1.0f)));
      auto out = twin(uniform(count_of(s.N, s.OC), 5.0f, 9.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_forward(out.on(side), inp.on(side), weight.on(side), nullptr, s.N, s.C, s.OC);
      });
      expect_twins_agree(out, kReductionTolerance, "out");
      auto dout = twin(rounded(uniform(count_of(s.N, s.OC), -1.0f, 1.0f)));
      auto dweight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_backward(nullptr, dweight.on(side), nullptr, dout.on(side), inp.on(side), weight.on(side), s.N, s.C,
                          s.OC);
      });
      expect_twins_agree(dweight, kReductionTolerance, "dweight");
    }
  }
  gpu_->set_gemm_input_precision(Precision::kFp32);
}

// dweight and dbias accumulate into their non-zero start; dinp is overwritten (garbage start).
TEST_F(TwinBackends, MatmulBackwardMatchesCpu) {
  for (const MatmulShape& s : kMatmulShapes) {
    for (const bool all_outputs : {true, false}) {
      SCOPED_TRACE(std::string(s.name) + (all_outputs ? ", all outputs" : ", dweight only"));
      auto dout = twin(uniform(count_of(s.N, s.OC), -1.0f, 1.0f));
      auto inp = twin(uniform(count_of(s.N, s.C), -1.0f, 1.0f));
      auto weight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto dinp = twin(uniform(count_of(s.N, s.C), 5.0f, 9.0f));  // garbage: overwritten
      auto dweight = twin(uniform(count_of(s.OC, s.C), -1.0f, 1.0f));
      auto dbias = twin(uniform(count_of(s.OC, 1), -1.0f, 1.0f));
      run_on_both([&](Backend& b, Side side) {
        b.matmul_backward(all_outputs ? dinp.on(side) : nullptr, dweight.on(side),
                          all_outputs ? dbias.on(side) : nullptr, dout.on(side), inp.on(side),
                          weight.on(side), s.N, s.C, s.OC);
      });
      expect_twins_agree(dinp, kReductionTolerance, "dinp");
      expect_twins_agree(dweight, kReductionTolerance, "dweight");
      expect_twins_agree(dbias, kReductionTolerance, "dbias");
    }
  }
}

// The bias and LayerNorm parameter gradients are sums over rows in a fixed order
// (kernels/cuda/column_sums_math.h, a two-stage reduction over row chunks): two runs from the
// same state give the same bits. At N = 8192 rows (GPT-2 124M at micro-batch 8) the sums are
// longest; against the CPU's rows-in-order fp32 loop the difference is that loop's own rounding,
// ~sqrt(N) ulp (the playground measured up to 3.7e-6 of the largest sum): kReductionTolerance.
TEST_F(TwinBackends, ParameterGradientSumsAreTheSameBitsRunToRun) {
  const int N = 8192, C = 768, OC = 3 * C;
  auto dout = twin(uniform(count_of(N, OC), -1.0f, 1.0f)), inp = twin(uniform(count_of(N, C), -2.0f, 2.0f));
  auto weight = twin(uniform(count_of(OC, C), -1.0f, 1.0f));
  const std::vector<float> dbias_start = uniform(count_of(OC, 1), -1.0f, 1.0f);
  auto dweight = twin(std::vector<float>(count_of(OC, C), 0.0f));
  auto dbias = twin(dbias_start), again = twin(dbias_start);
  run_on_both([&](Backend& b, Side side) {
    b.matmul_backward(nullptr, dweight.on(side), dbias.on(side), dout.on(side), inp.on(side), weight.on(side), N, C,
                      OC);
  });
  gpu_->matmul_backward(nullptr, dweight.on(Side::kGpu), again.on(Side::kGpu), dout.on(Side::kGpu), inp.on(Side::kGpu),
                        weight.on(Side::kGpu), N, C, OC);
  expect_twins_agree(dbias, kReductionTolerance, "dbias at N = 8192");
  EXPECT_EQ(again.values(Side::kGpu), dbias.values(Side::kGpu)) << "bias gradient, run to run";

  // LayerNorm's pair on the first C columns of dout, with made-up statistics (any values do).
  auto ln_dout = twin(uniform(count_of(N, C), -1.0f, 1.0f)), dinp = twin(std::vector<float>(count_of(N, C), 0.0f));
  auto ln_weight = twin(uniform(count_of(C, 1), 0.5f, 1.5f));
  auto mean = twin(uniform(count_of(N, 1), -0.5f, 0.5f)), rstd = twin(uniform(count_of(N, 1), 0.5f, 2.0f));
  const std::vector<float> start = uniform(count_of(C, 1), -1.0f, 1.0f);
  auto dw = twin(start), db = twin(start), dw2 = twin(start), db2 = twin(start);
  run_on_both([&](Backend& b, Side side) {
    b.layernorm_backward(dinp.on(side), dw.on(side), db.on(side), ln_dout.on(side), inp.on(side), ln_weight.on(side),
                         mean.on(side), rstd.on(side), N, C);
  });
  const Side g = Side::kGpu;
  gpu_->layernorm_backward(dinp.on(g), dw2.on(g), db2.on(g), ln_dout.on(g), inp.on(g), ln_weight.on(g), mean.on(g),
                           rstd.on(g), N, C);
  expect_twins_agree(dw, kReductionTolerance, "layernorm dweight at N = 8192");
  expect_twins_agree(db, kReductionTolerance, "layernorm dbias at N = 8192");
  EXPECT_EQ(dw2.values(g), dw.values(g)) << "layernorm dweight, run to run";
  EXPECT_EQ(db2.values(g), db.values(g)) << "layernorm dbias, run to run";
}


}  // namespace
}  // namespace trident::kernels::gpu_test
