#include "src/app/threads.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace trident::app {

int default_threads(int ranks_on_node) {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int allowed = hardware;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
  const int fair_share = hardware / std::max(1, ranks_on_node);
  return std::max(1, std::min(allowed, fair_share));
}

}  // namespace trident::app
