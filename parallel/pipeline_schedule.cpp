// Pipeline schedules in two layers:
//   1. the compute order of each stage (which forward/backward comes next), one function per
//      schedule, the 1F1B ones written as three visible phases: warm-up, steady, cool-down;
//   2. the placement of sends and receives around those computes, shared by all schedules.
// Layer 2 looks at every stage at once (it is cheap: p * v * m computes per stage), because
// the order of a send and a receive that sit between the same two computes decides whether the
// lists deadlock under blocking point-to-point, and that depends on what the neighbours do.
#include "parallel/pipeline_schedule.h"

#include <algorithm>  // std::min, std::max
#include <set>        // std::set (in-flight activation sets)
#include <stdexcept>  // std::invalid_argument, std::logic_error
#include <string>     // std::string, std::to_string
#include <utility>    // std::pair

namespace trident::parallel {

namespace {

void check_arguments(ScheduleKind kind, int stages, int micro_batches, int chunks) {
  if (stages < 1) throw std::invalid_argument("pipeline schedule: stages must be >= 1, got " + std::to_string(stages));
  if (micro_batches < 1)
    throw std::invalid_argument("pipeline schedule: micro_batches must be >= 1, got " + std::to_string(micro_batches));
  if (chunks < 1) throw std::invalid_argument("pipeline schedule: chunks must be >= 1, got " + std::to_string(chunks));
  if (chunks > 1 && kind != ScheduleKind::kInterleaved)
    throw std::invalid_argument(std::string("pipeline schedule: chunks = ") + std::to_string(chunks) +
                                " needs the interleaved schedule, not " + schedule_name(kind));
  if (kind == ScheduleKind::kInterleaved && micro_batches % stages != 0)
    throw std::invalid_argument("pipeline schedule: interleaved needs micro_batches (" + std::to_string(micro_batches) +
                                ") to be a multiple of the pipeline stages (" + std::to_string(stages) +
                                "), because micro-batches go through each chunk in groups of `stages`");
}

// One forward or backward pass of one micro-batch through one chunk of this rank.
struct Compute {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0;
};

Compute fwd(int micro_batch, int chunk = 0) { return {true, micro_batch, chunk}; }
Compute bwd(int micro_batch, int chunk = 0) { return {false, micro_batch, chunk}; }

std::vector<Compute> gpipe_order(int micro_batches) {
  std::vector<Compute> order;
  for (int mb = 0; mb < micro_batches; ++mb) order.push_back(fwd(mb));
  for (int mb = 0; mb < micro_batches; ++mb) order.push_back(bwd(mb));
  return order;
}

// PipeDream-Flush (Megatron forward_backward_pipelining_without_interleaving). A stage runs
// ahead by the number of stages after it, so that the first backward arrives from the last
// stage exactly when its warm-up ends; from then on it holds at most p - stage activations.
std::vector<Compute> one_f_one_b_order(int stages, int stage, int micro_batches) {
  const int warmup = std::min(stages - stage - 1, micro_batches);
  const int steady = micro_batches - warmup;
  std::vector<Compute> order;
  for (int mb = 0; mb < warmup; ++mb) order.push_back(fwd(mb));  // warm-up
  for (int i = 0; i < steady; ++i) {                             // steady: one forward, one backward
    order.push_back(fwd(warmup + i));
    order.push_back(bwd(i));
  }
  for (int mb = steady; mb < micro_batches; ++mb) order.push_back(bwd(mb));  // cool-down
  return order;
}

// Megatron forward_backward_pipelining_with_interleaving. The k-th forward of a stage (k over
// all micro-batch x chunk passes, 0 .. v * m - 1) takes micro-batches in groups of p per chunk:
//   chunk = (k mod p*v) / p,   micro_batch = (k / (p*v)) * p + k mod p
// e.g. p = 2, v = 2: (mb0,c0) (mb1,c0) (mb0,c1) (mb1,c1) (mb2,c0) (mb3,c0) ...
// The k-th backward takes the same micro-batch with the chunks reversed (the last chunk's
// backward comes first). Warm-up: (p - stage - 1) * 2 forwards to fill the deeper stages twice
// as fast as 1F1B (a round trip now crosses the ring), plus (v - 1) * p for the chunks before
// the last one, capped at v * m.
std::vector<Compute> interleaved_order(int stages, int stage, int micro_batches, int chunks) {
  const int group = stages * chunks;
  const auto chunk_of = [&](int k, bool forward) {
    const int c = (k % group) / stages;
    return forward ? c : chunks - 1 - c;
  };
  const auto micro_batch_of = [&](int k) { return (k / group) * stages + k % stages; };
  const auto forward_pass = [&](int k) { return fwd(micro_batch_of(k), chunk_of(k, true)); };
  const auto backward_pass = [&](int k) { return bwd(micro_batch_of(k), chunk_of(k, false)); };

  const int total = micro_batches * chunks;
  const int warmup = std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  const int steady = total - warmup;
  std::vector<Compute> order;
  for (int k = 0; k < warmup; ++k) order.push_back(forward_pass(k));  // warm-up
  for (int k = 0; k < steady; ++k) {                                  // steady: one forward, one backward
    order.push_back(forward_pass(warmup + k));
    order.push_back(backward_pass(k));
  }
  for (int k = steady; k < total; ++k) order.push_back(backward_pass(k));  // cool-down
  return order;
}

std::vector<Compute> compute_order(ScheduleKind kind, int stages, int stage, int micro_batches, int chunks) {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return gpipe_order(micro_batches);
    case ScheduleKind::kOneFOneB:
      return one_f_one_b_order(stages, stage, micro_batches);
    case ScheduleKind::kInterleaved:
      return interleaved_order(stages, stage, micro_batches, chunks);
  }
  return {};
}

PipelineAction as_action(const Compute& c) {
  return {c.forward ? ActionKind::kForward : ActionKind::kBackward, c.micro_batch, c.chunk};
}

// The receive `c` needs first, if any: forward input unless it is the first virtual stage,
// backward gradient unless it is the last (which starts from the loss).
bool needs_receive(const Compute& c, int virtual_stage, int virtual_stages, PipelineAction* recv) {
  const bool needed = c.forward ? virtual_stage > 0 : virtual_stage < virtual_stages - 1;
  if (needed) *recv = {c.forward ? ActionKind::kRecvForward : ActionKind::kRecvBackward, c.micro_batch, c.chunk};
  return needed;
}

// The send of what `c` produced, if any: forward output unless last virtual stage, input
// gradient unless first.
bool needs_send(const Compute& c, int virtual_stage, int virtual_stages, PipelineAction* send) {
  const bool needed = c.forward ? virtual_stage < virtual_stages - 1 : virtual_stage > 0;
  if (needed) *send = {c.forward ? ActionKind::kSendForward : ActionKind::kSendBackward, c.micro_batch, c.chunk};
  return needed;
}

// The action on `peer` that completes `a` (a send's receive or a receive's send).
PipelineAction partner_action(const PipelineAction& a, const PipelinePeer& peer) {
  ActionKind k = a.kind;
  switch (a.kind) {
    case ActionKind::kSendForward:
      k = ActionKind::kRecvForward;
      break;
    case ActionKind::kRecvForward:
      k = ActionKind::kSendForward;
      break;
    case ActionKind::kSendBackward:
      k = ActionKind::kRecvBackward;
      break;
    case ActionKind::kRecvBackward:
      k = ActionKind::kSendBackward;
      break;
    default:
      break;
  }
  return {k, a.micro_batch, peer.chunk};
}

bool same_action(const PipelineAction& a, const PipelineAction& b) {
  return a.kind == b.kind && a.micro_batch == b.micro_batch && a.chunk == b.chunk;
}

// Places the sends and receives of every stage around its computes and returns stage `stage`'s
// list. Between two computes a stage has a "window" of at most two operations: the send of the
// previous compute's output and the receive for the next compute's input. The stages advance
// together: a stage computes when its window is empty; an operation leaves a window when the
// peer holds its partner, and both are appended at that moment. Appending in one global
// sequence of matches makes every list a subsequence of that sequence, which is what lets the
// lists run under blocking rendezvous semantics.
//
// For gpipe and 1f1b that always works. The interleaved order can wedge: with p = 2, v = 2,
// m = 4, stage 0 must send the gradient of B0.1 to stage 1, which receives it only after its
// F2, while stage 1 must send the gradient of B1.1 to stage 0, which receives it only after
// its F3. Megatron escapes by batching the four transfers of a steady 1F1B pair after both
// computes. Here, when no stage can move and some stage waits on sends only, those sends are
// deferred: the stage goes on computing and each deferred send is placed where its receiver
// takes it. Receives always stay right before their compute. Only a stall with every blocked
// stage waiting on a receive is left, which would mean the compute orders disagree (a bug
// here): that throws std::logic_error.
std::vector<PipelineAction> place_communication(ScheduleKind kind, int stages, int stage, int micro_batches,
                                                int chunks) {
  const int virtual_stages = stages * chunks;
  struct StageState {
    std::vector<Compute> order;
    std::size_t next = 0;                  // index of the next compute in `order`
    std::vector<PipelineAction> window;    // operations due before order[next] may run
    std::vector<PipelineAction> deferred;  // sends that no longer hold up the computes
    std::vector<PipelineAction> out;
  };
  std::vector<StageState> all(static_cast<std::size_t>(stages));
  const auto at = [&](int s) -> StageState& { return all[static_cast<std::size_t>(s)]; };
  const auto virtual_stage = [&](int s, int chunk) { return chunk * stages + s; };
  for (int s = 0; s < stages; ++s) {
    StageState& st = at(s);
    st.order = compute_order(kind, stages, s, micro_batches, chunks);
    PipelineAction recv;
    if (needs_receive(st.order.front(), virtual_stage(s, st.order.front().chunk), virtual_stages, &recv))
      st.window.push_back(recv);
  }

  // Matches the operations of `pending` (stage s's window or deferred sends) whose partner sits
  // in the peer's window.
  const auto match = [&](int s, std::vector<PipelineAction>& pending) {
    bool matched = false;
    for (std::size_t i = 0; i < pending.size();) {
      const PipelineAction op = pending[i];
      const PipelinePeer peer = pipeline_peer(stages, s, op);
      StageState& other = at(peer.stage);
      const PipelineAction want = partner_action(op, peer);
      const auto hit = std::find_if(other.window.begin(), other.window.end(),
                                    [&](const PipelineAction& a) { return same_action(a, want); });
      if (hit == other.window.end()) {
        ++i;
        continue;
      }
      at(s).out.push_back(op);
      other.out.push_back(*hit);
      other.window.erase(hit);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      matched = true;
    }
    return matched;
  };
  const auto done = [&] {
    return std::all_of(all.begin(), all.end(), [](const StageState& st) {
      return st.next == st.order.size() && st.window.empty() && st.deferred.empty();
    });
  };
  while (!done()) {
    bool progress = false;
    for (int s = 0; s < stages; ++s) {  // computes whose inputs are in hand
      StageState& st = at(s);
      if (!st.window.empty() || st.next == st.order.size()) continue;
      const Compute c = st.order[st.next++];
      st.out.push_back(as_action(c));
      PipelineAction op;
      if (needs_send(c, virtual_stage(s, c.chunk), virtual_stages, &op)) st.window.push_back(op);
      if (st.next < st.order.size()) {
        const Compute& following = st.order[st.next];
        if (needs_receive(following, virtual_stage(s, following.chunk), virtual_stages, &op)) st.window.push_back(op);
      }
      progress = true;
    }
    for (int s = 0; s < stages; ++s) {  // oldest sends first, then a window's send before its receive
      if (match(s, at(s).deferred)) progress = true;
      if (match(s, at(s).window)) progress = true;
    }
    if (progress) continue;
    for (StageState& st : all) {
      const bool sends_only = !st.window.empty() && std::all_of(st.window.begin(), st.window.end(), [](const auto& a) {
        return a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward;
      });
      if (!sends_only) continue;
      st.deferred.insert(st.deferred.end(), st.window.begin(), st.window.end());
      st.window.clear();
      progress = true;
    }
    if (!progress)
      throw std::logic_error(std::string("pipeline schedule: communication placement stalled for ") +
                             schedule_name(kind) + " with stages=" + std::to_string(stages) +
                             " micro_batches=" + std::to_string(micro_batches) + " chunks=" + std::to_string(chunks));
  }
  return at(stage).out;
}

}  // namespace

