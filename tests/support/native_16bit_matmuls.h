// Test support: a CPU backend whose matmuls say they read 16-bit operands, as the CUDA backend's
// do (Backend::matmul_reads_16bit). It implements them by widening into vectors of its own and
// running the fp32 kernel, which gives the bits of RoundedStorageBackend's widening, so that the
// pass-through of 16-bit matmuls (and the staging it saves) can be tested without a GPU.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/forwarding_backend.h"

namespace trident::test_support {

class Native16BitMatmuls final : public kernels::ForwardingBackend {
 public:
  using kernels::ForwardingBackend::ForwardingBackend;
  bool matmul_reads_16bit() const override { return true; }
  int native_calls = 0;  // matmul calls that arrived with 16-bit operands

  void matmul_forward(kernels::ActPtr out, kernels::ConstActPtr inp, kernels::ConstActPtr weight,
                      kernels::ConstActPtr bias, int N, int C, int OC) override {
    if (inp.is_fp32()) {
      inner().matmul_forward(out, inp, weight, bias, N, C, OC);
      return;
    }
    ++native_calls;
    std::vector<float> o(static_cast<std::size_t>(N) * OC);
    const auto i = widened(inp, N * C), w = widened(weight, OC * C), b = widened(bias, OC);
    // An fp32 out (the LM head's logits) takes the fp32 results as they are.
    float* result = out.is_fp32() ? out.f32() : o.data();
    inner().matmul_forward(result, i.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
    if (!out.is_fp32()) inner().narrow(out, o.data(), o.size());
  }

  void matmul_backward(kernels::ActPtr dinp, float* dweight, float* dbias, kernels::ConstActPtr dout,
                       kernels::ConstActPtr inp, kernels::ConstActPtr weight, int N, int C, int OC) override {
    if (dout.is_fp32()) {
      inner().matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
      return;
    }
    ++native_calls;
    auto di = widened(dinp, N * C);
    const auto d = widened(dout, N * OC), i = widened(inp, N * C), w = widened(weight, OC * C);
    inner().matmul_backward(dinp ? di.data() : nullptr, dweight, dbias, d.data(), i.data(), w.data(), N, C, OC);
    if (dinp) inner().narrow(dinp, di.data(), di.size());
  }

 private:
  std::vector<float> widened(kernels::ConstActPtr p, int n) {
    std::vector<float> v(p ? static_cast<std::size_t>(n) : 0);
    if (p) inner().widen(v.data(), p, v.size());
    return v;
  }
};

}  // namespace trident::test_support
