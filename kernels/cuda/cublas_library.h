// cuBLAS and cuBLASLt are opened (dlopen) the first time the CUDA backend needs them, not when
// trident starts: a CUDA build runs CPU decks on nodes without cuBLAS, and its CPU ranks skip the
// ~0.06 s of CPU that the loader spends relocating the 540 MB libcublasLt in every process
// (cublas_library.cpp says how). The rest of kernels/cuda calls cuBLAS as usual.
#pragma once

#include <string>

namespace trident::kernels::cuda {

// "" once cuBLAS and cuBLASLt are loaded with every function Trident calls (loading them on the
// first call; later calls answer the same), else one line: which library or function is
// missing and what to do. In the CUDA emulation (tests), always "": its cuBLAS is linked in.
const std::string& cublas_problem();

// A shared library opened by its soname (the loader's search: LD_LIBRARY_PATH, the executable's
// run path, ld.so.cache) and, failing that, from `fallback_dir` (the toolkit this build was
// configured with). handle is null when neither opens, and problem then says so in one line.
struct OpenedLibrary {
  void* handle = nullptr;
  std::string problem;
};
OpenedLibrary open_library(const std::string& soname, const std::string& fallback_dir);

}  // namespace trident::kernels::cuda
