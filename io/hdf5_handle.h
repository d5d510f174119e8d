// RAII helpers for the HDF5 C API, shared by the files io/ reads and writes.
#pragma once

#include <hdf5.h>

namespace trident::io {

// Switches off HDF5's automatic error-stack printing for its lifetime, then restores it.
class QuietHdf5Errors {
 public:
  QuietHdf5Errors() {
    saved_ok_ = H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_) >= 0;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5Errors() {
    if (saved_ok_) H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_);
  }
  QuietHdf5Errors(const QuietHdf5Errors&) = delete;
  QuietHdf5Errors& operator=(const QuietHdf5Errors&) = delete;

 private:
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
  bool saved_ok_ = false;
};

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.id_;
      closer_ = other.closer_;
      other.id_ = -1;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);  // close errors: nothing left to do
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

}  // namespace trident::io
