// ActPtr / ConstActPtr: a pointer to activations in their storage precision.
//
// Activations and their gradients are what kernels hand each other; under mixed precision they
// are stored in 16 bits (train.precision, docs/model.md "Mixed precision"). A Backend call takes
// them as ActPtr: the address and the storage precision together, so one signature serves fp32
// buffers and 16-bit ones, and views into the activation arena (ptr + n) count elements whatever
// their width. A float* converts implicitly (fp32 storage), so fp32 callers read as before.
// What stays fp32 under every precision (statistics, weight gradients, workspaces) keeps float*.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/precision.h"

namespace trident::kernels {

namespace detail {
// The element pointer `n` elements past `data` in `storage`.
template <class Byte>
Byte* advance_elements(Byte* data, std::size_t n, Precision storage) {
  return data == nullptr ? data : data + n * precision_bytes(storage);
}
[[noreturn]] inline void throw_not_fp32(Precision storage) {
  throw std::logic_error(std::string("ActPtr: an fp32 kernel was given ") + precision_name(storage) +
                         " activations (a 16-bit buffer reached a kernel without a 16-bit path)");
}
}  // namespace detail

class ActPtr {
 public:
  ActPtr() = default;
  ActPtr(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): "no buffer", as for float*
  ActPtr(float* data) : data_(data) {}  // NOLINT(google-explicit-constructor): fp32 storage
  // 16-bit storage: the bf16 or fp16 bit patterns of the values.
  ActPtr(uint16_t* data, Precision storage) : data_(data), storage_(data ? storage : Precision::kFp32) {}

  void* get() const { return data_; }
  Precision storage() const { return storage_; }
  bool is_fp32() const { return storage_ == Precision::kFp32; }
  explicit operator bool() const { return data_ != nullptr; }
  // The activation n elements further on.
  ActPtr operator+(std::size_t n) const {
    ActPtr p = *this;
    p.data_ = detail::advance_elements(static_cast<unsigned char*>(data_), n, storage_);
    return p;
  }
  // The fp32 buffer (null stays null); throws std::logic_error for 16-bit storage.
  float* f32() const {
    if (!is_fp32()) detail::throw_not_fp32(storage_);
    return static_cast<float*>(data_);
  }
  // The 16-bit patterns; throws std::logic_error for fp32 storage.
  uint16_t* bits16() const {
    if (is_fp32() && data_ != nullptr) throw std::logic_error("ActPtr: 16-bit access to an fp32 buffer");
    return static_cast<uint16_t*>(data_);
  }
  std::size_t bytes(std::size_t n) const { return n * precision_bytes(storage_); }

 private:
  void* data_ = nullptr;
  Precision storage_ = Precision::kFp32;
};

class ConstActPtr {
 public:
  ConstActPtr() = default;
  ConstActPtr(std::nullptr_t) {}           // NOLINT(google-explicit-constructor)
  ConstActPtr(const float* data) : data_(data) {}  // NOLINT(google-explicit-constructor)
  ConstActPtr(ActPtr p) : data_(p.get()), storage_(p.storage()) {}  // NOLINT(google-explicit-constructor)
  ConstActPtr(const uint16_t* data, Precision storage) : data_(data), storage_(data ? storage : Precision::kFp32) {}

  const void* get() const { return data_; }
  Precision storage() const { return storage_; }
  bool is_fp32() const { return storage_ == Precision::kFp32; }
  explicit operator bool() const { return data_ != nullptr; }
  ConstActPtr operator+(std::size_t n) const {
    ConstActPtr p = *this;
    p.data_ = detail::advance_elements(static_cast<const unsigned char*>(data_), n, storage_);
    return p;
  }
  const float* f32() const {
    if (!is_fp32()) detail::throw_not_fp32(storage_);
    return static_cast<const float*>(data_);
  }
  const uint16_t* bits16() const {
    if (is_fp32() && data_ != nullptr) throw std::logic_error("ConstActPtr: 16-bit access to an fp32 buffer");
    return static_cast<const uint16_t*>(data_);
  }
  std::size_t bytes(std::size_t n) const { return n * precision_bytes(storage_); }

 private:
  const void* data_ = nullptr;
  Precision storage_ = Precision::kFp32;
};

}  // namespace trident::kernels
