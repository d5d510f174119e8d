// HDF5's reasons in a user's words: a truncated file gets its sizes, anything else passes as is.
#include "io/hdf5_error.h"

#include <gtest/gtest.h>

namespace trident::io {
namespace {

TEST(Hdf5Error, TruncatedFileIsWordedWithItsSizes) {
  EXPECT_EQ(readable_hdf5_error("truncated file: eof = 20000, sblock->base_addr = 0, stored_eof = 1318768"),
            "truncated: 20000 of its 1318768 bytes are there (an interrupted copy or transfer?)");
}

TEST(Hdf5Error, OtherReasonsPassUnchanged) {
  EXPECT_EQ(readable_hdf5_error("unable to open file"), "unable to open file");
  EXPECT_EQ(readable_hdf5_error("truncated file: eof = oops"), "truncated file: eof = oops");
  EXPECT_EQ(readable_hdf5_error(""), "");
}

}  // namespace
}  // namespace trident::io
