// AdamWLoads::kPacks (four elements a thread on 16-byte accesses, run.adamw_loads = packs) against
// the default kValues, on the launchers directly: the same bits for the plain update and the
// master-weight update with each compute copy (fp32 holding bf16 values, bf16, fp16), with and
// without a decay mask, for lengths with every remainder modulo 4 (the last elements go one a
// thread) and for arrays that do not start on a pack (a ZeRO-1 shard's gradients may begin
// anywhere; the launcher then runs the one-element kernel). The twin tests in
// cuda_adamw_test.cpp hold kValues to the CPU.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/backend.h"              // AdamWArgs, AdamWLoads, adamw_decay_mask_words
#include "kernels/cuda/adamw.cuh"         // cuda::adamw_update, cuda::adamw_update_master
#include "kernels/precision.h"            // precision_name
#include "tests/gpu/twin_test_support.h"  // TwinBackends, BackendFloats, TwinTokens, bits_of

namespace trident::kernels::gpu_test {
namespace {

// A float buffer on the GPU with `offset` leading floats, so that the array proper starts
// `offset` elements past the allocation's 16-byte boundary.
class OffsetFloats {
 public:
  OffsetFloats(Backend& gpu, const std::vector<float>& values, std::size_t offset)
      : offset_(offset), buffer_(gpu, with_lead(values, offset)), gpu_(&gpu), count_(values.size()) {}
  float* get() { return buffer_.get() + offset_; }
  std::vector<float> values() {
    std::vector<float> all(offset_ + count_);
    gpu_->copy_to_host(all.data(), buffer_.get(), all.size());
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(offset_), all.end());
  }

 private:
  static std::vector<float> with_lead(const std::vector<float>& values, std::size_t offset) {
    std::vector<float> out(offset, 0.0f);
    out.insert(out.end(), values.begin(), values.end());
    return out;
  }
  std::size_t offset_;
  BackendFloats buffer_;
  Backend* gpu_;
  std::size_t count_;
};

// The first index where two runs' bits differ, or -1 (a readable failure on ~50k words).
long first_difference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return -1;
}

struct Start {
  std::size_t state = 0;  // floats past a 16-byte boundary: master (or param), m, v
  std::size_t grad = 0;   // the gradients'
  std::size_t copy = 0;   // the compute copy's, in its own elements (16-bit ones: 2 bytes each)
};

class AdamwPacks : public TwinBackends {
 protected:
  // A mask with runs of 45 decayed and 45 undecayed elements: runs cross the mask's words.
  std::vector<int32_t> decay_words(std::size_t n) {
    std::vector<int32_t> words(adamw_decay_mask_words(n), 0);
    for (std::size_t i = 0; i < n; ++i) {
      if ((i / 45) % 2 == 1) words[i / 32] = static_cast<int32_t>(static_cast<uint32_t>(words[i / 32]) | (1u << (i % 32)));
    }
    return words;
  }

  AdamWArgs args_for(const int32_t* mask) const {
    AdamWArgs args;
    args.lr = 0.05f;
    args.weight_decay = 0.5f;
    args.step = 9;
    args.grad_scale = 0.37f;
    args.decay_mask = mask;
    return args;
  }
};

TEST_F(AdamwPacks, PlainUpdateGivesTheSameBits) {
  for (const std::size_t n : {std::size_t{3}, std::size_t{4096}, std::size_t{4097}, std::size_t{4098},
                              std::size_t{4099}}) {
    for (const Start start : {Start{0, 0, 0}, Start{0, 1, 0}, Start{2, 0, 0}}) {
      for (const bool masked : {false, true}) {
        SCOPED_TRACE("n " + std::to_string(n) + ", state at +" + std::to_string(start.state) + ", grad at +" +
                     std::to_string(start.grad) + (masked ? ", decay mask" : ""));
        const std::vector<float> param0 = uniform(n, -1.0f, 1.0f), grad = uniform(n, -1.0f, 1.0f);
        const std::vector<float> m0 = uniform(n, -0.1f, 0.1f), v0 = uniform(n, 0.0f, 0.01f);
        const TwinTokens mask = twin_tokens(decay_words(n));
        std::vector<std::vector<uint32_t>> results;
        for (const AdamWLoads loads : {AdamWLoads::kValues, AdamWLoads::kPacks}) {
          OffsetFloats param(*gpu_, param0, start.state), m(*gpu_, m0, start.state), v(*gpu_, v0, start.state);
          OffsetFloats g(*gpu_, grad, start.grad);
          const int32_t* decay = masked ? mask.on(Side::kGpu) : nullptr;
          cuda::adamw_update(param.get(), g.get(), m.get(), v.get(), n, args_for(decay), nullptr, loads);
          gpu_->synchronize();
          std::vector<float> all = param.values();
          for (auto* state : {&m, &v}) {
            const std::vector<float> more = state->values();
            all.insert(all.end(), more.begin(), more.end());
          }
          results.push_back(bits_of(all));
        }
        EXPECT_EQ(first_difference(results[0], results[1]), -1) << "packs against values";
      }
    }
  }
}

