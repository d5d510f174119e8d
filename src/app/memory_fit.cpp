#include "src/app/memory_fit.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "parallel/comm.h"              // Comm, all_gather_strings, agree_on_error
#include "src/app/memory_estimate.h"    // format_bytes
#include "src/app/resident_memory.h"    // proc_field_kib

namespace trident::app {

MemoryPool host_memory_pool(const std::string& node_name) {
  MemoryPool pool;
  pool.free_bytes = proc_field_kib("/proc/meminfo", "MemAvailable") * 1024;
  // Without MemAvailable (kernels before 3.14, some sandboxes) nothing says what is free: unknown.
  if (pool.free_bytes > 0) pool.total_bytes = proc_field_kib("/proc/meminfo", "MemTotal") * 1024;
  pool.name = "node " + node_name;
  pool.free_means = "available (MemAvailable)";
  return pool;
}

std::string memory_fit_error(std::size_t need_bytes, int ranks, const MemoryPool& pool, bool cuda) {
  if (pool.total_bytes == 0 || need_bytes <= pool.free_bytes) return "";
  const std::string who = ranks == 1 ? "the rank on it needs" : "its " + std::to_string(ranks) + " ranks need";
  std::string ways = "lower train.micro_batch, set train.recompute = full, or spread the model over more ranks with "
                     "parallel.tp or parallel.pp (or shard the optimizer with parallel.zero = 1 when dp > 1)";
  if (ranks > 1) ways += cuda ? "; or start fewer ranks per GPU" : "; or start fewer ranks per node";
  return "not enough memory on " + pool.name + ": " + who + " about " + format_bytes(static_cast<double>(need_bytes)) +
         " (estimate; `trident check` shows it per stage), and " + format_bytes(static_cast<double>(pool.free_bytes)) +
         " of " + format_bytes(static_cast<double>(pool.total_bytes)) + " are " + pool.free_means + "; " + ways;
}

std::string check_memory_fits(parallel::Comm& node, parallel::Comm& world, const std::string& pool_key,
                              std::size_t need_bytes, const MemoryPool& pool, bool cuda) {
  // One record per rank of the node: pool key, need, and the pool's free and total bytes as
  // this rank saw them (all measured before the gather, so before any rank of the node
  // allocated its model; total 0: this rank could not tell).
  const std::string mine = pool_key + '\n' + std::to_string(need_bytes) + ' ' + std::to_string(pool.free_bytes) + ' ' +
                           std::to_string(pool.total_bytes);
  const std::vector<std::string> all = parallel::all_gather_strings(node, mine);
  MemoryPool shared = pool;
  shared.total_bytes = 0;
  std::size_t need = 0;
  int ranks = 0;
  for (const std::string& record : all) {
    std::istringstream in(record);
    std::string key;
    std::size_t their_need = 0, their_free = 0, their_total = 0;
    std::getline(in, key);
    in >> their_need >> their_free >> their_total;
    if (key != pool_key) continue;
    need += their_need;
    ++ranks;
    if (their_total == 0) continue;  // an unknown measurement takes no part
    shared.free_bytes = shared.total_bytes == 0 ? their_free : std::min(shared.free_bytes, their_free);
    shared.total_bytes = std::max(shared.total_bytes, their_total);
  }
  return parallel::agree_on_error(world, memory_fit_error(need, ranks, shared, cuda));
}

}  // namespace trident::app
