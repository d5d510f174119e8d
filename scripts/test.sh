#!/usr/bin/env bash
# Installs, builds and runs every test (labels unit and mpi; gpu tests skip without a GPU), then
# the GPU twin tests on the CPU emulation of CUDA in a second build tree (label emulated,
# docs/testing-without-a-gpu.md), so that the CUDA kernels run on every machine, and in a third
# under its race checker (label racecheck).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DTRIDENT_WERROR=ON
# Open MPI refuses root unless told; the tests start more ranks than a small machine has cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(cd build && ctest --output-on-failure -j 2 "$@")

# The emulation compiles against the CUDA toolkit's headers: where the build above found no
# toolkit (TRIDENT_CUDA off), there is nothing to emulate, and it says so.
if ! grep -q '^TRIDENT_CUDA:BOOL=ON' build/CMakeCache.txt; then
  echo "SKIPPED: the CUDA emulation tests (labels emulated, racecheck): no CUDA toolkit, so no CUDA backend to test"
  exit 0
fi
jobs=$(nproc 2>/dev/null || echo 2)
# The emulation trees build at -O2 (RelWithDebInfo), not -O3: under the sanitizers -O3 took the
# largest kernel units nearly twice as long to compile (emulated LayerNorm 58 s against 33 s),
# while the tests took about as long (emulated 152 s against 145 s, racecheck 100 s both). -O2
# keeps the fused multiply-adds of -ffp-contract=fast (GCC needs -fexpensive-optimizations for
# them, which -O1 lacks).
emulation_build=-DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake -S . -B build-emulation -DTRIDENT_CUDA_EMULATION=ON "$emulation_build" -DTRIDENT_WERROR=ON > /dev/null
cmake --build build-emulation -j "$jobs" --target trident_gpu_tests trident_emulation_tests trident check_metrics \
  playground_cross_entropy_backward
(cd build-emulation && ctest --output-on-failure -j "$jobs" -L emulated "$@")

# The GPU tests once more under the race checker (ThreadSanitizer, label racecheck), in a third
# tree: a sanitizer per build.
cmake -S . -B build-racecheck -DTRIDENT_CUDA_EMULATION=ON -DTRIDENT_CUDA_EMULATION_SANITIZER=thread \
  "$emulation_build" -DTRIDENT_WERROR=ON > /dev/null
cmake --build build-racecheck -j "$jobs" --target trident_gpu_tests trident_racecheck_tests
cd build-racecheck
ctest --output-on-failure -j "$jobs" -L racecheck "$@"
