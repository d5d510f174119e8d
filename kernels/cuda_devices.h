// What this machine's CUDA devices and libraries are, asked without building a backend: for
// choosing a device (src/app/device_choice.h), trident check on a login node, and --version.
// kernels/cuda/device_query.cu answers in a CUDA build, kernels/backend.cpp (nothing, zeros)
// otherwise.
#pragma once

#include <cstddef>
#include <string>

namespace trident::kernels {

// True when this build has the CUDA backend compiled in.
bool cuda_compiled();
// Number of CUDA devices visible (0 without CUDA or without a GPU).
int cuda_device_count();
// The PCI bus id of visible CUDA device `index` ("0000:1b:00.0"): one physical GPU has one id
// whatever CUDA_VISIBLE_DEVICES calls it, so ranks bound to one GPU each (Slurm's
// --gpus-per-task) can be told from ranks crowding one. "" without CUDA or when not known.
std::string cuda_device_bus_id(int index);
// Whether visible CUDA device `index` gives one block the shared memory the flash attention
// kernels ask for (66,560 bytes opted in: sm_80 and later; Turing's 64 KiB is short), so that
// run.attention = auto takes the GEMM attention where flash would be refused. False without CUDA
// or when the device does not answer.
bool cuda_flash_attention_fits(int index);
// Why a machine with a CUDA driver shows no usable device ("" when devices are usable, or when
// there is no GPU or no driver at all, as on a build machine): the CUDA runtime's error, e.g.
// cudaErrorInsufficientDriver for a driver older than this build's CUDA runtime. A GPU machine
// that answers this must not be taken for one without a GPU.
std::string cuda_device_problem();
// Why this build's CUDA libraries cannot be used on this node ("" when they can, and always
// without CUDA): the CUDA backend opens cuBLAS and cuBLASLt on first use, not at start-up
// (kernels/cuda/cublas_library.h), so a CPU run never needs them and this loads them to answer.
std::string cuda_library_problem();

// Visible CUDA device `index`'s memory as the driver reports it now (cudaMemGetInfo: what this
// process and every other one have not taken), and its name, for the check that a run fits
// before the model is allocated. Zeros and "" without CUDA or when the driver does not answer.
struct DeviceMemoryInfo {
  std::size_t free_bytes = 0, total_bytes = 0;
  std::string name;
};
DeviceMemoryInfo cuda_device_memory(int index);

}  // namespace trident::kernels
