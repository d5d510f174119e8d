// Resident memory of this process, from /proc/self/status (Linux), for comparing what a run
// really uses with the estimate `trident check` prints. 0 where /proc is not available.
#pragma once

#include <cstddef>
#include <string>

namespace trident::app {

std::size_t resident_bytes();       // VmRSS: now
std::size_t peak_resident_bytes();  // VmHWM: the high-water mark since the process started

// A "Field:   1234 kB" line of a /proc file (/proc/self/status, /proc/meminfo) in KiB; 0 when
// the file or the field is absent.
std::size_t proc_field_kib(const char* path, const std::string& field);

}  // namespace trident::app
