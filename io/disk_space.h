// Room on the disk for a file about to be written, checked before the writing starts.
//
// HDF5 reports a full disk late or not at all: a token file's chunks written into a full tmpfs
// came back as zeros with exit 0 (the failure surfaced only as "infinite loop closing library"
// at exit), and a parameter file whose superblock could not be flushed left HDF5 a half-closed
// file that crashed MPI_Finalize. So the writers ask first.
#pragma once

#include <cstdint>
#include <string>

namespace trident::io {

// UserError "LABEL: needs X MB, past this process's file size limit of Y MB (ulimit -f); ..." when
// `bytes` exceed RLIMIT_FSIZE: a write past it kills the process with SIGXFSZ, and under MPI-IO
// a write failing on one rank leaves the others waiting. Nothing without a limit.
void check_file_size_limit(const std::string& label, int64_t bytes);

// UserError "LABEL: not enough space on its disk (needs X MB, Y MB free; No space left on
// device)" when the file system holding `file` (which need not exist yet) has fewer than `bytes`
// available, or the limit above; nothing when it has them or cannot say.
void check_free_space(const std::string& file, const std::string& label, int64_t bytes);

// Allocates `bytes` for `file` (which exists) with fallocate, keeping its size, so that the
// writes that follow cannot run out of room; UserError as above when they would. A file system
// without fallocate falls back to check_free_space.
void reserve_disk_space(const std::string& file, const std::string& label, int64_t bytes);

}  // namespace trident::io
