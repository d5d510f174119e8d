#include "io/tensor_checksum.h"

#include <cstddef>
#include <cstring>

namespace trident::io {

uint64_t box_checksum(const std::vector<int64_t>& global_shape, const Box& box, const float* values) {
  const std::size_t rank = global_shape.size();
  if (rank == 0) {
    uint32_t bits = 0;
    std::memcpy(&bits, values, sizeof bits);
    return element_hash(0, bits);
  }
  const int64_t run = box.count[rank - 1];  // contiguous in both the box and the tensor
  if (box.volume() == 0) return 0;
  std::vector<int64_t> index(rank, 0);      // position within the box, outer dimensions
  uint64_t sum = 0;
  for (int64_t done = 0; done < box.volume(); done += run) {
    int64_t linear = 0;
    for (std::size_t d = 0; d < rank; ++d) linear = linear * global_shape[d] + box.start[d] + index[d];
    for (int64_t k = 0; k < run; ++k) {
      uint32_t bits = 0;
      std::memcpy(&bits, values + done + k, sizeof bits);
      sum += element_hash(static_cast<uint64_t>(linear + k), bits);
    }
    for (std::size_t d = rank - 1; d-- > 0;) {  // odometer over all but the last dimension
      if (++index[d] < box.count[d]) break;
      index[d] = 0;
    }
  }
  return sum;
}

}  // namespace trident::io
