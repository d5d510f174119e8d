#include "src/app/run_device.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "io/user_error.h"
#include "kernels/cuda_devices.h"  // the node's GPUs, their memory and bus ids
#include "kernels/device_refusal.h"  // DeviceRefusal: reported as the user's error
#include "mpi_support/mpi_process.h"  // processor_name
#include "src/app/backend_options.h"
#include "src/app/gradient_fault.h"  // gradient_fault_from_environment (a test hook)
#include "src/app/memory_fit.h"
#include "src/app/threads.h"  // default_threads

namespace trident::app {

namespace {

// run.device for this rank (src/app/device_choice.h); a refusal on any node fails every rank.
DeviceChoice choose_device_collectively(const std::string& requested, bool ranks_may_share_gpus,
                                        parallel::ParallelContext& ctx, parallel::Comm& world) {
  // Each rank names the physical GPU it would take; the node's ranks compare names, so ranks
  // bound to one GPU each (every one seeing "GPU 0") are told from ranks crowding one GPU.
  NodeGpus node;
  node.visible = requested == "cpu" ? 0 : kernels::cuda_device_count();
  node.local_rank = ctx.node_local_rank();
  std::string mine;
  if (node.visible > 0) {
    const int gpu = gpu_for_rank(node.local_rank, node.visible);
    mine = kernels::cuda_device_bus_id(gpu);
    // Without a bus id, the visible index stands in: right when every rank sees every GPU.
    if (mine.empty()) mine = "visible GPU " + std::to_string(gpu);
    // cuBLAS is opened here, where a GPU may be taken, and not on CPU runs (kernels/cuda_devices.h).
    node.library_problem = kernels::cuda_library_problem();
  }
  node.taken = parallel::all_gather_strings(ctx.node(), mine);
  DeviceChoice choice;
  std::string error;
  try {
    choice = choose_device(requested, kernels::cuda_compiled(), node, ranks_may_share_gpus,
                           node.visible == 0 ? kernels::cuda_device_problem() : std::string());
  } catch (const io::UserError& e) {
    error = e.what();
  }
  error = parallel::agree_on_error(world, error);
  if (!error.empty()) throw io::UserError(error);
  // auto decides per node: where nodes differ (one without GPUs, or with too few for its ranks)
  // some ranks would build NCCL groups the others never join. Then every rank takes the CPU.
  const bool on_cuda = choice.device == kernels::Device::kCuda;
  const bool any_cuda = world.all_reduce_max(on_cuda ? 1 : 0) == 1;
  const bool any_cpu = world.all_reduce_max(on_cuda ? 0 : 1) == 1;
  if (any_cuda && any_cpu) {
    choice = DeviceChoice{kernels::Device::kCpu, -1,
                          "run.device = auto: cpu, because not every rank has a GPU of its own"};
  }
  return choice;
}

}  // namespace

RunDevice make_device_backend(const io::RunConfig& c, parallel::ParallelContext& ctx, parallel::Comm& world,
                              RunObjects& run) {
  const int threads = c.run.threads > 0 ? c.run.threads : default_threads(ctx.node_local_size());
  const bool nccl = c.parallel.comm == "nccl";
  const DeviceChoice device = choose_device_collectively(c.run.device, !nccl, ctx, world);
  const bool flash_fits = device.device == kernels::Device::kCuda && kernels::cuda_flash_attention_fits(device.gpu);
  const kernels::BackendOptions kernel_options = backend_options(c, device.device, flash_fits);
  // run.attention = auto passing over flash for this GPU alone (said in the start-up report).
  const bool flash_too_large = kernel_options.attention == kernels::AttentionKernel::kGemm &&
                               attention_kernel(c, device.device, true) == kernels::AttentionKernel::kFlash;
  if (kernel_options.attention == kernels::AttentionKernel::kFlash && device.device == kernels::Device::kCpu) {
    // Every rank chose the same device (choose_device_collectively): all refuse alike.
    throw io::UserError("run.attention = flash: only the CUDA backend has flash attention, and this run is on the "
                        "CPU (" + device.reason + "); use run.attention = gemm");
  }
  try {
    run.backend = kernels::make_backend(device.device, threads, device.gpu < 0 ? 0 : device.gpu, kernel_options);
  } catch (const kernels::DeviceRefusal& e) {
    throw io::UserError(e.what());  // the deck's kernel choices against this device: the user's to change
  }
  run.backend_memory = std::make_unique<parallel::BackendMemory>(*run.backend);
  // The same choice the memory estimate counts the communication buffers of.
  const parallel::CommTransport transport = comm_transport(device.device != kernels::Device::kCpu, c.parallel.comm);
  if (transport == parallel::CommTransport::kNccl) {
    // A build without NCCL refuses on every rank alike: a user error (parallel.comm = mpi works).
    try {
      ctx.use_nccl(*run.backend_memory, run.backend->device_stream());
    } catch (const std::runtime_error& e) {
      throw io::UserError(e.what());
    }
  } else if (transport == parallel::CommTransport::kMpiStaged) {
    ctx.stage_device_buffers(*run.backend_memory);
  }
  return {.choice = device, .transport = transport, .flash_too_large = flash_too_large};
}

kernels::Backend& stack_kernels(kernels::Precision precision, int world_rank, bool profile, RunObjects& run) {
  run.fault = gradient_fault_from_environment(*run.backend, world_rank);
  kernels::Backend& device_kernels = run.fault ? *run.fault : *run.backend;
  if (profile) run.timing = std::make_unique<kernels::TimingBackend>(device_kernels);
  kernels::Backend& timed = run.timing ? static_cast<kernels::Backend&>(*run.timing) : device_kernels;
  if (precision != kernels::Precision::kFp32) {
    run.rounded = std::make_unique<kernels::RoundedStorageBackend>(timed, precision);
  }
  return run.rounded ? static_cast<kernels::Backend&>(*run.rounded) : timed;
}

void check_run_fits(const MemoryEstimate& estimate, const DeviceChoice& device, parallel::ParallelContext& ctx,
                    parallel::Comm& world) {
  const std::string node_name = mpi_support::processor_name();
  const bool cuda = device.device == kernels::Device::kCuda;
  MemoryPool pool;
  std::string key = "host";
  if (cuda) {
    const kernels::DeviceMemoryInfo gpu = kernels::cuda_device_memory(device.gpu);
    pool.free_bytes = gpu.free_bytes;
    pool.total_bytes = gpu.total_bytes;
    key = kernels::cuda_device_bus_id(device.gpu);
    pool.name = "GPU " + std::to_string(device.gpu) + " (" + gpu.name + (key.empty() ? "" : ", " + key) +
                ") of node " + node_name;
    pool.free_means = "free";
    // Without a bus id, ranks bound to different GPUs could all call theirs "GPU 0": each rank
    // then counts as a pool of its own, which can miss crowding but never refuses a run wrongly.
    if (key.empty()) key = "GPU of world rank " + std::to_string(world.rank());
  } else {
    pool = host_memory_pool(node_name);
  }
  const std::string error = check_memory_fits(ctx.node(), world, key, estimate.total(), pool, cuda);
  if (!error.empty()) throw io::UserError(error);
}

}  // namespace trident::app
