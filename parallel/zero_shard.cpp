#include "parallel/zero_shard.h"

namespace trident::parallel {

ArenaShard shard_arena(std::size_t n, int dp, int rank) {
  const auto ranks = static_cast<std::size_t>(dp);
  // Blocks are rounded to 16 elements (64 bytes) so every rank's block starts cache-aligned.
  constexpr std::size_t kAlign = 16;
  std::size_t block = (n + ranks - 1) / ranks;
  block = (block + kAlign - 1) / kAlign * kAlign;
  ArenaShard shard;
  shard.block = block;
  shard.padded_size = block * ranks;
  shard.begin = block * static_cast<std::size_t>(rank);
  shard.end = shard.begin + block;
  return shard;
}

}  // namespace trident::parallel
