// CudaBackend's linear layers: the forward with its bias (and GELU) in cuBLASLt's epilogue where
// the operands are 16-bit, the backward's input gradient and parameter gradients (on a second
// stream under run.matmul_backward_streams = two, the bias sums in the weight GEMM's epilogue
// under run.matmul_bias_gradients = epilogue), and the table of cuBLASLt kernels that
// run.matmul_algorithms = timed chose. Ordering and ownership: cuda_backend.cu.
#include <cublas_v2.h>  // cublasSetMathMode

#include <cstdio>  // std::snprintf
#include <initializer_list>
#include <stdexcept>  // std::logic_error
#include <string>
#include <vector>

#include "kernels/choice_table.h"           // merge_choice_tables (both cuBLASLt handles' answers)
#include "kernels/cuda/column_sums.cuh"     // add_column_sums (the timed weight GEMM's bias sums)
#include "kernels/cuda/column_sums_math.h"  // columns::sum_scratch_floats
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"         // CUBLAS_CHECK
#include "kernels/cuda/elementwise.cuh"     // accumulate
#include "kernels/cuda/gemm.cuh"            // cuda_data_type
#include "kernels/cuda/lt_matmul.cuh"       // LtMatmul: cuBLASLt GEMMs with bias and GELU epilogues
#include "kernels/cuda/matmul.cuh"          // matmul_forward/backward, their halves and 16-bit forms
#include "kernels/cuda/side_stream.cuh"     // SideStream

namespace trident::kernels::cuda {

namespace {

// The 16-bit format all the given operands (null ones aside) share, or fp32 when one is fp32 or
// they mix formats: a call the fused cuBLASLt path does not take.
Precision shared_16bit_format(std::initializer_list<ConstActPtr> operands) {
  Precision found = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (p.is_fp32() || (found != Precision::kFp32 && p.storage() != found)) return Precision::kFp32;
    found = p.storage();
  }
  return found;
}

// The one 16-bit precision of a native 16-bit call's operands (null ones aside); a mix of
// formats, or an fp32 operand among them, is a caller's bug (RoundedStorageBackend widens
// those calls instead).
Precision one_16bit_precision(std::initializer_list<ConstActPtr> operands, const char* call) {
  Precision found = Precision::kFp32;
  for (ConstActPtr p : operands) {
    if (!p) continue;
    if (p.is_fp32() || (found != Precision::kFp32 && p.storage() != found)) {
      throw std::logic_error(std::string("CudaBackend::") + call +
                             ": 16-bit operands must all be 16-bit of one format (fp32 and 16-bit, or bf16 "
                             "and fp16, mixed)");
    }
    found = p.storage();
  }
  return found;
}

}  // namespace

LtMatmul* CudaBackend::lt() { return lt_.get(); }

std::vector<TimedMatmulShape> CudaBackend::timed_matmul_shapes() const {
  std::vector<TimedMatmulShape> shapes;
  for (const LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt == nullptr) continue;
    const std::vector<TimedMatmulShape> own = lt->timed_shapes();
    shapes.insert(shapes.end(), own.begin(), own.end());
  }
  return shapes;
}

// One table for both cuBLASLt handles: a shape's answer numbers the same kernel on either.
std::string CudaBackend::matmul_algorithm_choices() const {
  std::vector<std::string> tables;
  for (const LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt != nullptr) tables.push_back(lt->chosen_answers());
  }
  return merge_choice_tables(tables);
}

bool CudaBackend::adopt_matmul_algorithm_choices(const std::string& table) {
  bool adopted = false;
  for (LtMatmul* lt : {lt_.get(), side_lt_.get()}) {
    if (lt != nullptr) adopted = lt->adopt_answers(table) || adopted;
  }
  return adopted;
}

float* CudaBackend::column_scratch(std::size_t floats) {
  return static_cast<float*>(workspace(floats * sizeof(float)));
}

float* CudaBackend::bias_scratch(const float* dbias, int OC) {
  return dbias != nullptr ? column_scratch(columns::sum_scratch_floats(OC)) : nullptr;
}

bool CudaBackend::counted(bool ran) {
  ++(ran ? epilogue_counts_.fused : epilogue_counts_.fell_back);
  return ran;
}

