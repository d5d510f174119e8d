#!/usr/bin/env bash
# Reruns a training command until the run reports it is complete (run.dir/complete), each
# rerun resuming from the newest checkpoint (run.restart = auto). For machines without Slurm,
# or a job that may be killed: a failed or stopped attempt is simply tried again, up to
# MAX_ATTEMPTS (default 20). Not a user error (exit 2) nor a diverged run (exit 3): a rerun
# would fail the same way, the diverged one at the same step.
#
#   jobs/mpirun-until-complete.sh RANKS RUN_DIR DECK [--section.key=value ...]
#
# TRIDENT (default build/bin/trident) and MPIEXEC (default mpirun) name the programs.
set -uo pipefail
ranks=${1:?usage: jobs/mpirun-until-complete.sh RANKS RUN_DIR DECK [--section.key=value ...]}
run_dir=${2:?}
shift 2
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
for attempt in $(seq "${MAX_ATTEMPTS:-20}"); do
  "${MPIEXEC:-mpirun}" "${flags[@]}" -np "$ranks" "${TRIDENT:-build/bin/trident}" train "$@" --run.dir="$run_dir"
  status=$?
  [ -e "$run_dir/complete" ] && { echo "complete after $attempt attempt(s)"; exit 0; }
  [ $status -eq 2 ] && { echo "user error (exit 2): not retrying"; exit 2; }
  [ $status -eq 3 ] && { echo "training diverged (exit 3): not retrying; lower optim.lr and rerun"; exit 3; }
  echo "attempt $attempt ended (exit $status) before the run was complete; resuming"
done
echo "not complete after ${MAX_ATTEMPTS:-20} attempts"
exit 1
