// HDF5's reason for its last failure, in words a user can act on. The files io/ reads and writes
// report it after their own line ("checkpoint 'X': cannot open (REASON)").
#pragma once

#include <hdf5.h>

#include <string>

#include "io/hdf5_handle.h"

namespace trident::io {

// The innermost description on HDF5's error stack of this thread, or "" when it holds none. A
// truncated file, which HDF5 words as "truncated file: eof = 20000, sblock->base_addr = 0,
// stored_eof = 1318768", becomes "truncated: 20000 of its 1318768 bytes are there (an
// interrupted copy or transfer?)".
std::string hdf5_error_detail();

// hdf5_error_detail's translation of one description (exposed for its test).
std::string readable_hdf5_error(const std::string& description);

// "LABEL: HDF5 call CALL failed (REASON)", REASON being hdf5_error_detail() when there is one.
std::string hdf5_call_failure(const std::string& label, const char* call);

// The checks every HDF5 call of io/ goes through: a negative status or identifier throws
// UserError with hdf5_call_failure's line. `label` names the file ("dataset 'x.h5'").
void check_hdf5_status(herr_t status, const char* call, const std::string& label);
Handle checked_hdf5_handle(hid_t id, Handle::Closer closer, const char* call, const std::string& label);

}  // namespace trident::io