std::vector<PipelineAction> make_pipeline_schedule(ScheduleKind kind, int stages, int stage, int micro_batches,
                                                   int chunks) {
  check_arguments(kind, stages, micro_batches, chunks);
  if (stage < 0 || stage >= stages)
    throw std::invalid_argument("pipeline schedule: stage " + std::to_string(stage) + " outside [0, " +
                                std::to_string(stages) + ")");
  if (stages == 1) {  // no peer: chunk hand-offs stay in memory
    std::vector<PipelineAction> actions;
    for (const Compute& c : compute_order(kind, stages, stage, micro_batches, chunks)) actions.push_back(as_action(c));
    return actions;
  }
  return place_communication(kind, stages, stage, micro_batches, chunks);
}

PipelinePeer pipeline_peer(int stages, int stage, const PipelineAction& action) {
  const int virtual_stage = action.chunk * stages + stage;
  const bool downstream = action.kind == ActionKind::kSendForward || action.kind == ActionKind::kRecvBackward;
  const bool upstream = action.kind == ActionKind::kRecvForward || action.kind == ActionKind::kSendBackward;
  if (!downstream && !upstream)
    throw std::invalid_argument("pipeline_peer: " + action_label(action) + " is no send/recv");
  const int peer = downstream ? virtual_stage + 1 : virtual_stage - 1;
  if (peer < 0) throw std::invalid_argument("pipeline_peer: the first virtual stage has no upstream peer");
  return {peer % stages, peer / stages};
}

