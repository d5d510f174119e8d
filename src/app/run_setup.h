// RunSetup: from command-line arguments to a validated configuration, the same on every rank.
//
// Rank 0 reads the deck file and broadcasts its text (or its read error), then every rank
// parses and validates it identically: a bad deck throws the same UserError on every rank.
#pragma once

#include <string>
#include <vector>

#include "io/deck.h"
#include "io/run_config.h"
#include "parallel/comm.h"
#include "src/model/gpt_config.h"

namespace trident::app {

struct RunSetup {
  io::ResolvedDeck deck;     // resolved (parallel.dp written out) and saved as config.ini
  io::RunConfig config;
  model::GptConfig model;
  std::vector<int> stage_layers;  // layers per pipeline stage (parallel.stage_layers resolved)
};

// Reads the deck on comm's rank 0 and shares its text; UserError on every rank when unreadable.
std::string read_deck_collectively(parallel::Comm& comm, const std::string& path);

// Parses, validates against a job of `world_size` ranks, resolves parallel.dp.
// Throws UserError naming the keys for any inconsistency (world size != dp*tp*pp, global batch
// not divisible by micro_batch*dp, heads not divisible by tp, layouts not available yet, ...).
RunSetup make_run_setup(const std::string& deck_text, const std::string& deck_name,
                        const std::vector<std::string>& overrides, int world_size);

// The model a configuration trains: model.* as a GptConfig, the vocabulary padded to a
// multiple of model.vocab_multiple * parallel.tp (every tensor rank holds an equal share of
// the rows). Used by make_run_setup and by tools that rebuild a model from a saved deck.
model::GptConfig gpt_config(const io::RunConfig& config);

// Dataset checks that need the file's attributes: vocabulary no larger than the model's,
// enough training samples for one global batch, validation samples when evaluating.
void check_dataset_fits(const RunSetup& setup, int64_t dataset_vocab, int64_t train_samples,
                        int64_t validation_samples, const std::string& path);

}  // namespace trident::app
