#!/usr/bin/env bash
# Installs everything Trident needs to build and test on Debian/Ubuntu.
#
#   scripts/install-deps.sh          as root: apt-get installs what is missing
#                                    otherwise: prints exactly what is missing, exit 1
#
# CUDA (nvcc, cuBLAS, NCCL) is optional and never installed here: when nvcc is present the
# build turns TRIDENT_CUDA on by itself.
set -euo pipefail

# Package -> why we need it. The OpenMP flavour of OpenBLAS obeys omp_set_num_threads, so
# the rank's thread budget governs BLAS and our own loops alike.
packages=(
  build-essential          # g++ (C++20)
  cmake                    # >= 3.25
  pkg-config
  git                      # version stamp in --version
  openmpi-bin              # mpirun
  libopenmpi-dev           # MPI headers and libraries
  libhdf5-openmpi-dev      # parallel HDF5, Open MPI flavour
  hdf5-tools               # h5dump, for inspecting datasets and checkpoints
  libboost-program-options-dev
  libboost-context-dev     # fibers for the CUDA emulation (tests/emulation)
  libopenblas-openmp-dev   # CBLAS for the CPU matmuls
  libgtest-dev             # GoogleTest
  libgmock-dev
  libbenchmark-dev         # Google Benchmark
  python3-h5py             # mpi.export runs docs/export.md's h5py + numpy code on an export
  python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all dependencies present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
