// The start-up line of `trident train` (src/app/startup_clock.h): its text, and a clock whose
// phases are the intervals between marks and whose total covers them all.
#include "src/app/startup_clock.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>

#include "parallel/mpi_comm.h"

namespace trident::app {
namespace {

TEST(StartupClock, LineNamesEveryPhaseInOrder) {
  EXPECT_EQ(startup_time_line(4.306, {{"deck and data", 0.2}, {"device and groups", 1.94}, {"parameters", 2.166}}),
            "start-up: 4.31 s to the first step (deck and data 0.20 s, device and groups 1.94 s, parameters 2.17 s; "
            "each the slowest rank's)");
  EXPECT_EQ(startup_time_line(0.5, {}), "start-up: 0.50 s to the first step (the slowest rank's)");
}

// Reads back "NAME X.XX s" from a line.
double seconds_of(const std::string& line, const std::string& name) {
  const auto at = line.find(name + " ");
  if (at == std::string::npos) return -1.0;
  return std::stod(line.substr(at + name.size() + 1));
}

TEST(StartupClock, PhasesAreTheIntervalsBetweenMarks) {
  MPI_Comm self;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_SELF, &self), MPI_SUCCESS);
  parallel::MpiComm world(self, "self");
  StartupClock clock;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  clock.phase_done("deck");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  clock.phase_done("model");
  const std::string line = clock.line(world);
  const double first = seconds_of(line, "deck");
  const double second = seconds_of(line, "model");
  const double total = seconds_of(line, "start-up:");
  // Sleeps last at least as asked; the upper bounds allow a busy machine's scheduling delays.
  EXPECT_GE(first, 0.03) << line;
  EXPECT_GE(second, 0.12) << line;
  EXPECT_LT(first, second) << line;  // 30 ms against 120: the marks are not swapped or summed
  EXPECT_GE(total + 0.005, first + second) << line;  // the total covers both (printed to 0.01 s)
  EXPECT_LT(total, 5.0) << line;
}

}  // namespace
}  // namespace trident::app
