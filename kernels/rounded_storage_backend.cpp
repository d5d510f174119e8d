#include "kernels/rounded_storage_backend.h"

#include <algorithm>  // std::max
#include <array>
#include <stdexcept>

namespace trident::kernels {

namespace {
std::size_t product(int a, int b) { return static_cast<std::size_t>(a) * static_cast<std::size_t>(b); }
}  // namespace

// The fp32 views of one call's activation operands. Each operand is declared as read (an input),
// written (an output the kernel overwrites) or both (an output it accumulates into, or one
// aliasing an input); the same buffer declared twice gets one view, so aliasing the contract
// allows (dlogits = logits, residual = a) is preserved. Then load() makes the views: an fp32
// operand is its own view; a 16-bit one (an activation, or a weight of a 16-bit compute copy)
// gets a slice of the workspace, widened when read. After
// the inner call, store() rounds the written fp32 operands in place and narrows the written
// 16-bit views into their buffers. No allocation per call: at most kMaxOperands operands.
class RoundedStorageBackend::Staging {
 public:
  explicit Staging(RoundedStorageBackend& owner) : owner_(owner) {}

  int input(ConstActPtr p, std::size_t n) { return declare(p.get(), nullptr, p.storage(), n, true, false); }
  int output(ActPtr p, std::size_t n) { return declare(p.get(), p.get(), p.storage(), n, false, true); }
  int accumulated(ActPtr p, std::size_t n) { return declare(p.get(), p.get(), p.storage(), n, true, true); }

  void load() {
    std::size_t floats = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      if (operands_[i].storage != Precision::kFp32) floats += operands_[i].n;
    }
    float* workspace = floats > 0 ? owner_.workspace(floats) : nullptr;
    for (std::size_t i = 0; i < count_; ++i) {
      Operand& o = operands_[i];
      if (o.storage == Precision::kFp32) {
        o.view = static_cast<float*>(const_cast<void*>(o.address));  // the buffer itself
        continue;
      }
      o.view = workspace;
      workspace += o.n;
      if (o.read) owner_.inner().widen(o.view, ConstActPtr(static_cast<const uint16_t*>(o.address), o.storage), o.n);
    }
  }

  float* operator[](int index) const { return index < 0 ? nullptr : operands_[static_cast<std::size_t>(index)].view; }

  void store() {
    for (std::size_t i = 0; i < count_; ++i) {
      const Operand& o = operands_[i];
      if (!o.written) continue;
      if (o.storage == Precision::kFp32) {
        owner_.inner().round_to_precision(o.view, o.view, o.n, owner_.precision_);
      } else {
        owner_.inner().narrow(ActPtr(static_cast<uint16_t*>(o.writable), o.storage), o.view, o.n);
      }
    }
  }

 private:
  static constexpr std::size_t kMaxOperands = 4;
  struct Operand {
    const void* address = nullptr;
    void* writable = nullptr;  // the same address, when some declaration may write it
    Precision storage = Precision::kFp32;
    std::size_t n = 0;
    bool read = false, written = false;
    float* view = nullptr;
  };

  int declare(const void* address, void* writable, Precision storage, std::size_t n, bool read, bool written) {
    if (address == nullptr) return -1;  // an optional buffer not given (matmul's dinp)
    if (storage != Precision::kFp32 && storage != owner_.precision_) {
      throw std::logic_error(std::string("RoundedStorageBackend: ") + precision_name(storage) +
                             " activations given to a " + precision_name(owner_.precision_) + " backend");
    }
    for (std::size_t i = 0; i < count_; ++i) {
      Operand& o = operands_[i];
      if (o.address != address) continue;
      o.n = std::max(o.n, n);
      o.read = o.read || read;
      o.written = o.written || written;
      if (writable != nullptr) o.writable = writable;
      return static_cast<int>(i);
    }
    if (count_ == kMaxOperands) throw std::logic_error("RoundedStorageBackend: too many operands in one call");
    operands_[count_] = Operand{address, writable, storage, n, read, written, nullptr};
    return static_cast<int>(count_++);
  }

  RoundedStorageBackend& owner_;
  std::array<Operand, kMaxOperands> operands_{};
  std::size_t count_ = 0;
};

RoundedStorageBackend::RoundedStorageBackend(Backend& inner, Precision precision)
    : ForwardingBackend(inner), precision_(precision) {
  if (precision == Precision::kFp32) throw std::logic_error("RoundedStorageBackend: fp32 storage rounds nothing");
  // Every GEMM input is now a stored (rounded) activation or the rounded compute copy of a
  // weight: the inner backend may use tensor-core math that is exact on them.
  inner.set_gemm_input_precision(precision);
}

