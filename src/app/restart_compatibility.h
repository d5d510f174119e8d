// Which deck keys may differ between a checkpoint and the run that resumes it. A restart may
// change how and how long the run goes (steps, layout, precision, kernels, logging, checkpoint
// cadence, threads, where the data and the outputs are); anything else would silently train
// another model or another stream, so it is an error naming the key and both values.
#pragma once

#include <string>

#include "io/deck.h"

namespace trident::app {

// True for keys a restart may change.
bool restart_may_change(const std::string& key);

// The learning-rate schedule, clipping and data.path keys that differ, as "optim.lr = 3e-4
// (6e-4 in the checkpoint), ...", or "" when none does: the resumed run may train other steps
// than the checkpointed one would have, which its output says.
std::string changed_training_keys(const io::ResolvedDeck& checkpoint_deck, const io::ResolvedDeck& run_deck);

// Throws io::UserError naming the first key (in schema order) that differs between the
// checkpoint's resolved deck and this run's, with both values, when it may not change.
void check_restart_compatible(const io::ResolvedDeck& checkpoint_deck, const io::ResolvedDeck& run_deck,
                              const std::string& checkpoint_path);

}  // namespace trident::app