void CudaBackend::matmul_forward(ActPtr out, ConstActPtr inp, ConstActPtr weight,
                                 ConstActPtr bias, int N, int C, int OC) {
  if (!inp.is_fp32()) {
    // 16-bit inputs; out 16-bit of the same format, or fp32 (fp32 results).
    const Precision p = one_16bit_precision({inp, weight, bias}, "matmul_forward");
    if (!out.is_fp32()) one_16bit_precision({out, inp}, "matmul_forward");
    // The bias in the epilogue: no broadcast pass, and out is written once instead of written,
    // read and written again.
    if (bias && !out.is_fp32() && lt() != nullptr &&
        counted(lt()->forward_bias(out.get(), inp.get(), weight.get(), bias.get(), N, C, OC, cuda_data_type(p),
                                   stream_))) {
      return;
    }
    cuda::matmul_forward_16bit(out.get(), out.is_fp32(), inp.get(), weight.get(), bias.get(), N, C, OC, p, cublas_,
                               stream_);
    return;
  }
  cuda::matmul_forward(out.f32(), inp.f32(), weight.f32(), bias.f32(), N, C, OC, cublas_, stream_);
}

CudaBackend::GradientLane CudaBackend::parameter_gradient_lane(bool overlaps) {
  if (side_ == nullptr || !overlaps) return GradientLane{cublas_, stream_, false};
  side_->fork();
  return GradientLane{side_->cublas(), side_->stream(), true};
}

void CudaBackend::rejoin(const GradientLane& lane) {
  if (lane.beside) side_->join();
}

bool CudaBackend::parameter_gradients_in_epilogue(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp,
                                                  int N, int C, int OC, Precision p, float* column_scratch,
                                                  const GradientLane& lane) {
  LtMatmul* lt_of_lane = lane.beside ? side_lt_.get() : lt();
  if (matmul_bias_gradients_ != MatmulBiasGradients::kEpilogue || dbias == nullptr || N == 0 ||
      lt_of_lane == nullptr) {
    return false;
  }
  // column_scratch holds a bias gradient's partials (bias_scratch): at least OC floats.
  if (!counted(lt_of_lane->weight_gradient_bias_sums(dweight, column_scratch, dout.get(), inp.get(), N, C, OC,
                                                     cuda_data_type(p), lane.stream))) {
    return false;
  }
  cuda::accumulate(dbias, column_scratch, static_cast<std::size_t>(OC), lane.stream);
  return true;
}

std::string CudaBackend::matmul_algorithm_report() const {
  const std::vector<TimedMatmulShape> shapes = timed_matmul_shapes();
  if (shapes.empty()) return {};
  int other = 0, adopted = 0;
  double first_ms = 0.0, chosen_ms = 0.0;
  for (const auto& s : shapes) {
    other += s.chosen != 0 ? 1 : 0;
    adopted += s.adopted ? 1 : 0;
    first_ms += s.first_ms;
    chosen_ms += s.chosen_ms;
  }
  // One call of each shape: the sum says what the choice saves where every shape runs once.
  char text[384];
  std::snprintf(text, sizeof text,
                "matmul algorithms: %zu cuBLASLt product shapes timed (run.matmul_algorithms = timed; %d of them "
                "on the answer another rank or the checkpoint chose), %d of them on another answer than the "
                "heuristic's first: %.3f ms for one call of each against %.3f ms",
                shapes.size(), adopted, other, chosen_ms, first_ms);
  return text;
}

void CudaBackend::input_gradient_16bit(ActPtr dinp, ConstActPtr dout, ConstActPtr weight, int N, int C, int OC,
                                       Precision p) {
  if (matmul_algorithms_ == MatmulAlgorithms::kTimed && lt() != nullptr &&
      lt()->input_gradient(dinp.get(), dout.get(), weight.get(), N, C, OC, cuda_data_type(p), stream_)) {
    return;
  }
  cuda::matmul_input_gradient_16bit(dinp.get(), dout.get(), weight.get(), N, C, OC, p, cublas_);
}

