// Resident memory of this process, from /proc/self/status (Linux), for comparing what a run
// really uses with the estimate `trident check` prints. 0 where /proc is not available.
#pragma once

#include <cstddef>

namespace trident::app {

std::size_t resident_bytes();       // VmRSS: now
std::size_t peak_resident_bytes();  // VmHWM: the high-water mark since the process started

}  // namespace trident::app
