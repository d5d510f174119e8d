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
  pool.total_bytes = proc_field_kib("/proc/meminfo", "MemTotal") * 1024;
  pool.name = "node " + node_name;
  pool.free_means = "available (MemAvailable)";
  return pool;
}

std::string memory_fit_error(std::size_t need_bytes, int ranks, const MemoryPool& pool, bool cuda) {
  if (pool.total_bytes == 0 || need_bytes <= pool.free_bytes) return "";
  const std::string who = ranks == 1 ? "the rank on it needs" : "its " + std::to_string(ranks) + " ranks need";
  std::string ways = "lower train.micro_batch, set train.recompute = full";
  ways += cuda ? ", use train.precision = bf16" : "";
  ways += ", spread the model over more ranks with parallel.tp or parallel.pp (or shard the optimizer with "
          "parallel.zero = 1 when dp > 1)";
  ways += cuda ? "" : ", or start fewer ranks per node";
  return "not enough memory on " + pool.name + ": " + who + " about " + format_bytes(static_cast<double>(need_bytes)) +
         " (estimate; `trident check` shows it per stage), and " + format_bytes(static_cast<double>(pool.free_bytes)) +
         " of " + format_bytes(static_cast<double>(pool.total_bytes)) + " are " + pool.free_means + "; " + ways;
}

std::string check_memory_fits(parallel::Comm& node, parallel::Comm& world, const std::string& pool_key,
                              std::size_t need_bytes, const MemoryPool& pool, bool cuda) {
  // One record per rank of the node: pool key, need, free bytes (all measured before the
  // gather, so before any rank of the node allocated its model).
  const std::string mine = pool_key + '\n' + std::to_string(need_bytes) + '\n' + std::to_string(pool.free_bytes);
  const std::vector<std::string> all = parallel::all_gather_strings(node, mine);
  std::size_t need = 0;
  std::size_t free_bytes = pool.free_bytes;
  int ranks = 0;
  for (const std::string& record : all) {
    std::istringstream in(record);
    std::string key;
    std::size_t their_need = 0, their_free = 0;
    std::getline(in, key);
    in >> their_need >> their_free;
    if (key != pool_key) continue;
    need += their_need;
    free_bytes = std::min(free_bytes, their_free);
    ++ranks;
  }
  MemoryPool shared = pool;
  shared.free_bytes = free_bytes;
  return parallel::agree_on_error(world, memory_fit_error(need, ranks, shared, cuda));
}

}  // namespace trident::app
