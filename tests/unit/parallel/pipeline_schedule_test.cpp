// Pipeline schedules as data: every stage's action list for a grid of (schedule, stages,
// micro-batches, chunks) is checked on its own (passes, placement of sends and receives, memory)
// and then all stages are run together by two small simulators written here, apart from the
// generator: one with rendezvous point-to-point (deadlock check), one with timed computes and
// free communication (bubble check).
#include "parallel/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

using trident::parallel::ActionKind;
using trident::parallel::make_pipeline_schedule;
using trident::parallel::PipelineAction;
using trident::parallel::ScheduleKind;
using Lists = std::vector<std::vector<PipelineAction>>;

struct Case {
  ScheduleKind kind;
  int stages;
  int micro_batches;
  int chunks;
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << trident::parallel::schedule_name(c.kind) << " p=" << c.stages << " m=" << c.micro_batches << " v=" << c.chunks;
  return os.str();
}

// gpipe and 1f1b: stages 1..4 x micro-batches 1..8; interleaved: chunks 1..3 and micro-batches
// the multiples of stages up to 8.
std::vector<Case> grid() {
  std::vector<Case> cases;
  for (int p = 1; p <= 4; ++p) {
    for (int m = 1; m <= 8; ++m) {
      cases.push_back({ScheduleKind::kGpipe, p, m, 1});
      cases.push_back({ScheduleKind::kOneFOneB, p, m, 1});
      if (m % p == 0)
        for (int v = 1; v <= 3; ++v) cases.push_back({ScheduleKind::kInterleaved, p, m, v});
    }
  }
  return cases;
}

Lists all_stages(const Case& c) {
  Lists lists;
  for (int s = 0; s < c.stages; ++s)
    lists.push_back(make_pipeline_schedule(c.kind, c.stages, s, c.micro_batches, c.chunks));
  return lists;
}

bool is_compute(ActionKind k) { return k == ActionKind::kForward || k == ActionKind::kBackward; }
bool is_send(ActionKind k) { return k == ActionKind::kSendForward || k == ActionKind::kSendBackward; }
bool is_forward_traffic(ActionKind k) { return k == ActionKind::kSendForward || k == ActionKind::kRecvForward; }

// Independent twin of the peer arithmetic: virtual stage = chunk * p + stage; forward traffic
// goes to the next virtual stage, backward traffic to the previous one.
int virtual_stage(int stages, int stage, int chunk) { return chunk * stages + stage; }

// A message is named by its direction, micro-batch and the virtual stage that sends it.
using MessageKey = std::tuple<bool /*forward*/, int /*micro_batch*/, int /*sender virtual stage*/>;

MessageKey message_of(int stages, int stage, const PipelineAction& a) {
  const int vs = virtual_stage(stages, stage, a.chunk);
  const bool forward = is_forward_traffic(a.kind);
  if (is_send(a.kind)) return {forward, a.micro_batch, vs};
  return {forward, a.micro_batch, forward ? vs - 1 : vs + 1};
}

int peer_stage(int stages, int stage, const PipelineAction& a) {
  const int vs = virtual_stage(stages, stage, a.chunk);
  const bool downstream = a.kind == ActionKind::kSendForward || a.kind == ActionKind::kRecvBackward;
  return (downstream ? vs + 1 : vs - 1) % stages;
}

struct RendezvousRun {
  bool finished = true;
  std::string stuck_at;                  // each stage's blocked action when not finished
  std::map<MessageKey, int> deliveries;  // how often each message went through
  int sends = 0;
  int receives = 0;
  std::vector<std::string> missing_inputs;  // computes run before their input arrived
};

