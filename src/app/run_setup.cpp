#include "src/app/run_setup.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/user_error.h"
#include "parallel/comm.h"
#include "src/model/stage_layout.h"
#include "src/train/run_layout.h"

namespace trident::app {

using io::UserError;

std::string read_deck_collectively(parallel::Comm& comm, const std::string& path) {
  std::string text, error;
  if (comm.rank() == 0) {
    try {
      text = io::read_deck_file(path);
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  error = parallel::broadcast_string(comm, error, 0);
  if (!error.empty()) throw UserError(error);
  return parallel::broadcast_string(comm, text, 0);
}

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// "1, 2, 3 or 6": the divisors of n up to `limit`, for a message suggesting valid values.
std::string divisors_text(int64_t n, int64_t limit) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= std::min(n, limit); ++k) {
    if (n % k == 0) d.push_back(k);
  }
  std::string text;
  for (std::size_t i = 0; i < d.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == d.size() ? " or " : ", ") + str(d[i]);
  }
  return text;
}

// Every problem of the layout that does not follow from an earlier one, in one line: fixing the
// first of several should not lead straight into the next.
void check_layout(io::RunConfig& c, int world_size) {
  auto& p = c.parallel;
  std::vector<std::string> problems;
  const auto refuse = [&problems] {
    if (problems.empty()) return;
    std::string line = problems.front();
    for (std::size_t i = 1; i < problems.size(); ++i) line += "; also, " + problems[i];
    throw UserError(line);
  };
  // What the model can take comes first: it does not depend on how the job was launched.
  if (c.model.heads % p.tp != 0) {
    problems.push_back("model.heads = " + str(c.model.heads) + " is not divisible by parallel.tp = " + str(p.tp) +
                       "; each tensor rank needs whole heads: use parallel.tp = " + divisors_text(c.model.heads, c.model.heads));
  }
  if (p.sequence_parallel && p.tp > 1 && (c.train.micro_batch * c.train.seq_len) % p.tp != 0) {
    problems.push_back("parallel.sequence_parallel = true splits the train.micro_batch * train.seq_len = " +
                       str(c.train.micro_batch) + " * " + str(c.train.seq_len) + " = " +
                       str(c.train.micro_batch * c.train.seq_len) + " token rows of a micro-batch over parallel.tp = " +
                       str(p.tp) + " tensor ranks, but they are not divisible by it; choose train.micro_batch or "
                       "train.seq_len so that their product is a multiple of parallel.tp");
  }
  if (c.model.layers < p.pp) {
    problems.push_back("model.layers = " + str(c.model.layers) + " is fewer than parallel.pp = " + str(p.pp) +
                       " pipeline stages; every stage needs at least one layer: use parallel.pp <= " +
                       str(c.model.layers));
  }
  // The interleaved schedule splits the layers over virtual_stages * pp virtual stages
  // (parallel.virtual_stages is ignored by the other schedules and with one stage).
  const bool interleaved = p.pp > 1 && p.schedule == "interleaved";
  if (interleaved && c.model.layers >= p.pp && p.virtual_stages == 1) {
    // One chunk a rank is 1f1b under another name, and would still carry interleaved's rule on
    // the micro-batches.
    problems.push_back("parallel.schedule = interleaved with parallel.virtual_stages = 1 is the 1f1b schedule: give "
                       "each rank parallel.virtual_stages >= 2 model chunks, or use parallel.schedule = 1f1b");
  } else if (interleaved && c.model.layers >= p.pp && c.model.layers < p.virtual_stages * p.pp) {
    const int most = c.model.layers / p.pp;  // chunks a rank can have, a layer each
    problems.push_back("model.layers = " + str(c.model.layers) + " is fewer than parallel.virtual_stages * parallel.pp = " +
                       str(p.virtual_stages) + " * " + str(p.pp) + " = " + str(p.virtual_stages * p.pp) +
                       " virtual stages of parallel.schedule = interleaved; every virtual stage needs at least one "
                       "layer" + (most >= 2 ? ": use parallel.virtual_stages <= " + str(most) + ", or "
                                            : ", and " + str(c.model.layers) + " layers cannot give each of the " +
                                                  str(p.pp) + " ranks two chunks: use ") +
                       "parallel.schedule = 1f1b");
  }
  const int64_t model_ranks = static_cast<int64_t>(p.tp) * p.pp;  // and dp * model_ranks: in 64 bits
  const bool dp_derived = p.dp == 0;
  if (p.dp == 0) {
    if (world_size % model_ranks != 0) {
      problems.push_back("parallel.tp * parallel.pp = " + str(model_ranks) + " does not divide the " +
                         str(world_size) + " ranks of this job; launch a multiple of " + str(model_ranks) + " ranks");
    }
    p.dp = static_cast<int>(world_size / model_ranks);
  } else if (p.dp * model_ranks != world_size) {
    problems.push_back("parallel.dp * parallel.tp * parallel.pp = " + str(p.dp) + " * " + str(p.tp) + " * " +
                       str(p.pp) + " = " + str(p.dp * model_ranks) + " but the job has " + str(world_size) +
                       " rank(s); launch " + str(p.dp * model_ranks) + (p.dp * model_ranks == 1 ? " rank" : " ranks") +
                       " or set parallel.dp = 0 (automatic)");
  }
  // The batch follows from the data-parallel size: without a valid one there is nothing to check.
  if (p.dp < 1 || p.dp * model_ranks != world_size) {
    refuse();
    throw std::logic_error("check_layout: a rank count refused without a reason");
  }
  const int64_t per_step = c.train.micro_batch * p.dp;
  if (c.train.global_batch % per_step != 0) {
    const int64_t micro = c.train.global_batch / c.train.micro_batch;
    const std::string batches = "use train.global_batch = " +
                                (c.train.global_batch / per_step > 0
                                     ? str(c.train.global_batch / per_step * per_step) + " or "
                                     : std::string()) +
                                str((c.train.global_batch / per_step + 1) * per_step);
    std::string other_dp = ", or a parallel.dp that divides the micro-batches train.global_batch / train.micro_batch = " +
                           str(micro);
    if (dp_derived && c.train.global_batch % c.train.micro_batch == 0) {
      // The user set no parallel.dp: the number of ranks launched is what to change.
      std::vector<int64_t> ranks;
      for (int64_t d = 1; d <= micro && ranks.size() < 6; ++d) {
        if (micro % d == 0) ranks.push_back(d * model_ranks);
      }
      std::string launch;
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        launch += (i == 0 ? "" : i + 1 == ranks.size() ? " or " : ", ") + str(ranks[i]);
      }
      other_dp = ", or launch " + launch + (ranks.size() == 1 && ranks[0] == 1 ? " rank" : " ranks") + ", so that parallel.dp divides the micro-batches "
                 "train.global_batch / train.micro_batch = " + str(micro);
    }
    problems.push_back("train.global_batch = " + str(c.train.global_batch) +
                       " is not divisible by train.micro_batch * parallel.dp = " + str(c.train.micro_batch) + " * " +
                       str(p.dp) + " = " + str(per_step) +
                       (dp_derived ? " (parallel.dp = " + str(p.dp) + " follows from the " + str(world_size) +
                                         " ranks of this job; "
                                   : std::string(" (")) +
                       batches + other_dp + ")");
  }
  const int64_t micro_batches = c.train.global_batch / per_step;
  // The pipeline schedule lists every micro-batch's actions: a bound keeps a typo (a global
  // batch of 2^31) from costing gigabytes before anything is checked.
  constexpr int64_t kMaxMicroBatches = 65536;
  if (micro_batches > kMaxMicroBatches) {
    problems.push_back("train.global_batch / (train.micro_batch * parallel.dp) = " + str(c.train.global_batch) +
                       " / (" + str(c.train.micro_batch) + " * " + str(p.dp) + ") = " + str(micro_batches) +
                       " micro-batches a step on each data rank, more than " + str(kMaxMicroBatches) +
                       ": raise train.micro_batch or lower train.global_batch");
  }
  if (interleaved && micro_batches % p.pp != 0) {
    problems.push_back("parallel.schedule = interleaved needs the micro-batches per step, train.global_batch / "
                       "(train.micro_batch * parallel.dp) = " + str(c.train.global_batch) + " / (" +
                       str(c.train.micro_batch) + " * " + str(p.dp) + ") = " + str(micro_batches) +
                       ", to be a multiple of parallel.pp = " + str(p.pp) +
                       "; change train.global_batch or use parallel.schedule = 1f1b");
  }
  refuse();
}

