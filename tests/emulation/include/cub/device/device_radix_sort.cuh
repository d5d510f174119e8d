// cub::DeviceRadixSort::SortPairs for the CPU emulation (tests/emulation/cuda_emulation.h): a
// stable sort on the key bits [begin_bit, end_bit), signed keys in numeric order, as CUB's
// radix sort. It asks for temporary storage as CUB does (a first call with a null pointer),
// checks that it was given that much, in device memory, and queues the sort on its stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "tests/emulation/emulated_state.h"

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value, class Count>
  static cudaError_t SortPairs(void* temp, std::size_t& temp_bytes, const Key* keys_in, Key* keys_out,
                               const Value* values_in, Value* values_out, Count items, int begin_bit = 0,
                               int end_bit = static_cast<int>(sizeof(Key) * 8), cudaStream_t stream = nullptr) {
    static_assert(std::is_integral_v<Key>, "the emulation sorts integer keys");
    const auto n = static_cast<std::size_t>(items);
    const std::size_t needed = n * (sizeof(Key) + sizeof(Value)) + 1;
    if (temp == nullptr) {
      temp_bytes = needed;
      return cudaSuccess;
    }
    ::cuda_emu::check_stream(stream);
    if (temp_bytes < needed) return cudaErrorInvalidValue;
    ::cuda_emu::require_device_range(temp, needed, "cub::DeviceRadixSort temporary storage");
    ::cuda_emu::require_device_range(keys_in, n * sizeof(Key), "cub::DeviceRadixSort keys in");
    ::cuda_emu::require_device_range(keys_out, n * sizeof(Key), "cub::DeviceRadixSort keys out");
    ::cuda_emu::require_device_range(values_in, n * sizeof(Value), "cub::DeviceRadixSort values in");
    ::cuda_emu::require_device_range(values_out, n * sizeof(Value), "cub::DeviceRadixSort values out");
    // Queued on the stream: the keys are read when it runs, after the work that writes them.
    ::cuda_emu::enqueue(stream, [=] {
      using Bits = std::make_unsigned_t<Key>;
      const auto sort_bits = [&](Key key) {
        auto bits = static_cast<Bits>(key);
        if constexpr (std::is_signed_v<Key>) bits ^= Bits{1} << (sizeof(Key) * 8 - 1);  // negatives first
        const int width = end_bit - begin_bit;
        const Bits mask =
            width >= static_cast<int>(sizeof(Key) * 8) ? ~Bits{0} : static_cast<Bits>((Bits{1} << width) - 1);
        return static_cast<Bits>((bits >> begin_bit) & mask);
      };
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return sort_bits(keys_in[a]) < sort_bits(keys_in[b]); });
      std::vector<Key> keys(n);
      std::vector<Value> values(n);
      for (std::size_t i = 0; i < n; ++i) {
        keys[i] = keys_in[order[i]];
        values[i] = values_in[order[i]];
      }
      std::copy(keys.begin(), keys.end(), keys_out);
      std::copy(values.begin(), values.end(), values_out);
    });
    return cudaSuccess;
  }
};

}  // namespace cub
