// The largest share of a token file held out for validation, one value for `trident prepare
// --val-fraction` (the files half of io) and the deck's data.val_fraction (the deck half), which
// do not otherwise depend on each other: beyond half, the "validation" split is the training data.
#pragma once

namespace trident::io {

inline constexpr double kMaxValFraction = 0.5;

}  // namespace trident::io
