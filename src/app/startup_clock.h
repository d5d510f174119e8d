// Where a run's start-up goes: the seconds from `trident train`'s start to its first step, by
// phase. A start-up of minutes (a parallel file system's open, NCCL's rendezvous, a large
// model's initialisation or checkpoint read) is paid again at every restart and by every run of
// a scaling study, so the log names the phase that took it, as it names the slow kernels.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "parallel/comm.h"

namespace trident::app {

struct StartupPhase {
  std::string name;
  double seconds = 0.0;
};

// "start-up: 4.31 s to the first step (deck and data 0.20 s, ...; each the slowest rank's)":
// total is the slowest rank's whole start-up, each phase its own slowest rank's (they need not
// add up to the total when different ranks were slowest).
std::string startup_time_line(double total_seconds, const std::vector<StartupPhase>& phases);

class StartupClock {
 public:
  StartupClock();  // the start-up begins now

  // Ends the phase running since the previous mark (or the start), under `name`.
  void phase_done(std::string name);

  // Collective over world (one reduction): the line above, with each phase's and the total's
  // longest over the ranks; the same text on every rank.
  std::string line(parallel::Comm& world) const;

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::vector<StartupPhase> phases_;
};

}  // namespace trident::app
