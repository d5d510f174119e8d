#include "parallel/tensor_parallel.h"

#include <algorithm>

namespace trident::parallel {

VocabShard vocab_shard(int padded_vocab, int vocab, int tp, int tp_rank) {
  const int rows = padded_vocab / tp;
  VocabShard shard;
  shard.begin = tp_rank * rows;
  shard.end = shard.begin + rows;
  shard.real = std::clamp(vocab - shard.begin, 0, rows);
  return shard;
}

}  // namespace trident::parallel
