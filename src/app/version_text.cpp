#include "src/app/version_text.h"

#include <sstream>

#include "kernels/cuda_devices.h"  // cuda_compiled, cuda_device_count
#include "mpi_support/mpi_process.h"  // library_version
#include "trident/build_info.h"

namespace trident::app {

std::string version_text() {
  std::ostringstream out;
  out << "trident " << build::kVersion << " (commit " << build::kGitCommit << ", "
      << build::kBuildType << ")\n";
  out << "  MPI:  " << mpi_support::library_version() << "\n";
  out << "  HDF5: " << build::kHdf5Version << " (parallel)\n";
  out << "  BLAS: " << build::kBlas << "\n";
  out << "  CUDA: ";
  if (kernels::cuda_compiled()) {
    out << "yes (" << kernels::cuda_device_count() << " device(s) visible)";
  } else {
    out << "no";
  }
  out << "\n";
  return out.str();
}

}  // namespace trident::app
