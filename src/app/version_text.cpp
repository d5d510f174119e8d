#include "src/app/version_text.h"

#include <mpi.h>

#include <sstream>

#include "kernels/backend.h"
#include "trident/build_info.h"

namespace trident::app {

std::string version_text() {
  std::ostringstream out;
  out << "trident " << build::kVersion << " (commit " << build::kGitCommit << ", "
      << build::kBuildType << ")\n";
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, static_cast<size_t>(length));
  if (auto cut = mpi.find_first_of(",\n"); cut != std::string::npos) mpi.resize(cut);
  out << "  MPI:  " << mpi << "\n";
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
