// ZeRO-1 sharding of a flat arena over the data-parallel group.
//
// The arena of n elements is padded to a multiple of dp; data rank r owns the block
// [r*S, (r+1)*S) with S = padded / dp. The gradient buckets, cut at the blocks, are each summed
// to their block's rank (parallel/grad_buckets.h), the rank updates the parameters of its block
// with the optimizer state of its block only (1/dp of the state), and an all-gather gives every
// rank the whole updated parameters. Blocks are equal so the all-gather is the plain (non-v)
// one, as NCCL wants.
#pragma once

#include <cstddef>

namespace trident::parallel {

struct ArenaShard {
  std::size_t begin = 0;        // this rank's block [begin, end) of the padded arena
  std::size_t end = 0;
  std::size_t block = 0;        // S: elements per rank
  std::size_t padded_size = 0;  // S * dp >= n
  std::size_t size() const { return end - begin; }
};

// Requires dp >= 1 and 0 <= rank < dp. dp = 1 gives the whole arena.
ArenaShard shard_arena(std::size_t n, int dp, int rank);

}  // namespace trident::parallel
