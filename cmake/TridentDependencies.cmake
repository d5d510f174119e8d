# Finds every dependency of the design card and fails with one line naming what is missing
# and how to get it (scripts/install-deps.sh installs all of them on Debian/Ubuntu).

function(trident_require found what)
  if(NOT ${found})
    message(FATAL_ERROR "Trident: missing dependency: ${what} (run scripts/install-deps.sh as root)")
  endif()
endfunction()

# --- MPI -------------------------------------------------------------------------------------
find_package(MPI QUIET COMPONENTS C CXX)
trident_require(MPI_FOUND "MPI (Debian: openmpi-bin libopenmpi-dev)")

# --- parallel HDF5 -----------------------------------------------------------------------------
# Datasets and checkpoints are read and written collectively, so a serial HDF5 is refused.
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 QUIET COMPONENTS C)
trident_require(HDF5_FOUND "parallel HDF5 (Debian: libhdf5-openmpi-dev)")
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "Trident: HDF5 at '${HDF5_INCLUDE_DIRS}' is serial; Trident needs parallel HDF5 "
                      "(Debian: libhdf5-openmpi-dev, or set HDF5_ROOT to a parallel build)")
endif()
add_library(trident_hdf5 INTERFACE)
target_include_directories(trident_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(trident_hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_C)
target_compile_definitions(trident_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})

# --- Boost.Program_options -------------------------------------------------------------------
find_package(Boost 1.71 QUIET COMPONENTS program_options)
trident_require(Boost_FOUND "Boost.Program_options (Debian: libboost-program-options-dev)")

# --- OpenMP and CBLAS (OpenBLAS) -------------------------------------------------------------
find_package(OpenMP QUIET COMPONENTS CXX)
trident_require(OpenMP_CXX_FOUND "OpenMP for C++ (Debian: build-essential)")
# The OpenMP flavour first: its threads obey omp_set_num_threads like ours do.
find_path(TRIDENT_CBLAS_INCLUDE_DIR cblas.h
          PATH_SUFFIXES openblas-openmp openblas-pthread openblas x86_64-linux-gnu/openblas-openmp)
find_library(TRIDENT_OPENBLAS_LIBRARY NAMES openblas
             PATH_SUFFIXES openblas-openmp openblas-pthread x86_64-linux-gnu/openblas-openmp)
if(NOT TRIDENT_CBLAS_INCLUDE_DIR OR NOT TRIDENT_OPENBLAS_LIBRARY)
  set(_blas_found FALSE)
else()
  set(_blas_found TRUE)
endif()
trident_require(_blas_found "OpenBLAS with CBLAS (Debian: libopenblas-openmp-dev)")
set(TRIDENT_BLAS_NAME "OpenBLAS (${TRIDENT_OPENBLAS_LIBRARY})")
add_library(trident_blas INTERFACE)
target_include_directories(trident_blas SYSTEM INTERFACE ${TRIDENT_CBLAS_INCLUDE_DIR})
target_link_libraries(trident_blas INTERFACE ${TRIDENT_OPENBLAS_LIBRARY} OpenMP::OpenMP_CXX)

# --- tests and benchmarks --------------------------------------------------------------------
if(TRIDENT_TESTS)
  find_package(GTest QUIET)
  trident_require(GTest_FOUND "GoogleTest (Debian: libgtest-dev libgmock-dev)")
endif()
if(TRIDENT_BENCHMARKS)
  find_package(benchmark QUIET)
  trident_require(benchmark_FOUND "Google Benchmark (Debian: libbenchmark-dev)")
endif()

# --- CUDA (optional) -------------------------------------------------------------------------
if(TRIDENT_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "Trident: TRIDENT_CUDA=ON but no nvcc was found (install the CUDA toolkit or pass -DTRIDENT_CUDA=OFF)")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "GPU architectures to build for (90 = H100/H200)")
  endif()
  enable_language(CUDA)
  # trident_use_hopper_features(target): the target's CUDA code built with Hopper's
  # architecture-specific instructions (wgmma: kernels/cuda/warpgroup_mma.cuh), which only code
  # built for sm_90a may use: the machine code for 90 in CMAKE_CUDA_ARCHITECTURES becomes sm_90a's
  # there (an sm_90a binary runs on compute capability 9.0 alone, H100 and H200, which is what 90
  # names), while the PTX that 90 also asks for stays compute_90's: PTX for 90a could be compiled
  # for no later GPU, compute_90's can (without those instructions, which the code then leaves
  # out: flash_attention_wgmma_available). So 90 becomes 90a-real and 90-virtual, 90-real
  # becomes 90a-real, and the rest stays as it is. The target's code sees
  # TRIDENT_HOPPER_FEATURES when one changed.
  function(trident_use_hopper_features target)
    set(_architectures "")
    foreach(_architecture IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(_architecture STREQUAL "90")
        list(APPEND _architectures 90a-real 90-virtual)
      elseif(_architecture STREQUAL "90-real")
        list(APPEND _architectures 90a-real)
      else()
        list(APPEND _architectures "${_architecture}")
      endif()
    endforeach()
    set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES "${_architectures}")
    if(NOT _architectures STREQUAL CMAKE_CUDA_ARCHITECTURES)
      target_compile_definitions(${target} PRIVATE TRIDENT_HOPPER_FEATURES=1)  # host code may ask for them
    endif()
  endfunction()
  # CMake 3.25 knows no C++20 flag for nvcc; the CUDA sources keep to C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit QUIET)
  trident_require(CUDAToolkit_FOUND "CUDA toolkit libraries (cudart, cuBLAS)")
  # NCCL ships with the CUDA toolkit here (and in NVIDIA's containers); a separate install is
  # found through CMAKE_PREFIX_PATH or NCCL_ROOT. Without it (or with -DTRIDENT_NCCL=OFF) the
  # CUDA backend still builds, and parallel.comm = nccl is refused at run time with a pointer
  # to parallel.comm = mpi.
  option(TRIDENT_NCCL "Build the NCCL communicators (parallel.comm = nccl)" ON)
  if(TRIDENT_NCCL)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_ROOT}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_ROOT}/lib)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      add_library(trident_nccl INTERFACE)
      target_include_directories(trident_nccl INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(trident_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
    else()
      set(TRIDENT_NCCL OFF)  # this configure only: a later NCCL install is found on the next
      message(WARNING "Trident: NCCL not found beside the CUDA toolkit (set NCCL_ROOT): building without "
                      "parallel.comm = nccl")
    endif()
  endif()
endif()