// parallel.stage_layers: "even", or one positive count per stage (per virtual stage with the
// interleaved schedule) summing to model.layers.
std::vector<int> parse_stage_layers(const io::RunConfig& c) {
  const auto& p = c.parallel;
  const int stages = p.pp * train::chunks_per_rank(c);
  if (p.stage_layers == "even") return model::even_stage_split(c.model.layers, stages);
  std::vector<int> counts;
  std::size_t start = 0;
  while (start <= p.stage_layers.size()) {
    const std::size_t comma = std::min(p.stage_layers.find(',', start), p.stage_layers.size());
    const std::string item = p.stage_layers.substr(start, comma - start);
    std::size_t used = 0;
    int count = 0;
    try {
      count = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || count < 1) {
      throw UserError("parallel.stage_layers = '" + p.stage_layers + "': '" + item +
                      "' is not a positive layer count (write even, or counts like 5,7)");
    }
    counts.push_back(count);
    start = comma + 1;
  }
  int sum = 0;
  for (int n : counts) sum += n;
  if (static_cast<int>(counts.size()) != stages || sum != c.model.layers) {
    const std::string want = stages == p.pp ? "parallel.pp = " + str(p.pp)
                                            : "parallel.virtual_stages * parallel.pp = " + str(stages);
    throw UserError("parallel.stage_layers = '" + p.stage_layers + "' gives " + str(static_cast<int64_t>(counts.size())) +
                    " stage(s) with " + str(sum) + " layers, but " + want + " and model.layers = " +
                    str(c.model.layers) + "; give one count per " + (stages == p.pp ? "stage" : "virtual stage") +
                    ", summing to the layers");
  }
  return counts;
}

}  // namespace