ScheduleKind parse_schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved})
    if (name == schedule_name(k)) return k;
  throw std::invalid_argument("unknown pipeline schedule '" + name + "' (choose gpipe | 1f1b | interleaved)");
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGpipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
  }
  return "?";
}

// Assumptions: every stage (every chunk, with interleaving) takes the same time t_f for the
// forward of one micro-batch and t_b for its backward (t_f and t_b need not be equal; with v
// chunks a chunk takes t_f / v and t_b / v); sends and receives cost nothing and never hold up
// the sender; the optimizer step and gradient reduction are outside the step being measured.
//   gpipe and 1f1b: the last micro-batch's forward reaches the last stage after (p - 1) t_f of
//   fill, and the first stage's last backward waits (p - 1) t_b of drain behind it, so a step
//   lasts m (t_f + t_b) + (p - 1)(t_f + t_b); each stage computes m (t_f + t_b) of it:
//       idle share = (p - 1) / (m + p - 1).
//   interleaved: fill and drain cross the p ranks once per chunk-sized pass, (p - 1)(t_f + t_b)/v,
//   while the compute is unchanged, m (t_f + t_b) = (v m)(t_f + t_b)/v:
//       idle share = (p - 1) / (v m + p - 1).
// This is the Megatron-LM paper's bubble (p - 1)/m (or (p - 1)/(v m)) measured against the
// whole step rather than against the compute. Real steps add communication and imbalance.
double ideal_bubble_fraction(ScheduleKind kind, int stages, int micro_batches, int chunks) {
  check_arguments(kind, stages, micro_batches, chunks);
  const double idle = stages - 1;
  return idle / (static_cast<double>(chunks) * micro_batches + idle);
}