// Runs all stages' lists together. A send or receive completes only when the peer's current
// action is its partner (same direction, micro-batch and virtual stage); otherwise the stage
// waits. Computes run at once but must find their input: the forward activation (received, or
// none for virtual stage 0) and for a backward its own forward plus the gradient (received, or
// none for the last virtual stage). With one stage there is no peer and chunk hand-offs are local.
RendezvousRun run_rendezvous(const Case& c, const Lists& lists) {
  RendezvousRun run;
  const int last_vs = c.stages * c.chunks - 1;
  std::vector<std::size_t> cursor(lists.size(), 0);
  std::set<std::tuple<int, int, int>> forward_in, grad_in, forward_done, backward_done;  // (stage, mb, chunk)
  for (const auto& list : lists) {
    for (const auto& a : list) {
      run.sends += is_send(a.kind) ? 1 : 0;
      run.receives += (!is_send(a.kind) && !is_compute(a.kind)) ? 1 : 0;
    }
  }
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < c.stages; ++s) {
      while (cursor[s] < lists[s].size()) {
        const PipelineAction& a = lists[s][cursor[s]];
        const int vs = virtual_stage(c.stages, s, a.chunk);
        if (a.kind == ActionKind::kForward) {
          const bool has_input = vs == 0 || forward_in.count({s, a.micro_batch, a.chunk}) ||
                                 (c.stages == 1 && forward_done.count({s, a.micro_batch, a.chunk - 1}));
          if (!has_input)
            run.missing_inputs.push_back("stage " + std::to_string(s) + " " + trident::parallel::action_label(a));
          forward_done.insert({s, a.micro_batch, a.chunk});
          ++cursor[s];
          progress = true;
          continue;
        }
        if (a.kind == ActionKind::kBackward) {
          const bool has_grad = vs == last_vs || grad_in.count({s, a.micro_batch, a.chunk}) ||
                                (c.stages == 1 && backward_done.count({s, a.micro_batch, a.chunk + 1}));
          if (!has_grad || !forward_done.count({s, a.micro_batch, a.chunk}))
            run.missing_inputs.push_back("stage " + std::to_string(s) + " " + trident::parallel::action_label(a));
          backward_done.insert({s, a.micro_batch, a.chunk});
          ++cursor[s];
          progress = true;
          continue;
        }
        const int peer = peer_stage(c.stages, s, a);
        if (peer == s || cursor[peer] >= lists[peer].size()) break;
        const PipelineAction& b = lists[peer][cursor[peer]];
        const bool partners = !is_compute(b.kind) && is_send(a.kind) != is_send(b.kind) &&
                              is_forward_traffic(a.kind) == is_forward_traffic(b.kind) &&
                              message_of(c.stages, s, a) == message_of(c.stages, peer, b) &&
                              peer_stage(c.stages, peer, b) == s;
        if (!partners) break;
        const auto& recv = is_send(a.kind) ? b : a;
        const int receiver = is_send(a.kind) ? peer : s;
        (is_forward_traffic(a.kind) ? forward_in : grad_in).insert({receiver, recv.micro_batch, recv.chunk});
        ++run.deliveries[message_of(c.stages, s, a)];
        ++cursor[s];
        ++cursor[peer];
        progress = true;
      }
    }
  }
  for (int s = 0; s < c.stages; ++s) {
    if (cursor[s] < lists[s].size()) {
      run.finished = false;
      run.stuck_at += " stage " + std::to_string(s) + ": " + trident::parallel::action_label(lists[s][cursor[s]]);
    }
  }
  return run;
}

// Time model: a forward of one micro-batch through one chunk takes `forward_time`, a backward
// `backward_time`; sends cost nothing and never wait (the data is there at the send's time); a
// receive waits until the matching send was issued. Returns the step's wall time (last stage
// to finish).
double run_timed(const Case& c, const Lists& lists, double forward_time, double backward_time) {
  std::vector<double> clock(lists.size(), 0.0);
  std::vector<std::size_t> cursor(lists.size(), 0);
  std::map<MessageKey, double> sent_at;
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < c.stages; ++s) {
      while (cursor[s] < lists[s].size()) {
        const PipelineAction& a = lists[s][cursor[s]];
        if (is_compute(a.kind)) {
          clock[s] += a.kind == ActionKind::kForward ? forward_time : backward_time;
        } else if (is_send(a.kind)) {
          sent_at[message_of(c.stages, s, a)] = clock[s];
        } else {
          const auto it = sent_at.find(message_of(c.stages, s, a));
          if (it == sent_at.end()) break;
          clock[s] = std::max(clock[s], it->second);
        }
        ++cursor[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < c.stages; ++s) EXPECT_EQ(cursor[s], lists[s].size()) << describe(c) << " stage " << s;
  return *std::max_element(clock.begin(), clock.end());
}

std::vector<std::string> compute_labels(const std::vector<PipelineAction>& actions) {
  std::vector<std::string> labels;
  for (const auto& a : actions)
    if (is_compute(a.kind)) labels.push_back(trident::parallel::action_label(a));
  return labels;
}

int interleaved_warmup(const Case& c, int stage) {
  return std::min((c.stages - stage - 1) * 2 + (c.chunks - 1) * c.stages, c.micro_batches * c.chunks);
}

}  // namespace

