#!/usr/bin/env bash
# Reruns a training command until the run reports it is complete (run.dir/complete), each
# rerun resuming from the newest checkpoint (run.restart = auto). For machines without Slurm,
# or a job that may be killed: a failed or stopped attempt is simply tried again, up to
# MAX_ATTEMPTS (default 20), a stalled one (exit 4: a rank made no progress for
# run.stall_timeout) included. Not a user error (exit 2) nor a diverged run (exit 3): a rerun
# would fail the same way, the diverged one at the same step.
#
#   jobs/mpirun-until-complete.sh RANKS RUN_DIR DECK [--section.key=value ...]
#
# To stop it for good, signal this script (SIGUSR1, SIGTERM, or Ctrl-C): it passes SIGUSR1 on
# to mpirun, whose ranks finish their step and write a checkpoint, and then it exits 0 without
# another attempt. (A signal sent to mpirun or the ranks directly stops that attempt only.)
# TRIDENT (default build/bin/trident beside this script's folder) and MPIEXEC (default mpirun)
# name the programs.
set -uo pipefail
usage="usage: jobs/mpirun-until-complete.sh RANKS RUN_DIR DECK [--section.key=value ...]"
[ $# -ge 3 ] && [ -n "$1" ] && [ -n "$2" ] || { echo "$usage" >&2; exit 2; }
ranks=$1
run_dir=$2
shift 2
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
stop=0
launcher=
# mpirun forwards SIGUSR1 to the ranks (the clean stop); SIGTERM or SIGINT would end it at once.
request_stop() {
  stop=1
  [ -n "$launcher" ] && kill -USR1 "$launcher" 2>/dev/null
}
trap request_stop USR1 TERM INT
for attempt in $(seq "${MAX_ATTEMPTS:-20}"); do
  [ $stop -eq 1 ] && { echo "stopped on request before attempt $attempt; rerun this command to resume"; exit 0; }
  # In the background, so that this shell's traps run while it waits (a background command of a
  # script also ignores the terminal's SIGINT: Ctrl-C reaches the ranks only as SIGUSR1).
  "${MPIEXEC:-mpirun}" "${flags[@]}" -np "$ranks" "${TRIDENT:-$(dirname "$0")/../build/bin/trident}" train "$@" \
    --run.dir="$run_dir" &
  launcher=$!
  # wait returns early when a trap runs: wait again until mpirun has ended.
  while :; do
    wait "$launcher"
    status=$?
    kill -0 "$launcher" 2>/dev/null || break
  done
  # A wait cut short by a trap (status 128 + N) whose mpirun ended right after it: its own status
  # is still there to collect (127: there was none, the status above was mpirun's).
  if [ $status -gt 128 ]; then
    wait "$launcher" 2>/dev/null
    again=$?
    [ $again -ne 127 ] && status=$again
  fi
  launcher=
  [ -e "$run_dir/complete" ] && { echo "complete after $attempt attempt(s)"; exit 0; }
  [ $status -eq 2 ] && { echo "user error (exit 2): not retrying"; exit 2; }
  [ $status -eq 3 ] && { echo "training diverged (exit 3): not retrying; lower optim.lr and rerun"; exit 3; }
  [ $stop -eq 1 ] && { echo "stopped on request after attempt $attempt (exit $status); rerun this command to resume"; exit "$status"; }
  echo "attempt $attempt ended (exit $status) before the run was complete; resuming"
done
echo "not complete after ${MAX_ATTEMPTS:-20} attempts"
exit 1