RoundedStorageBackend::~RoundedStorageBackend() {
  if (workspace_ != nullptr) inner().release(workspace_);
}

std::string RoundedStorageBackend::name() const {
  const std::string p = precision_name(precision_);
  const Native16BitKernels native = inner().native_16bit();
  if (!native.any()) return inner().name() + ", " + p + " storage on fp32 kernels (rounded outputs)";
  std::string native_list, widened_list;
  auto list = [&](bool is_native, const char* family) {
    std::string& names = is_native ? native_list : widened_list;
    names += (names.empty() ? "" : ", ");
    names += family;
  };
  list(native.matmul, "matmul");
  list(native.layernorm, "layernorm");
  list(native.gelu, "gelu");
  list(native.add, "add");
  list(native.attention, "attention");
  list(native.embedding, "embedding");
  list(native.cross_entropy, "cross_entropy");
  std::string description = inner().name() + ", " + p + " storage: " + p + " kernels (" + native_list + ")";
  if (!widened_list.empty()) description += "; " + widened_list + " on fp32 (rounded outputs)";
  return description;
}

float* RoundedStorageBackend::workspace(std::size_t floats) {
  if (floats > workspace_floats_) {
    // Grown on the first call of each larger shape, so after the first step nothing is
    // allocated. Releasing on a device waits for the work queued on the old workspace.
    if (workspace_ != nullptr) inner().release(workspace_);
    workspace_ = inner().allocate(floats);
    workspace_floats_ = floats;
  }
  return workspace_;
}

void RoundedStorageBackend::embedding_forward(ActPtr out, const int32_t* tokens, ConstActPtr wte, ConstActPtr wpe,
                                              int B, int T, int C, int vocab_begin, int vocab_end) {
  if (native(inner().native_16bit().embedding, {out, wte, wpe})) {
    inner().embedding_forward(out, tokens, wte, wpe, B, T, C, vocab_begin, vocab_end);
    return;
  }
  Staging s(*this);
  const int o = s.output(out, product(B * T, C)), w = s.input(wte, product(vocab_end - vocab_begin, C)),
            p = s.input(wpe, product(T, C));
  s.load();
  inner().embedding_forward(s[o], tokens, s[w], s[p], B, T, C, vocab_begin, vocab_end);
  s.store();
}

void RoundedStorageBackend::embedding_backward(float* dwte, float* dwpe, ConstActPtr dout, const int32_t* tokens,
                                               int B, int T, int C, int vocab_begin, int vocab_end) {
  if (native(inner().native_16bit().embedding, {dout})) {
    inner().embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end);
    return;
  }
  Staging s(*this);
  const int d = s.input(dout, product(B * T, C));
  s.load();
  inner().embedding_backward(dwte, dwpe, s[d], tokens, B, T, C, vocab_begin, vocab_end);  // fp32 gradients
}

bool RoundedStorageBackend::native(bool family, std::initializer_list<ConstActPtr> operands) const {
  if (!family) return false;
  for (ConstActPtr p : operands) {
    if (p && p.storage() != precision_) return false;
  }
  return true;
}

void RoundedStorageBackend::matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                                           int N, int C, int OC) {
  if (native(inner().native_16bit().matmul, {inp, weight, bias})) {
    // Native 16-bit inputs: nothing to widen. A 16-bit out is stored rounded by the kernel; an
    // fp32 one (emulated storage: the logits) is rounded here, as the widened path would.
    if (out.storage() == precision_) {
      inner().matmul_forward(out, inp, weight, bias, N, C, OC);
      return;
    }
    if (out.is_fp32()) {
      inner().matmul_forward(out, inp, weight, bias, N, C, OC);
      inner().round_to_precision(out.f32(), out.f32(), product(N, OC), precision_);
      return;
    }
  }
  Staging s(*this);
  const int o = s.output(out, product(N, OC)), i = s.input(inp, product(N, C)), w = s.input(weight, product(OC, C)),
            b = s.input(bias, static_cast<std::size_t>(OC));
  s.load();
  inner().matmul_forward(s[o], s[i], s[w], s[b], N, C, OC);
  s.store();
}

void RoundedStorageBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                            ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) {
  if (native(inner().native_16bit().matmul, {dinp, dout, inp, weight})) {
    inner().matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    return;
  }
  Staging s(*this);
  const int di = s.output(dinp, product(N, C)), d = s.input(dout, product(N, OC)), i = s.input(inp, product(N, C)),
            w = s.input(weight, product(OC, C));
  s.load();
  inner().matmul_backward(s[di], dweight, dbias, s[d], s[i], s[w], N, C, OC);  // dweight, dbias: fp32
  s.store();
}