TEST(PipelineSchedule, EveryPassHasOneForwardThenOneBackwardPerStage) {
  for (const Case& c : grid()) {
    for (int s = 0; s < c.stages; ++s) {
      const auto actions = make_pipeline_schedule(c.kind, c.stages, s, c.micro_batches, c.chunks);
      std::map<std::pair<int, int>, int> forward_at, backward_at, forwards, backwards;
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const auto& a = actions[i];
        ASSERT_GE(a.micro_batch, 0) << describe(c);
        ASSERT_LT(a.micro_batch, c.micro_batches) << describe(c);
        ASSERT_GE(a.chunk, 0) << describe(c);
        ASSERT_LT(a.chunk, c.chunks) << describe(c);
        if (a.kind == ActionKind::kForward)
          ++forwards[{a.micro_batch, a.chunk}], forward_at[{a.micro_batch, a.chunk}] = i;
        if (a.kind == ActionKind::kBackward)
          ++backwards[{a.micro_batch, a.chunk}], backward_at[{a.micro_batch, a.chunk}] = i;
      }
      for (int mb = 0; mb < c.micro_batches; ++mb) {
        for (int chunk = 0; chunk < c.chunks; ++chunk) {
          const std::pair<int, int> pass{mb, chunk};
          EXPECT_EQ(forwards[pass], 1) << describe(c) << " stage " << s << " mb " << mb << " chunk " << chunk;
          EXPECT_EQ(backwards[pass], 1) << describe(c) << " stage " << s << " mb " << mb << " chunk " << chunk;
          EXPECT_LT(forward_at[pass], backward_at[pass]) << describe(c) << " stage " << s << " mb " << mb;
        }
      }
      EXPECT_EQ(forwards.size(), static_cast<std::size_t>(c.micro_batches * c.chunks)) << describe(c);
    }
  }
}

TEST(PipelineSchedule, ReceivesSitRightBeforeTheirComputeAndSendsRightAfter) {
  // Between two computes a stage only sends what came out of computes and receives what the next
  // compute consumes; the ends of the pipeline skip the transfers they have no peer for. gpipe
  // and 1f1b send right after the producing compute; interleaved may defer a send past one
  // further compute (the rendezvous escape described in pipeline_schedule.cpp), never more.
  for (const Case& c : grid()) {
    const int last_vs = c.stages * c.chunks - 1;
    const int allowed_lag = c.kind == ScheduleKind::kInterleaved ? 1 : 0;
    for (int s = 0; s < c.stages; ++s) {
      const auto actions = make_pipeline_schedule(c.kind, c.stages, s, c.micro_batches, c.chunks);
      std::map<std::string, int> unsent;  // send label -> computes done when it was produced
      std::set<std::string> received;     // receives since the last compute
      int computes = 0;
      for (const auto& a : actions) {
        const std::string label = trident::parallel::action_label(a);
        const int vs = virtual_stage(c.stages, s, a.chunk);
        if (is_send(a.kind)) {
          const auto it = unsent.find(label);
          ASSERT_NE(it, unsent.end()) << describe(c) << " stage " << s << " sends " << label << " before producing it";
          EXPECT_LE(computes - it->second, allowed_lag) << describe(c) << " stage " << s << " " << label;
          unsent.erase(it);
          continue;
        }
        if (!is_compute(a.kind)) {
          received.insert(label);
          continue;
        }
        std::set<std::string> expected;
        const bool forward = a.kind == ActionKind::kForward;
        if (c.stages > 1 && (forward ? vs > 0 : vs < last_vs))
          expected.insert(trident::parallel::action_label(
              {forward ? ActionKind::kRecvForward : ActionKind::kRecvBackward, a.micro_batch, a.chunk}));
        EXPECT_EQ(received, expected) << describe(c) << " stage " << s << " before " << label;
        received.clear();
        ++computes;
        if (c.stages > 1 && (forward ? vs < last_vs : vs > 0))
          unsent[trident::parallel::action_label(
              {forward ? ActionKind::kSendForward : ActionKind::kSendBackward, a.micro_batch, a.chunk})] = computes;
      }
      EXPECT_TRUE(unsent.empty()) << describe(c) << " stage " << s << " never sends " << unsent.begin()->first;
      EXPECT_TRUE(received.empty()) << describe(c) << " stage " << s << " receives after its last compute";
    }
  }
}

