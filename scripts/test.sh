#!/usr/bin/env bash
# Installs, builds and runs every test (labels unit and mpi; gpu tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DTRIDENT_WERROR=ON
# Open MPI refuses root unless told; the tests start more ranks than a small machine has cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd build
ctest --output-on-failure -j 2 "$@"