void RoundedStorageBackend::matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight,
                                                ConstActPtr bias, int N, int C, int OC) {
  const Native16BitKernels families = inner().native_16bit();
  if (native(families.matmul && families.gelu, {out, pre, inp, weight, bias})) {
    inner().matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);  // which may fuse them
    return;
  }
  Backend::matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);  // this object's two calls
}

void RoundedStorageBackend::matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias,
                                                         ConstActPtr dout, ConstActPtr inp, ConstActPtr weight,
                                                         ConstActPtr pre, int N, int C, int OC) {
  const Native16BitKernels families = inner().native_16bit();
  if (native(families.matmul && families.gelu, {dpre, dout, inp, weight, pre})) {
    inner().matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
    return;
  }
  Backend::matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}

void RoundedStorageBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ConstActPtr inp,
                                              ConstActPtr weight, ConstActPtr bias, int N, int C) {
  if (native(inner().native_16bit().layernorm, {out, inp, weight, bias})) {
    inner().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
    return;
  }
  Staging s(*this);
  const int o = s.output(out, product(N, C)), i = s.input(inp, product(N, C)),
            w = s.input(weight, static_cast<std::size_t>(C)), b = s.input(bias, static_cast<std::size_t>(C));
  s.load();
  inner().layernorm_forward(s[o], mean, rstd, s[i], s[w], s[b], N, C);  // mean, rstd: fp32 statistics
  s.store();
}

void RoundedStorageBackend::cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp,
                                                           ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                                           float dloss, int N, int V, int Vp) {
  if (native(inner().native_16bit().cross_entropy, {dlogits, logits})) {
    inner().cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp);
    return;
  }
  Backend::cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp);
}

void RoundedStorageBackend::residual_layernorm_forward(ActPtr residual, ActPtr out, float* mean, float* rstd,
                                                       ConstActPtr a, ConstActPtr b, ConstActPtr weight,
                                                       ConstActPtr bias, int N, int C) {
  if (native(inner().native_16bit().layernorm, {residual, out, a, b, weight, bias})) {
    inner().residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
    return;
  }
  add(residual, a, b, product(N, C));
  layernorm_forward(out, mean, rstd, residual, weight, bias, N, C);
}

void RoundedStorageBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                               ConstActPtr inp, ConstActPtr weight, const float* mean,
                                               const float* rstd, int N, int C) {
  if (native(inner().native_16bit().layernorm, {dinp, dout, inp, weight})) {
    inner().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return;
  }
  Staging s(*this);
  const int di = s.accumulated(dinp, product(N, C)), d = s.input(dout, product(N, C)), i = s.input(inp, product(N, C)),
            w = s.input(weight, static_cast<std::size_t>(C));
  s.load();
  inner().layernorm_backward(s[di], dweight, dbias, s[d], s[i], s[w], mean, rstd, N, C);
  s.store();
}

void RoundedStorageBackend::gelu_forward(ActPtr out, ConstActPtr inp, std::size_t n) {
  if (native(inner().native_16bit().gelu, {out, inp})) {
    inner().gelu_forward(out, inp, n);
    return;
  }
  Staging s(*this);
  const int o = s.output(out, n), i = s.input(inp, n);
  s.load();
  inner().gelu_forward(s[o], s[i], n);
  s.store();
}

void RoundedStorageBackend::gelu_backward(ActPtr dinp, ConstActPtr inp, ConstActPtr dout, std::size_t n) {
  if (native(inner().native_16bit().gelu, {dinp, inp, dout})) {
    inner().gelu_backward(dinp, inp, dout, n);
    return;
  }
  Staging s(*this);
  // In place (dinp == dout): one view, widened before the call and narrowed after.
  const int di = s.output(dinp, n), i = s.input(inp, n), d = s.input(dout, n);
  s.load();
  inner().gelu_backward(s[di], s[i], s[d], n);
  s.store();
}

void RoundedStorageBackend::attention_forward(ActPtr out, float* lse, float* scratch, ConstActPtr qkv, int B, int T,
                                              int C, int NH) {
  if (native(inner().native_16bit().attention, {out, qkv})) {
    inner().attention_forward(out, lse, scratch, qkv, B, T, C, NH);
    return;
  }
  Staging s(*this);
  const int o = s.output(out, product(B * T, C)), q = s.input(qkv, product(B * T, 3 * C));
  s.load();
  // lse: an fp32 statistic, as the LayerNorm mean and rstd. Rounded to 8 bits it would move every
  // recomputed probability by up to |lse| * 2^-9 relative, a coherent error across the row.
  inner().attention_forward(s[o], lse, scratch, s[q], B, T, C, NH);
  s.store();
}