TEST(PipelineSchedule, AllStagesFinishUnderRendezvousWithEverySendMatchedOnce) {
  for (const Case& c : grid()) {
    const Lists lists = all_stages(c);
    const RendezvousRun run = run_rendezvous(c, lists);
    EXPECT_TRUE(run.finished) << describe(c) << " deadlocked at" << run.stuck_at;
    EXPECT_TRUE(run.missing_inputs.empty()) << describe(c) << " first: " << run.missing_inputs.front();
    EXPECT_EQ(run.sends, run.receives) << describe(c);
    EXPECT_EQ(static_cast<int>(run.deliveries.size()), run.sends) << describe(c);
    for (const auto& [key, times] : run.deliveries) EXPECT_EQ(times, 1) << describe(c);
    // Each of the v*p - 1 boundaries carries every micro-batch once each way.
    const int boundaries = c.stages == 1 ? 0 : c.stages * c.chunks - 1;
    EXPECT_EQ(run.sends, 2 * boundaries * c.micro_batches) << describe(c);
  }
}

TEST(PipelineSchedule, RendezvousSimulatorCatchesAnOrderThatDeadlocks) {
  // The simulator must be able to fail: two stages that both send before receiving block forever.
  const Case c{ScheduleKind::kOneFOneB, 2, 2, 1};
  Lists lists = all_stages(c);
  lists[1] = {{ActionKind::kRecvForward, 0, 0},  {ActionKind::kForward, 0, 0},     {ActionKind::kBackward, 0, 0},
              {ActionKind::kSendBackward, 0, 0}, {ActionKind::kRecvForward, 1, 0}, {ActionKind::kForward, 1, 0},
              {ActionKind::kBackward, 1, 0},     {ActionKind::kSendBackward, 1, 0}};
  lists[0] = {{ActionKind::kForward, 0, 0},      {ActionKind::kSendForward, 0, 0},  {ActionKind::kForward, 1, 0},
              {ActionKind::kSendForward, 1, 0},  {ActionKind::kRecvBackward, 0, 0}, {ActionKind::kBackward, 0, 0},
              {ActionKind::kRecvBackward, 1, 0}, {ActionKind::kBackward, 1, 0}};
  EXPECT_FALSE(run_rendezvous(c, lists).finished);
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostStagesMinusStageMicroBatches) {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m)
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(trident::parallel::peak_in_flight(make_pipeline_schedule(ScheduleKind::kOneFOneB, p, s, m)),
                  std::min(p - s, m))
            << "p=" << p << " m=" << m << " stage " << s;
}

TEST(PipelineSchedule, GpipeHoldsEveryMicroBatch) {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m)
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(trident::parallel::peak_in_flight(make_pipeline_schedule(ScheduleKind::kGpipe, p, s, m)), m)
            << "p=" << p << " m=" << m << " stage " << s;
}