TEST_F(AdamwPacks, MasterUpdateGivesTheSameBits) {
  struct Copy {
    Precision precision;
    bool sixteen;  // a 16-bit compute copy; otherwise an fp32 one holding the rounded values
  };
  for (const Copy copy : {Copy{Precision::kBf16, false}, Copy{Precision::kBf16, true}, Copy{Precision::kFp16, true},
                          Copy{Precision::kFp32, false}}) {
    for (const std::size_t n : {std::size_t{4096}, std::size_t{4101}, std::size_t{2}}) {
      // A 16-bit copy at +2 elements (4 bytes) cannot take 8-byte stores; at +4 it can.
      for (const Start start : {Start{0, 0, 0}, Start{0, 0, 2}, Start{0, 0, 4}, Start{0, 3, 0}}) {
        SCOPED_TRACE(std::string(precision_name(copy.precision)) + (copy.sixteen ? " 16-bit" : " fp32") +
                     " copy, n " + std::to_string(n) + ", grad at +" + std::to_string(start.grad) +
                     ", copy at +" + std::to_string(start.copy));
        const std::vector<float> master0 = uniform(n, -1.0f, 1.0f), grad = uniform(n, -1.0f, 1.0f);
        const std::vector<float> m0 = uniform(n, -0.1f, 0.1f), v0 = uniform(n, 0.0f, 0.01f);
        const TwinTokens mask = twin_tokens(decay_words(n));
        // The copy's buffer in floats: 16-bit values two to a float, `copy` of them before the array;
        // the same garbage for both runs, as the words around the array must come back unchanged.
        const std::size_t copy_floats = copy.sixteen ? (start.copy + n + 1) / 2 : start.copy + n;
        const std::vector<float> garbage = uniform(copy_floats, 5.0f, 9.0f);
        std::vector<std::vector<uint32_t>> results;
        for (const AdamWLoads loads : {AdamWLoads::kValues, AdamWLoads::kPacks}) {
          OffsetFloats master(*gpu_, master0, start.state), m(*gpu_, m0, start.state), v(*gpu_, v0, start.state);
          OffsetFloats g(*gpu_, grad, start.grad);
          BackendFloats compute(*gpu_, garbage);
          const ActPtr at = copy.sixteen ? ActPtr(reinterpret_cast<uint16_t*>(compute.get()) + start.copy, copy.precision)
                                         : ActPtr(compute.get() + start.copy);
          cuda::adamw_update_master(master.get(), at, g.get(), m.get(), v.get(), n, args_for(mask.on(Side::kGpu)), copy.precision,
                                    nullptr, loads);
          gpu_->synchronize();
          std::vector<float> all = master.values();
          for (auto* state : {&m, &v}) {
            const std::vector<float> more = state->values();
            all.insert(all.end(), more.begin(), more.end());
          }
          std::vector<float> copy_words(copy_floats);
          gpu_->copy_to_host(copy_words.data(), compute.get(), copy_words.size());
          all.insert(all.end(), copy_words.begin(), copy_words.end());
          results.push_back(bits_of(all));
        }
        EXPECT_EQ(first_difference(results[0], results[1]), -1) << "packs against values";
      }
    }
  }
}

}  // namespace
}  // namespace trident::kernels::gpu_test
