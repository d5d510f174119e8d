#include "src/app/stop_signal.h"

#include <csignal>

namespace trident::app {

namespace {
// The project's one piece of global mutable state: a signal handler receives no context, so the
// request must live where the handler can reach it. sig_atomic_t is what a handler may write.
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void record_stop(int) { g_stop_requested = 1; }
}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking MPI and file calls resume instead of failing
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

bool stop_requested() { return g_stop_requested != 0; }

}  // namespace trident::app
