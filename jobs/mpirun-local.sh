#!/usr/bin/env bash
# Runs a deck on this machine with N ranks (default: 2), threads per rank shared fairly.
#
#   jobs/mpirun-local.sh 4 inputs/quickstart.ini --train.steps=1000
set -euo pipefail
ranks=${1:?usage: jobs/mpirun-local.sh RANKS DECK [--section.key=value ...]}
shift
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
# From any directory: the executable is TRIDENT, or build/bin/trident beside this script's folder.
exec mpirun "${flags[@]}" -np "$ranks" "${TRIDENT:-$(dirname "$0")/../build/bin/trident}" train "$@"
