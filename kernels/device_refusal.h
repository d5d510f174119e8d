// The error a backend throws when the deck's kernel choices do not fit the device it was given
// (a kernel the GPU or the build cannot run, a device that is not there): something the user
// changes in the deck or the job, so the caller reports it as an error of the run, exit 2, not as
// an internal error. Faults of the device or the library stay std::runtime_error.
#pragma once

#include <stdexcept>

namespace trident::kernels {

class DeviceRefusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace trident::kernels
