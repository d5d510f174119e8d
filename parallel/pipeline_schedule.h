// Pipeline schedules: the ordered list of actions one pipeline stage performs in a training
// step, as pure data. No MPI, no model: the pipeline runner walks the list and calls the model
// and the communicator; the unit tests walk every stage's list together to prove it finishes.
//
// Vocabulary. `stages` ranks (p) form the pipeline; `stage` is this rank's place in it. A step
// has `micro_batches` (m) micro-batches. With `chunks` (v) > 1 (interleaved only) each rank
// holds v model chunks; chunk c on rank s is virtual stage c * p + s, so the model runs
// virtual stages 0, 1, ..., v * p - 1 in order and the activation crosses the ranks v times.
//
// Worked example, 1f1b with p = 4, m = 8 (F = forward, B = backward, micro-batch index):
//   stage 0:  F0 F1 F2 | F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 | B5 B6 B7
//   stage 3:           | F0 B0 F1 B1 F2 B2 ... F7 B7   |
//   (warm-up | steady one-forward-one-backward | cool-down; docs/pipeline-schedules.md has the
//   timelines of all three schedules.)
//
// Communication placement. A receive comes right before the compute that consumes it, a send
// right after the compute that produces it. The first virtual stage receives no forward input;
// the last sends no forward output and receives no backward gradient (it starts from the
// loss); the first sends no backward gradient. Chunk boundaries still go through send/recv to
// the rank holding the next virtual stage (the last rank hands chunk c to the first rank's
// chunk c + 1). With a single stage there is no peer, so a one-stage schedule has no
// send/recv at all (chunk hand-offs stay in memory).
//
// Deadlock freedom. The lists run to completion even when every send and receive blocks until
// its peer arrives (rendezvous semantics, like MPI_Ssend), with no batching of operations: every
// stage's list is a subsequence of one global order of messages. Between two computes a stage
// has at most one send and one receive, ordered to keep that property. gpipe and 1f1b always
// send right after the producing compute; interleaved sometimes has to defer a send past one
// further compute (where Megatron batches the transfers of a forward/backward pair instead).
#pragma once

#include <string>
#include <vector>

namespace trident::parallel {

enum class ScheduleKind {
  kGpipe,        // all forwards, then all backwards: peak memory m micro-batches
  kOneFOneB,     // PipeDream-Flush / Megatron non-interleaved: peak memory p - stage
  kInterleaved,  // Megatron virtual pipeline: v chunks per rank, bubble divided by v
};

enum class ActionKind { kRecvForward, kForward, kSendForward, kRecvBackward, kBackward, kSendBackward };

struct PipelineAction {
  ActionKind kind = ActionKind::kForward;
  int micro_batch = 0;  // 0 .. micro_batches - 1
  int chunk = 0;        // model chunk on this rank (0 .. chunks - 1); 0 unless interleaved
};

// The actions stage `stage` (0 .. stages - 1) performs in one step, in order. Every
// (micro_batch, chunk) gets exactly one kForward and, later, one kBackward. Sends and receives
// carry the micro-batch and this rank's chunk; the peer is the rank of the neighbouring virtual
// stage (see pipeline_peer). Throws std::invalid_argument for stages < 1, stage outside
// [0, stages), micro_batches < 1, chunks < 1, chunks > 1 with a schedule other than
// kInterleaved, and kInterleaved with micro_batches not a multiple of stages.
std::vector<PipelineAction> make_pipeline_schedule(ScheduleKind kind, int stages, int stage, int micro_batches,
                                                   int chunks = 1);

// "gpipe" | "1f1b" | "interleaved"; anything else throws std::invalid_argument naming the choices.
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_name(ScheduleKind kind);

// Share of a step's wall time a stage sits idle, by the textbook formula (derivation in the
// .cpp): (p - 1) / (m + p - 1) for gpipe and 1f1b, (p - 1) / (v * m + p - 1) for interleaved.
// Argument checks as make_pipeline_schedule (without `stage`).
double ideal_bubble_fraction(ScheduleKind kind, int stages, int micro_batches, int chunks = 1);

// The most activation sets a stage holds at once under `actions`: forwards done whose backward
// is not yet done, counted per (micro_batch, chunk); with interleaving one set is one chunk's
// share of the stage's layers. Computed by walking the list.
int peak_in_flight(const std::vector<PipelineAction>& actions);

// Where a send or receive of stage `stage` goes: the pipeline rank and that rank's chunk holding
// the neighbouring virtual stage (next one for forward traffic, previous one for backward).
// Requires a send/recv action that exists in some schedule with these `stages` and `chunks`.
struct PipelinePeer {
  int stage = 0;
  int chunk = 0;
};
PipelinePeer pipeline_peer(int stages, int stage, const PipelineAction& action);

// "F3", "B3", "SF3", "RB3"; chunks other than 0 get a suffix, "F3.1" (micro-batch 3, chunk 1).
// For logs and error messages.
std::string action_label(const PipelineAction& action);

}  // namespace trident::parallel
