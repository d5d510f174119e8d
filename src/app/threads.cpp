#include "src/app/threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>  // std::getenv
#include <string>
#include <thread>

namespace trident::app {

namespace {

struct CpuShare {
  int allowed;     // CPUs this process may run on (its affinity)
  int fair_share;  // the node's CPUs over its ranks
};

CpuShare cpu_share(int ranks_on_node) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int allowed = hardware;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
  return {allowed, hardware / std::max(1, ranks_on_node)};
}

}  // namespace

int default_threads(int ranks_on_node) {
  const CpuShare share = cpu_share(ranks_on_node);
  return std::max(1, std::min(share.allowed, share.fair_share));
}

std::string binding_note(int ranks_on_node) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return "";  // not started by Open MPI's mpirun
  const CpuShare share = cpu_share(ranks_on_node);
  if (share.allowed >= share.fair_share) return "";
  return "note: mpirun bound each rank to " + std::to_string(share.allowed) + " CPU(s), fewer than the " +
         std::to_string(share.fair_share) + " this node has per rank: add --bind-to none (or --map-by slot:PE=" +
         std::to_string(share.fair_share) + ") to mpirun for " + std::to_string(share.fair_share) +
         " threads a rank, or set run.threads";
}

}  // namespace trident::app
