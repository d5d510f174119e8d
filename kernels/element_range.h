// A range of elements of a buffer, for calls over several pieces of one buffer at once.
#pragma once

#include <cstddef>

namespace trident::kernels {

// [offset, offset + count) of some buffer.
struct ElementRange {
  std::size_t offset = 0;
  std::size_t count = 0;
};

}  // namespace trident::kernels
