#include "src/app/gradient_fault.h"

#include <chrono>
#include <cstdio>   // sscanf
#include <cstdlib>  // getenv
#include <limits>
#include <string>
#include <thread>  // sleep_for: the stall
#include <utility>

#include "io/user_error.h"
#include "kernels/forwarding_backend.h"

namespace trident::app {

namespace {

constexpr const char* kNanVariable = "TRIDENT_TEST_NAN_GRADIENT";
constexpr const char* kStallVariable = "TRIDENT_TEST_STALL";
constexpr const char* kRankErrorVariable = "TRIDENT_TEST_RANK_ERROR";

enum class Fault { kNan, kStall, kUserError };

// Passes every call on, the fused pairs whole (ForwardingBackend would split them, and the
// faulted run must run the kernels an unfaulted one runs); the N-th embedding backward then
// stores a NaN over dwte[0], or never returns.
class GradientFault final : public kernels::ForwardingBackend {
 public:
  GradientFault(kernels::Backend& inner, Fault fault, long long call)
      : ForwardingBackend(inner), fault_(fault), call_(call) {}

  void embedding_backward(float* dwte, float* dwpe, kernels::ConstActPtr dout, const int32_t* tokens, int B, int T,
                          int C, int vocab_begin, int vocab_end) override {
    inner().embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vocab_begin, vocab_end);
    if (++calls_ != call_) return;
    if (fault_ == Fault::kStall) {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (fault_ == Fault::kUserError) {
      throw io::UserError(std::string(kRankErrorVariable) +
                          ": a user error on this rank alone, as an unreadable share of the dataset raises");
    }
    const float nan = std::numeric_limits<float>::quiet_NaN();
    inner().copy_to_device(dwte, &nan, 1);
  }
  void matmul_gelu_forward(kernels::ActPtr out, kernels::ActPtr pre, kernels::ConstActPtr inp,
                           kernels::ConstActPtr weight, kernels::ConstActPtr bias, int N, int C, int OC) override {
    inner().matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);
  }
  void matmul_backward_through_gelu(kernels::ActPtr dpre, float* dweight, float* dbias, kernels::ConstActPtr dout,
                                    kernels::ConstActPtr inp, kernels::ConstActPtr weight, kernels::ConstActPtr pre,
                                    int N, int C, int OC) override {
    inner().matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
  }
  void cross_entropy_forward_backward(float* losses, float* row_max, float* row_sumexp, kernels::ActPtr dlogits,
                                      kernels::ConstActPtr logits, const int32_t* targets, float dloss, int N, int V,
                                      int Vp) override {
    inner().cross_entropy_forward_backward(losses, row_max, row_sumexp, dlogits, logits, targets, dloss, N, V, Vp);
  }

 private:
  Fault fault_;
  long long call_;
  long long calls_ = 0;
};

}  // namespace

std::unique_ptr<kernels::Backend> gradient_fault_from_environment(kernels::Backend& inner, int world_rank) {
  for (const auto& [variable, fault] : {std::pair{kNanVariable, Fault::kNan}, std::pair{kStallVariable, Fault::kStall},
                                        std::pair{kRankErrorVariable, Fault::kUserError}}) {
    const char* value = std::getenv(variable);
    if (value == nullptr) continue;
    int rank = -1;
    long long call = 0;
    char rest = 0;  // anything after CALL makes the match count 3
    // CALL 0 of the rank error: at start-up, here, before the model is made.
    const long long first = fault == Fault::kUserError ? 0 : 1;
    if (std::sscanf(value, "%d:%lld%c", &rank, &call, &rest) != 2 || rank < 0 || call < first) {
      throw io::UserError(std::string(variable) + " = '" + value + "': expected RANK:CALL (a world rank, and which of " +
                          "its embedding backwards, from 1" + (first == 0 ? "; 0: at start-up)" : ")"));
    }
    if (rank != world_rank) continue;
    if (call == 0) {
      throw io::UserError(std::string(kRankErrorVariable) +
                          ": a user error on this rank alone at start-up, as a file only this rank reads raises");
    }
    return std::make_unique<GradientFault>(inner, fault, call);
  }
  return nullptr;
}

}  // namespace trident::app