void RoundedStorageBackend::attention_backward(ActPtr dqkv, float* scratch, ConstActPtr dout, ConstActPtr qkv,
                                               ConstActPtr out, const float* lse, int B, int T, int C, int NH) {
  if (native(inner().native_16bit().attention, {dqkv, dout, qkv, out})) {
    inner().attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
    return;
  }
  Staging s(*this);
  const int dq = s.output(dqkv, product(B * T, 3 * C)), d = s.input(dout, product(B * T, C)),
            q = s.input(qkv, product(B * T, 3 * C)), o = s.input(out, product(B * T, C));
  s.load();
  inner().attention_backward(s[dq], scratch, s[d], s[q], s[o], lse, B, T, C, NH);
  s.store();
}

void RoundedStorageBackend::cross_entropy_forward(float* losses, float* row_max, float* row_sumexp,
                                                  ConstActPtr logits, const int32_t* targets, int N, int V, int Vp) {
  if (native(inner().native_16bit().cross_entropy, {logits})) {
    inner().cross_entropy_forward(losses, row_max, row_sumexp, logits, targets, N, V, Vp);
    return;
  }
  Staging s(*this);
  const int l = s.input(logits, product(N, Vp));
  s.load();
  inner().cross_entropy_forward(losses, row_max, row_sumexp, s[l], targets, N, V, Vp);  // fp32 outputs
}

void RoundedStorageBackend::cross_entropy_backward(ActPtr dlogits, ConstActPtr logits, const int32_t* targets,
                                                   float dloss, int N, int V, int Vp) {
  if (native(inner().native_16bit().cross_entropy, {dlogits, logits})) {
    inner().cross_entropy_backward(dlogits, logits, targets, dloss, N, V, Vp);
    return;
  }
  Staging s(*this);
  const int l = s.input(logits, product(N, Vp)), d = s.output(dlogits, product(N, Vp));  // may be one buffer
  s.load();
  inner().cross_entropy_backward(s[d], s[l], targets, dloss, N, V, Vp);
  s.store();
}

void RoundedStorageBackend::cross_entropy_shard_statistics(float* stats, ConstActPtr logits, const int32_t* targets,
                                                           int N, int V_local, int Vp_local, int vocab_begin) {
  if (native(inner().native_16bit().cross_entropy, {logits})) {
    inner().cross_entropy_shard_statistics(stats, logits, targets, N, V_local, Vp_local, vocab_begin);
    return;
  }
  Staging s(*this);
  const int l = s.input(logits, product(N, Vp_local));
  s.load();
  inner().cross_entropy_shard_statistics(stats, s[l], targets, N, V_local, Vp_local, vocab_begin);  // fp32 out
}

void RoundedStorageBackend::cross_entropy_combine_shards(float* row_max, float* row_sumexp, float* target_logit,
                                                         const float* gathered, int N, int shards) {
  inner().cross_entropy_combine_shards(row_max, row_sumexp, target_logit, gathered, N, shards);  // all fp32
}

void RoundedStorageBackend::cross_entropy_backward_sharded(ActPtr dlogits, ConstActPtr logits,
                                                           const int32_t* targets, const float* row_max,
                                                           const float* row_sumexp, float dloss, int N, int V_local,
                                                           int Vp_local, int vocab_begin) {
  if (native(inner().native_16bit().cross_entropy, {dlogits, logits})) {
    inner().cross_entropy_backward_sharded(dlogits, logits, targets, row_max, row_sumexp, dloss, N, V_local,
                                           Vp_local, vocab_begin);
    return;
  }
  Staging s(*this);
  const int l = s.input(logits, product(N, Vp_local)), d = s.output(dlogits, product(N, Vp_local));
  s.load();
  inner().cross_entropy_backward_sharded(s[d], s[l], targets, row_max, row_sumexp, dloss, N, V_local, Vp_local,
                                        vocab_begin);
  s.store();
}

void RoundedStorageBackend::add(ActPtr out, ConstActPtr a, ConstActPtr b, std::size_t n) {
  if (native(inner().native_16bit().add, {out, a, b})) {
    inner().add(out, a, b, n);
    return;
  }
  Staging s(*this);
  const int o = s.output(out, n), x = s.input(a, n), y = s.input(b, n);
  s.load();
  inner().add(s[o], s[x], s[y], n);
  s.store();
}

}  // namespace trident::kernels
