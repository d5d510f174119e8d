#!/usr/bin/env bash
# Installs, builds and runs the quickstart: a tiny GPT trained on 2 CPU ranks with data
# parallelism on a generated synthetic source whose loss floor is printed at start-up.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ranks=${TRIDENT_RANKS:-2}
mpirun_flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)
exec mpirun "${mpirun_flags[@]}" -np "$ranks" build/bin/trident train inputs/quickstart.ini "$@"
