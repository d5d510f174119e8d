// An error raised during training on some ranks only.
//
// User errors before training are raised alike on every rank (decks are parsed everywhere, file
// checks are agreed), so main prints one line and every rank returns 2. Inside the step loop an
// error can be one rank's alone: its share of the dataset unreadable or changed, rank 0's
// metrics file on a full disk. The other ranks then wait in the step's next collective, and the
// failing rank, unwinding, would block too: closing the dataset's parallel HDF5 file is itself a
// collective. Such a job hung silently until its time limit or run.stall_timeout.
//
// So train runs everything after the deck (the dataset's opening, the device, the model, the
// restart, the steps, the final files) inside end_job_on_rank_error: a user error is first offered
// to the other ranks (every_rank_arrives on a communicator used for nothing else). If every rank
// arrives within a few seconds, the error was agreed (a checkpoint write that failed everywhere,
// a dataset that does not fit the deck) and unwinds as before: one line, exit 2 everywhere.
// Otherwise this rank prints its error, naming itself, and ends the job with MPI_Abort and exit
// status 2; an internal error or an out-of-memory ends it at once with status 1, before the
// unwinding, as main would have after it.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>

namespace trident::app {

// Prints "trident: KIND on rank R: MESSAGE" (KIND "error" or "internal error"; after flushing
// stdout) and ends the job with MPI_Abort(MPI_COMM_WORLD, status). Also main's way out for an
// out-of-memory or internal error that reaches it.
[[noreturn]] void end_job_from_rank(int world_rank, const char* kind, const std::string& message, int status);

// How long the ranks of an agreed error take to reach the handler: they leave the agreeing
// collective together, so seconds are a wide margin.
inline constexpr std::chrono::milliseconds kAgreementPatience{10000};

// Runs `work` (collective over `comm`: every rank of it calls this); on an exception, ends the
// job from this rank unless the error is a user error that every rank of `comm` raised too (then
// it is rethrown) or the training diverged (agreed over the world by construction: rethrown). The
// agreement (mpi_support::every_rank_arrives) runs on a duplicate of `comm`, made and freed here.
void end_job_on_rank_error(MPI_Comm comm, int world_rank, const std::function<void()>& work);

}  // namespace trident::app