void CudaBackend::parameter_gradients_16bit(float* dweight, float* dbias, ConstActPtr dout, ConstActPtr inp, int N,
                                            int C, int OC, Precision p, float* column_scratch,
                                            const GradientLane& lane) {
  LtMatmul* lt_of_lane = lane.beside ? side_lt_.get() : lt();
  if (matmul_algorithms_ == MatmulAlgorithms::kTimed && lt_of_lane != nullptr &&
      lt_of_lane->weight_gradient(dweight, dout.get(), inp.get(), N, C, OC, cuda_data_type(p), lane.stream)) {
    if (dbias != nullptr) cuda::add_column_sums(dbias, dout, N, OC, column_scratch, lane.stream);
    return;
  }
  cuda::matmul_parameter_gradients_16bit(dweight, dbias, dout.get(), inp.get(), N, C, OC, p, column_scratch,
                                         lane.cublas, lane.stream);
}

void CudaBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ConstActPtr dout,
                                  ConstActPtr inp, ConstActPtr weight, int N, int C, int OC) {
  const bool sixteen = !dout.is_fp32();
  const Precision p = sixteen ? one_16bit_precision({dinp, dout, inp, weight}, "matmul_backward") : Precision::kFp32;
  // The workspace before the fork: growing it waits for stream_, and nothing forked may still use it.
  float* column_scratch = bias_scratch(dbias, OC);
  const bool has_dinp = dinp.get() != nullptr;
  const GradientLane lane = parameter_gradient_lane(has_dinp);
  if (sixteen) {
    if (has_dinp) input_gradient_16bit(dinp, dout, weight, N, C, OC, p);
    if (!parameter_gradients_in_epilogue(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane)) {
      parameter_gradients_16bit(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane);
    }
  } else {
    if (has_dinp) cuda::matmul_input_gradient(dinp.f32(), dout.f32(), weight.f32(), N, C, OC, cublas_);
    cuda::matmul_parameter_gradients(dweight, dbias, dout.f32(), inp.f32(), N, C, OC, column_scratch, lane.cublas,
                                     lane.stream);
  }
  rejoin(lane);
}

void CudaBackend::matmul_gelu_forward(ActPtr out, ActPtr pre, ConstActPtr inp, ConstActPtr weight, ConstActPtr bias,
                                      int N, int C, int OC) {
  const Precision p = shared_16bit_format({out, pre, inp, weight, bias});
  if (p != Precision::kFp32 && lt() != nullptr &&
      counted(lt()->forward_gelu(out.get(), pre.get(), inp.get(), weight.get(), bias.get(), N, C, OC,
                                 cuda_data_type(p), stream_))) {
    return;
  }
  Backend::matmul_gelu_forward(out, pre, inp, weight, bias, N, C, OC);
}

void CudaBackend::matmul_backward_through_gelu(ActPtr dpre, float* dweight, float* dbias, ConstActPtr dout,
                                               ConstActPtr inp, ConstActPtr weight, ConstActPtr pre, int N, int C,
                                               int OC) {
  const Precision p = shared_16bit_format({dpre, dout, inp, weight, pre});
  if (p != Precision::kFp32 && lt() != nullptr) {
    float* column_scratch = bias_scratch(dbias, OC);
    const GradientLane lane = parameter_gradient_lane(true);
    const bool fused = counted(lt()->backward_dgelu(dpre.get(), dout.get(), weight.get(), pre.get(), N, C, OC,
                                                    cuda_data_type(p), stream_));
    if (fused && !parameter_gradients_in_epilogue(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane)) {
      // The weight and bias gradients as matmul_backward makes them.
      parameter_gradients_16bit(dweight, dbias, dout, inp, N, C, OC, p, column_scratch, lane);
    }
    rejoin(lane);  // after a fallback: nothing was queued beside, and the join orders nothing
    if (fused) return;
  }
  Backend::matmul_backward_through_gelu(dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}

void CudaBackend::set_gemm_input_precision(Precision inputs) {
  // TF32 keeps 10 explicit significand bits (11 significant) and fp32's exponent: bf16 values
  // (8 significant bits) and fp16 values (11, with a smaller exponent range) convert to it
  // exactly, and products accumulate in fp32. So for such inputs the tensor cores give the
  // fp32 GEMM's result up to the order of summation.
  const cublasMath_t math = inputs == Precision::kFp32 ? CUBLAS_DEFAULT_MATH : CUBLAS_TF32_TENSOR_OP_MATH;
  CUBLAS_CHECK(cublasSetMathMode(cublas_, math));
  if (side_ != nullptr) side_->set_math_mode(math);  // the weight gradients' GEMMs too
}

}  // namespace trident::kernels::cuda
