// The text of `trident --version`: what a bug report needs to name this build.
#pragma once

#include <string>

namespace trident::app {

// Version, git commit, build type, MPI library, HDF5, BLAS, CUDA (compiled / devices seen).
// Safe to call before or after MPI_Init.
std::string version_text();

}  // namespace trident::app