TEST(PipelineSchedule, InterleavedHoldsWarmupPlusOneChunkPasses) {
  // The brief asks for at most warm-up + 1; the steady phase's forward-then-backward makes it exact.
  for (const Case& c : grid()) {
    if (c.kind != ScheduleKind::kInterleaved) continue;
    for (int s = 0; s < c.stages; ++s) {
      const int peak =
          trident::parallel::peak_in_flight(make_pipeline_schedule(c.kind, c.stages, s, c.micro_batches, c.chunks));
      EXPECT_EQ(peak, std::min(interleaved_warmup(c, s) + 1, c.micro_batches * c.chunks))
          << describe(c) << " stage " << s;
    }
  }
}

TEST(PipelineSchedule, PeakInFlightCountsForwardsNotYetBackwarded) {
  const std::vector<PipelineAction> actions = {{ActionKind::kForward, 0, 0},  {ActionKind::kForward, 1, 0},
                                               {ActionKind::kBackward, 0, 0}, {ActionKind::kForward, 2, 0},
                                               {ActionKind::kForward, 2, 1},  {ActionKind::kBackward, 1, 0}};
  EXPECT_EQ(trident::parallel::peak_in_flight(actions), 3);  // (1,0) (2,0) (2,1)
  EXPECT_EQ(trident::parallel::peak_in_flight({}), 0);
}

TEST(PipelineSchedule, OneFOneBRunsWarmupSteadyCooldown) {
  // p = 4, m = 8: stage 0 warms up with 3 forwards, stage 3 alternates from the start.
  const auto stage0 = compute_labels(make_pipeline_schedule(ScheduleKind::kOneFOneB, 4, 0, 8));
  EXPECT_EQ(stage0, (std::vector<std::string>{"F0", "F1", "F2", "F3", "B0", "F4", "B1", "F5", "B2", "F6", "B3", "F7",
                                              "B4", "B5", "B6", "B7"}));
  const auto stage3 = compute_labels(make_pipeline_schedule(ScheduleKind::kOneFOneB, 4, 3, 8));
  EXPECT_EQ(stage3, (std::vector<std::string>{"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4", "F5", "B5",
                                              "F6", "B6", "F7", "B7"}));
  // Fewer micro-batches than warm-up: all forwards, then all backwards.
  EXPECT_EQ(compute_labels(make_pipeline_schedule(ScheduleKind::kOneFOneB, 4, 0, 2)),
            (std::vector<std::string>{"F0", "F1", "B0", "B1"}));
}

TEST(PipelineSchedule, OneFOneBStageZeroSendsAndReceivesInPlace) {
  // p = 2, m = 3, stage 0: no forward input, no gradient to send; stage 1: starts from the loss.
  std::vector<std::string> stage0, stage1;
  for (const auto& a : make_pipeline_schedule(ScheduleKind::kOneFOneB, 2, 0, 3))
    stage0.push_back(trident::parallel::action_label(a));
  for (const auto& a : make_pipeline_schedule(ScheduleKind::kOneFOneB, 2, 1, 3))
    stage1.push_back(trident::parallel::action_label(a));
  EXPECT_EQ(stage0,
            (std::vector<std::string>{"F0", "SF0", "F1", "SF1", "RB0", "B0", "F2", "SF2", "RB1", "B1", "RB2", "B2"}));
  EXPECT_EQ(stage1,
            (std::vector<std::string>{"RF0", "F0", "B0", "RF1", "SB0", "F1", "B1", "RF2", "SB1", "F2", "B2", "SB2"}));
}

