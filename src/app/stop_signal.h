// Stop requests by signal: Slurm sends SIGUSR1 (with --signal=USR1@SECONDS) or SIGTERM before
// it preempts or ends a job. The handlers only record the request; the trainer agrees on it
// over all ranks at the end of a step, writes a checkpoint and returns, so the job exits 0 with
// its work saved. A second signal during the checkpoint only sets the same flag again.
#pragma once

namespace trident::app {

// Installs the handlers for SIGTERM, SIGUSR1 and SIGINT (idempotent). A second SIGINT ends the
// process at once (Ctrl-C twice).
void install_stop_handlers();
// True once one of them has arrived in this process.
bool stop_requested();

}  // namespace trident::app
