// Whether a run's model fits in the memory it will be allocated from, checked on every rank
// before anything of the model is allocated: ranks that share a pool (a node's host memory on
// the CPU, one GPU's memory on CUDA) add up their estimates (src/app/memory_estimate.h) and
// compare the sum with what the pool has free. A run that cannot fit then stops with one line
// that names the pool, the need and the ways out, on every rank, instead of dying in an
// allocation (std::bad_alloc, or the kernel's OOM killer) on some of them.
#pragma once

#include <cstddef>
#include <string>

namespace trident::parallel {
class Comm;
}

namespace trident::app {

// Memory a group of ranks allocates from: what is free now and the whole, in bytes (0, 0:
// unknown, and then nothing is checked), and what to call it in a message.
struct MemoryPool {
  std::size_t free_bytes = 0, total_bytes = 0;
  std::string name;        // "node cn042", "GPU 0 (NVIDIA H100 80GB HBM3, 0000:1b:00.0) of node gpu017"
  std::string free_means;  // what "free" is: "free", "available (MemAvailable)"
};

// This node's host memory: MemAvailable and MemTotal of /proc/meminfo (unknown, total 0, where
// MemAvailable cannot be read).
MemoryPool host_memory_pool(const std::string& node_name);

// The one-line error for `ranks` ranks that need `need_bytes` together from `pool`, or "" when
// they fit or the pool is unknown (total 0). `cuda`: the pool is a GPU (for the advice).
std::string memory_fit_error(std::size_t need_bytes, int ranks, const MemoryPool& pool, bool cuda);

// Collective over `node` (the ranks of this machine) then `world`: the ranks of a node that
// give the same pool_key (one GPU's bus id; "host" for the CPU) add their need_bytes and
// compare the sum with the free bytes of their pool: the smallest any of them saw (each
// measured before any of them allocated), leaving out ranks that could not tell (total 0).
// Returns the lowest failing rank's message on every rank, "" when every pool fits.
std::string check_memory_fits(parallel::Comm& node, parallel::Comm& world, const std::string& pool_key,
                              std::size_t need_bytes, const MemoryPool& pool, bool cuda);

}  // namespace trident::app