TEST(PipelineSchedule, InterleavedFollowsMegatronChunkGroups) {
  // p = 2, v = 2, m = 4: forwards take micro-batches in groups of p per chunk; backwards the same
  // groups with the chunks reversed. Stage 0 warms up (2-0-1)*2 + (2-1)*2 = 4, stage 1 warms up 2.
  EXPECT_EQ(compute_labels(make_pipeline_schedule(ScheduleKind::kInterleaved, 2, 0, 4, 2)),
            (std::vector<std::string>{"F0", "F1", "F0.1", "F1.1",                              // warm-up
                                      "F2", "B0.1", "F3", "B1.1", "F2.1", "B0", "F3.1", "B1",  // steady
                                      "B2.1", "B3.1", "B2", "B3"}));                           // cool-down
  EXPECT_EQ(compute_labels(make_pipeline_schedule(ScheduleKind::kInterleaved, 2, 1, 4, 2)),
            (std::vector<std::string>{"F0", "F1",  // warm-up
                                      "F0.1", "B0.1", "F1.1", "B1.1", "F2", "B0", "F3", "B1", "F2.1", "B2.1", "F3.1",
                                      "B3.1",  // steady
                                      "B2", "B3"}));
}

// The data-parallel buckets of an interleaved stage start chunk by chunk (src/train/trainer.cpp):
// that needs every chunk's last backward to come after the last backward of every later chunk,
// whose parameters lie above it in the arena.
TEST(PipelineSchedule, InterleavedChunksFinishTheirBackwardsLastChunkFirst) {
  for (const Case& c : grid()) {
    if (c.kind != ScheduleKind::kInterleaved) continue;
    const Lists lists = all_stages(c);
    for (int s = 0; s < c.stages; ++s) {
      std::vector<int> last(static_cast<std::size_t>(c.chunks), -1);
      for (std::size_t i = 0; i < lists[static_cast<std::size_t>(s)].size(); ++i) {
        const auto& a = lists[static_cast<std::size_t>(s)][i];
        if (a.kind == ActionKind::kBackward) last[static_cast<std::size_t>(a.chunk)] = static_cast<int>(i);
      }
      for (int k = 0; k + 1 < c.chunks; ++k) {
        EXPECT_GT(last[static_cast<std::size_t>(k)], last[static_cast<std::size_t>(k + 1)])
            << describe(c) << " stage " << s << ": chunk " << k << "'s last backward";
      }
    }
  }
}

TEST(PipelineSchedule, InterleavedChunkBoundaryWrapsFromLastRankToFirst) {
  using trident::parallel::pipeline_peer;
  // p = 4, v = 2: virtual stage 3 (rank 3, chunk 0) feeds virtual stage 4 (rank 0, chunk 1).
  const auto to = pipeline_peer(4, 3, {ActionKind::kSendForward, 5, 0});
  EXPECT_EQ(to.stage, 0);
  EXPECT_EQ(to.chunk, 1);
  const auto from = pipeline_peer(4, 0, {ActionKind::kRecvForward, 5, 1});
  EXPECT_EQ(from.stage, 3);
  EXPECT_EQ(from.chunk, 0);
  const auto grad = pipeline_peer(4, 0, {ActionKind::kSendBackward, 5, 1});
  EXPECT_EQ(grad.stage, 3);
  EXPECT_EQ(grad.chunk, 0);
  const auto next = pipeline_peer(4, 1, {ActionKind::kSendForward, 0, 1});
  EXPECT_EQ(next.stage, 2);
  EXPECT_EQ(next.chunk, 1);
  // Rank 0 chunk 1 really does receive from rank 3 in the generated lists.
  bool found = false;
  for (const auto& a : make_pipeline_schedule(ScheduleKind::kInterleaved, 4, 0, 4, 2))
    found = found || (a.kind == ActionKind::kRecvForward && a.chunk == 1);
  EXPECT_TRUE(found);
  EXPECT_THROW(pipeline_peer(4, 0, {ActionKind::kForward, 0, 0}), std::invalid_argument);
  EXPECT_THROW(pipeline_peer(4, 0, {ActionKind::kRecvForward, 0, 0}), std::invalid_argument);
}

TEST(PipelineSchedule, SingleStageHasNoCommunication) {
  for (const auto kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
    const int chunks = kind == ScheduleKind::kInterleaved ? 3 : 1;
    for (const auto& a : make_pipeline_schedule(kind, 1, 0, 4, chunks))
      EXPECT_TRUE(is_compute(a.kind)) << trident::parallel::schedule_name(kind) << " "
                                      << trident::parallel::action_label(a);
  }
}

