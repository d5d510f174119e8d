#include "src/app/startup_clock.h"

#include <cstdio>
#include <utility>

namespace trident::app {

namespace {

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

double since(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::string startup_time_line(double total_seconds, const std::vector<StartupPhase>& phases) {
  std::string line = "start-up: " + seconds_text(total_seconds) + " to the first step";
  if (phases.empty()) return line + " (the slowest rank's)";
  line += " (";
  for (std::size_t i = 0; i < phases.size(); ++i) {
    if (i > 0) line += ", ";
    line += phases[i].name + " " + seconds_text(phases[i].seconds);
  }
  return line + "; each the slowest rank's)";
}

StartupClock::StartupClock() : start_(std::chrono::steady_clock::now()), last_(start_) {}

void StartupClock::phase_done(std::string name) {
  const auto now = std::chrono::steady_clock::now();
  phases_.push_back({std::move(name), since(last_, now)});
  last_ = now;
}

std::string StartupClock::line(parallel::Comm& world) const {
  // fp32 seconds: a microsecond's resolution up to minutes, far below what is printed.
  std::vector<float> longest;
  longest.reserve(phases_.size() + 1);
  for (const auto& phase : phases_) longest.push_back(static_cast<float>(phase.seconds));
  longest.push_back(static_cast<float>(since(start_, std::chrono::steady_clock::now())));
  world.all_reduce_max(longest.data(), longest.size());
  std::vector<StartupPhase> phases = phases_;
  for (std::size_t i = 0; i < phases.size(); ++i) phases[i].seconds = longest[i];
  return startup_time_line(longest.back(), phases);
}

}  // namespace trident::app