int peak_in_flight(const std::vector<PipelineAction>& actions) {
  std::set<std::pair<int, int>> held;  // (micro_batch, chunk) forwarded, not yet backwarded
  int peak = 0;
  for (const PipelineAction& a : actions) {
    if (a.kind == ActionKind::kForward) held.insert({a.micro_batch, a.chunk});
    if (a.kind == ActionKind::kBackward) held.erase({a.micro_batch, a.chunk});
    peak = std::max(peak, static_cast<int>(held.size()));
  }
  return peak;
}

std::string action_label(const PipelineAction& action) {
  const char* prefix = "";
  switch (action.kind) {
    case ActionKind::kRecvForward:
      prefix = "RF";
      break;
    case ActionKind::kForward:
      prefix = "F";
      break;
    case ActionKind::kSendForward:
      prefix = "SF";
      break;
    case ActionKind::kRecvBackward:
      prefix = "RB";
      break;
    case ActionKind::kBackward:
      prefix = "B";
      break;
    case ActionKind::kSendBackward:
      prefix = "SB";
      break;
  }
  std::string label(prefix);
  label += std::to_string(action.micro_batch);
  if (action.chunk != 0) {
    label += '.';
    label += std::to_string(action.chunk);
  }
  return label;
}

}  // namespace trident::parallel