TEST(PipelineSchedule, IdealBubbleFractionWorkedNumbers) {
  using trident::parallel::ideal_bubble_fraction;
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kGpipe, 4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kOneFOneB, 4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kInterleaved, 4, 8, 2), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kInterleaved, 4, 8, 1), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kOneFOneB, 8, 32), 7.0 / 39.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kGpipe, 1, 5), 0.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(ScheduleKind::kOneFOneB, 2, 1), 0.5);
  EXPECT_THROW(ideal_bubble_fraction(ScheduleKind::kGpipe, 0, 8), std::invalid_argument);
  EXPECT_THROW(ideal_bubble_fraction(ScheduleKind::kGpipe, 4, 8, 2), std::invalid_argument);
}

TEST(PipelineSchedule, MeasuredBubbleMatchesFormulaForGpipeAndOneFOneB) {
  // Time model of run_timed: forward 1 unit, backward 2 units per micro-batch and stage,
  // communication free and never blocking the sender. Every stage computes 3 m units, so the
  // idle share of a step is 1 - 3 m / makespan.
  for (const Case& c : grid()) {
    if (c.kind == ScheduleKind::kInterleaved) continue;
    const double makespan = run_timed(c, all_stages(c), 1.0, 2.0);
    EXPECT_DOUBLE_EQ(makespan, 3.0 * (c.micro_batches + c.stages - 1)) << describe(c);
    EXPECT_NEAR(1.0 - 3.0 * c.micro_batches / makespan,
                trident::parallel::ideal_bubble_fraction(c.kind, c.stages, c.micro_batches), 1e-12)
        << describe(c);
  }
}

TEST(PipelineSchedule, MeasuredInterleavedBubbleMatchesFormula) {
  // Same time model per chunk: forward 1 unit, backward 2 units per micro-batch and chunk, so a
  // stage computes 3 v m units and a chunk-sized fill/drain step costs 3. The sends that
  // interleaved defers by one compute never land on the critical path here.
  for (const Case& c : grid()) {
    if (c.kind != ScheduleKind::kInterleaved) continue;
    const double makespan = run_timed(c, all_stages(c), 1.0, 2.0);
    EXPECT_DOUBLE_EQ(makespan, 3.0 * (c.chunks * c.micro_batches + c.stages - 1)) << describe(c);
    EXPECT_NEAR(1.0 - 3.0 * c.chunks * c.micro_batches / makespan,
                trident::parallel::ideal_bubble_fraction(c.kind, c.stages, c.micro_batches, c.chunks), 1e-12)
        << describe(c);
  }
}

TEST(PipelineSchedule, NamesRoundTripAndUnknownNamesAreRefused) {
  using trident::parallel::parse_schedule_kind;
  using trident::parallel::schedule_name;
  for (const auto kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved})
    EXPECT_EQ(parse_schedule_kind(schedule_name(kind)), kind);
  EXPECT_STREQ(schedule_name(ScheduleKind::kOneFOneB), "1f1b");
  EXPECT_THROW(parse_schedule_kind("GPipe"), std::invalid_argument);
  EXPECT_THROW(parse_schedule_kind(""), std::invalid_argument);
  try {
    parse_schedule_kind("zero-bubble");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gpipe | 1f1b | interleaved"), std::string::npos) << e.what();
  }
}

TEST(PipelineSchedule, ImpossibleArgumentsAreRefused) {
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kGpipe, 0, 0, 4), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kGpipe, 4, 4, 4), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kGpipe, 4, -1, 4), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kOneFOneB, 4, 0, 0), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kInterleaved, 4, 0, 4, 0), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kOneFOneB, 4, 0, 4, 2), std::invalid_argument);
  EXPECT_THROW(make_pipeline_schedule(ScheduleKind::kGpipe, 4, 0, 4, 2), std::invalid_argument);
  try {
    make_pipeline_schedule(ScheduleKind::kInterleaved, 4, 0, 6, 2);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of the pipeline stages"), std::string::npos) << e.what();
  }
}