RunSetup make_run_setup(const std::string& deck_text, const std::string& deck_name,
                        const std::vector<std::string>& overrides, int world_size) {
  RunSetup setup{io::parse_deck(deck_text, deck_name, overrides), {}, {}, {}};
  setup.config = io::to_run_config(setup.deck);
  check_layout(setup.config, world_size);
  setup.deck.set("parallel.dp", std::to_string(setup.config.parallel.dp));
  setup.stage_layers = parse_stage_layers(setup.config);
  setup.model = gpt_config(setup.config);
  return setup;
}

model::GptConfig gpt_config(const io::RunConfig& config) {
  const auto& m = config.model;
  model::GptConfig gpt;
  gpt.layers = m.layers;
  gpt.heads = m.heads;
  gpt.hidden = m.hidden;
  gpt.context = m.context;
  gpt.vocab = m.vocab;
  // Every tensor rank holds an equal share of the rows, whatever the vocabulary size.
  gpt.padded_vocab = model::pad_vocab(m.vocab, m.vocab_multiple * config.parallel.tp);
  return gpt;
}

void check_dataset_fits(const RunSetup& setup, int64_t dataset_vocab, int64_t train_samples,
                        int64_t validation_samples, const std::string& path) {
  const auto& c = setup.config;
  if (dataset_vocab > c.model.vocab) {
    throw UserError("dataset '" + path + "': its vocabulary of " + str(dataset_vocab) +
                    " tokens is larger than model.vocab = " + str(c.model.vocab) + "; set model.vocab >= " +
                    str(dataset_vocab));
  }
  if (train_samples < 1) {
    throw UserError("dataset '" + path + "': the training split holds no sample of train.seq_len = " +
                    str(c.train.seq_len) + " tokens");
  }
  if (c.train.eval_batches > 0 && validation_samples < 1) {
    throw UserError("dataset '" + path + "': the validation split holds no sample of train.seq_len = " +
                    str(c.train.seq_len) + " tokens; set train.eval_batches = 0 or use a larger split");
  }
}

}  // namespace trident::app
