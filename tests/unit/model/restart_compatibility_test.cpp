// Which deck changes a restart accepts (src/app/restart_compatibility.h).
#include <gtest/gtest.h>

#include "io/deck.h"
#include "io/user_error.h"
#include "src/app/restart_compatibility.h"

using namespace trident;

namespace {
io::ResolvedDeck deck(const std::vector<std::string>& overrides) { return io::parse_deck("", "test", overrides); }
}  // namespace

TEST(RestartCompatibility, StepsLayoutAndLoggingMayChange) {
  const auto saved = deck({"--train.steps=10"});
  EXPECT_NO_THROW(app::check_restart_compatible(
      saved, deck({"--train.steps=20", "--parallel.tp=2", "--parallel.zero=1", "--log.every=1", "--checkpoint.every=5",
                   "--model.vocab_multiple=64",
                   "--run.dir=elsewhere", "--train.micro_batch=4", "--data.path=moved.h5"}),
      "ck.h5"));
}

// Checkpoints hold fp32 master weights in every precision, so the precision (and the fp16
// scaler's settings) may change on restart; so may the GPU transport.
TEST(RestartCompatibility, PrecisionAndTransportMayChange) {
  const auto saved = deck({"--train.precision=fp32"});
  EXPECT_NO_THROW(app::check_restart_compatible(
      saved, deck({"--train.precision=fp16", "--train.loss_scale=1024", "--train.loss_scale_window=100",
                   "--parallel.comm=mpi"}),
      "ck.h5"));
}

// The kernels change the results only by rounding, as the device does: a run may resume with
// other ones (flash attention on a GPU that has it, another attention schedule).
TEST(RestartCompatibility, KernelChoicesMayChange) {
  const auto saved = deck({});
  EXPECT_NO_THROW(app::check_restart_compatible(
      saved, deck({"--run.attention=flash", "--run.matmul_epilogues=separate", "--run.attention_blocks=4",
                   "--run.attention_batching=pointers", "--run.flash_dq=key_walk", "--run.layernorm_sums=row_walk",
                   "--run.flash_block_order=longest_first", "--run.flash_forward=wgmma",
                   "--run.flash_backward=wgmma_overlapped", "--run.flash_warpgroups=2",
                   "--run.cross_entropy_loads=packs", "--run.adamw_loads=packs",
                   "--run.matmul_backward_streams=two", "--run.matmul_bias_gradients=epilogue",
                   "--run.matmul_algorithms=timed", "--run.device=auto"}),
      "ck.h5"));
}

// The remedies of a diverged run (exit 3 advises a lower rate or a longer warm-up): the schedule
// and the clipping threshold may change, and the change is named for the run's output.
TEST(RestartCompatibility, TheLearningRateScheduleMayChangeAndIsNamed) {
  const auto saved = deck({});
  const auto resumed = deck({"--optim.lr=3e-4", "--optim.min_lr=3e-5", "--optim.warmup_steps=100",
                             "--optim.decay_steps=5000", "--optim.grad_clip=0.5"});
  EXPECT_NO_THROW(app::check_restart_compatible(saved, resumed, "ck.h5"));
  EXPECT_EQ(app::changed_training_keys(saved, resumed),
            "optim.lr = 3e-4 (6e-4 in the checkpoint), optim.min_lr = 3e-5 (6e-5 in the checkpoint), "
            "optim.warmup_steps = 100 (0 in the checkpoint), optim.decay_steps = 5000 (0 in the checkpoint), "
            "optim.grad_clip = 0.5 (1 in the checkpoint)");
  EXPECT_EQ(app::changed_training_keys(saved, deck({"--train.steps=20", "--parallel.tp=2"})), "");
  EXPECT_EQ(app::changed_training_keys(saved, deck({"--data.path=moved.h5"})),
            "data.path = moved.h5 (data/tokens.h5 in the checkpoint)");
}

TEST(RestartCompatibility, AModelOrOptimizerChangeNamesTheKeyAndBothValues) {
  const auto saved = deck({});
  try {
    app::check_restart_compatible(saved, deck({"--optim.weight_decay=0.01"}), "ck.h5");
    FAIL() << "a changed weight decay was accepted";
  } catch (const io::UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("optim.weight_decay = 0.01"), std::string::npos) << message;
    EXPECT_NE(message.find("differs from 0.1"), std::string::npos) << message;
    EXPECT_NE(message.find("ck.h5"), std::string::npos) << message;
  }
  EXPECT_THROW(app::check_restart_compatible(saved, deck({"--model.layers=6"}), "ck.h5"), io::UserError);
  EXPECT_THROW(app::check_restart_compatible(saved, deck({"--optim.beta2=0.99"}), "ck.h5"), io::UserError);
  EXPECT_THROW(app::check_restart_compatible(saved, deck({"--run.seed=1"}), "ck.h5"), io::UserError);
  EXPECT_THROW(app::check_restart_compatible(saved, deck({"--train.global_batch=16"}), "ck.h5"), io::UserError);
}
