#include "src/app/stop_signal.h"

#include <csignal>

namespace trident::app {

namespace {
// The project's one piece of global mutable state: a signal handler receives no context, so the
// request must live where the handler can reach it. sig_atomic_t is what a handler may write.
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void record_stop(int) { g_stop_requested = 1; }

// Ctrl-C (srun hands it to the tasks as SIGINT): the first stops after the step with a
// checkpoint, as SIGTERM does; the handler then gives SIGINT back its default action, so a
// second Ctrl-C ends the process at once, as a user pressing it twice expects.
extern "C" void record_interrupt(int) {
  g_stop_requested = 1;
  std::signal(SIGINT, SIG_DFL);  // async-signal-safe (POSIX)
}
}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking MPI and file calls resume instead of failing
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
  struct sigaction interrupt = action;
  interrupt.sa_handler = record_interrupt;
  sigaction(SIGINT, &interrupt, nullptr);
}

bool stop_requested() { return g_stop_requested != 0; }

}  // namespace trident::app
