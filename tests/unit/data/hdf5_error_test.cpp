// HDF5's reasons in a user's words: a truncated file gets its sizes, a failed write the system's
// reason, anything else passes as is, on one line.
#include "io/hdf5_error.h"

#include <gtest/gtest.h>

#include <string>

#include "io/hdf5_handle.h"
#include "io/user_error.h"

namespace trident::io {
namespace {

TEST(Hdf5Error, TruncatedFileIsWordedWithItsSizes) {
  EXPECT_EQ(readable_hdf5_error("truncated file: eof = 20000, sblock->base_addr = 0, stored_eof = 1318768"),
            "truncated: 20000 of its 1318768 bytes are there (an interrupted copy or transfer?)");
}

// The POSIX driver's write failure (HDF5 1.10.8, a file past `ulimit -f`): the system's reason
// alone, where the whole description ran over two lines (ctime's newline).
TEST(Hdf5Error, AFailedWriteGivesTheSystemsReasonOnOneLine) {
  EXPECT_EQ(readable_hdf5_error("file write failed: time = Wed Nov 25 15:57:52 2026\n, filename = 'data/q.h5.tmp', "
                                "file descriptor = 18, errno = 27, error message = 'File too large', buf = 0x5648, "
                                "total write size = 1076648, bytes this sub-write = 1076648, bytes actually written = "
                                "18446744073709551615, offset = 0"),
            "file write failed: File too large");
  EXPECT_EQ(readable_hdf5_error("two\nlines"), "two lines");
}

TEST(Hdf5Error, OtherReasonsPassUnchanged) {
  EXPECT_EQ(readable_hdf5_error("unable to open file"), "unable to open file");
  EXPECT_EQ(readable_hdf5_error("truncated file: eof = oops"), "truncated file: eof = oops");
  EXPECT_EQ(readable_hdf5_error(""), "");
}

// A failed call names the file, the call and HDF5's innermost reason (here: no such dataset in
// an in-memory file), and a good identifier comes back owned.
TEST(Hdf5Error, FailedCallNamesTheFileTheCallAndTheReason) {
  const QuietHdf5Errors quiet;
  const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  ASSERT_GE(H5Pset_fapl_core(access, 1 << 16, false), 0);
  Handle file = checked_hdf5_handle(H5Fcreate("memory.h5", H5F_ACC_TRUNC, H5P_DEFAULT, access), H5Fclose,
                                    "H5Fcreate", "dataset 'memory.h5'");
  H5Pclose(access);
  ASSERT_GE(file.get(), 0);
  std::string error;
  try {
    checked_hdf5_handle(H5Dopen2(file.get(), "tokens", H5P_DEFAULT), H5Dclose, "H5Dopen2", "dataset 'memory.h5'");
  } catch (const UserError& e) {
    error = e.what();
  }
  EXPECT_EQ(error.rfind("dataset 'memory.h5': HDF5 call H5Dopen2 failed (", 0), 0u) << error;
  EXPECT_NE(error.find("tokens"), std::string::npos) << error;  // HDF5's reason names the object
  EXPECT_THROW(check_hdf5_status(-1, "H5Dread", "dataset 'memory.h5'"), UserError);
  EXPECT_NO_THROW(check_hdf5_status(0, "H5Dread", "dataset 'memory.h5'"));
}

}  // namespace
}  // namespace trident::io
