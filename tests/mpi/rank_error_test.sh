# An error of one rank alone in the step loop or at start-up once the dataset is open
# (src/app/rank_error.h) ends the job within seconds,
# exit 2, with that rank's line; before, the others waited in the gradient reduction and the
# failing rank in the dataset's collective close, silently, until the time limit. The
# TRIDENT_TEST_RANK_ERROR=RANK:CALL hook raises it in the rank's CALL-th embedding backward, as an
# unreadable share of the dataset would. An error every rank raises (a checkpoint that cannot be
# written: tests/mpi/checkpoint_full_disk_test.sh, bad_input_test.sh) still prints one line, as
# does a dataset truncated under the run (io/token_dataset.h, check_unchanged), at the end.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
common="--train.steps=20 --train.eval_batches=0"

# ends_job NAME STATUS LINE WHAT PRELOAD ARGS...: `trident train` on 2 ranks with ARGS (and the
# library PRELOAD loaded into the ranks, unless "") stops with exit STATUS within the timeout, a
# line matching LINE on stderr and no second "trident: " line.
ends_job() {
  local name=$1 status=$2 line=$3 what=$4 preload=$5; shift 5
  local start=$SECONDS
  local launch=(--oversubscribe -np 2)
  [ -n "$preload" ] && launch+=(-x "LD_PRELOAD=$preload")
  timeout 60 "$MPIEXEC" "${launch[@]}" "$TRIDENT" train deck.ini $common --run.dir="$name" "$@" \
    > "$name.out" 2> "$name.err"
  local rc=$? took=$((SECONDS - start))
  if [ $rc -eq 124 ]; then fail "$name: hung (killed after 60 s)"; return; fi
  if [ $rc -eq "$status" ] && grep -q "$line" "$name.err" && [ "$(grep -c '^trident: ' "$name.err")" -eq 1 ]; then
    pass "$name: exit $status in ${took} s, $what"
  else
    fail "$name: rc $rc after ${took} s: $(grep -m3 'trident\|abort\|MPI' "$name.err")"
  fi
}

# fails NAME RANK CALL ARGS...: the run stops with exit 2, the failing rank's line on stderr, no
# "internal error".
fails() {
  local name=$1 rank=$2 call=$3; shift 3
  TRIDENT_TEST_RANK_ERROR=$rank:$call ends_job "$name" 2 \
    "^trident: error on rank $rank: TRIDENT_TEST_RANK_ERROR: a user error on this rank alone" "rank $rank's line" \
    "" "$@"
}

# Two data ranks (the other waits in the gradient reduction), and two pipeline stages (the other
# waits for the activation gradient; the embedding's backward runs on stage 0).
fails dp 1 5 --parallel.dp=2
fails pp 0 5 --parallel.pp=2 --parallel.dp=1
# At start-up, with the dataset open (there a failed allocation, a device or a file of one rank
# alone hung the job until run.stall_timeout, whose exit 4 blamed a stalled peer; call 0).
fails startup 1 0 --parallel.dp=2
# One rank: nothing to wait for, the plain user error line.
TRIDENT_TEST_RANK_ERROR=0:3 timeout 60 "$TRIDENT" train deck.ini $common --run.dir=one > one.out 2> one.err; rc=$?
[ $rc -eq 2 ] && grep -qx "trident: error: TRIDENT_TEST_RANK_ERROR: a user error on this rank alone, as an unreadable share of the dataset raises" one.err \
  && pass "one rank: exit 2, the plain line" || fail "one rank: rc $rc: $(cat one.err)"

# A failed MPI call on one rank (tests/tools/mpi_faults.c makes rank 1's call return an error
# without communicating, so rank 0 waits in it): its check (mpi_support/mpi_check.h) prints the
# call, Trident's file and line, the rank and MPI's reason, and aborts the job, exit 1 (an internal
# error). One case in io (the checkpoint writer's gather), one in parallel (a reduction of
# the step loop, its 21st MPI_Allreduce).
# Before every MPI call was checked, io's calls went on with what the failed call left.
mpi_fails() {
  local name=$1 call=$2 where=$3; shift 3
  TRIDENT_TEST_FAULT_RANK=1 TRIDENT_TEST_MPI_FAIL=$call ends_job "$name" 1 \
    "^trident: MPI error in $call(.* at $where:[0-9]* on rank 1: MPI_ERR_OTHER" "the call, $where and rank 1 named" \
    "$MPI_FAULTS" "$@"
}
mpi_fails mpi_io MPI_Allgatherv io/param_file_plan.cpp --parallel.dp=2 --checkpoint.every=5
TRIDENT_TEST_MPI_FAIL_AFTER=20 mpi_fails mpi_parallel MPI_Allreduce parallel/mpi_comm.cpp --parallel.dp=2

# The dataset truncated under a running job (a copy over it, a cleanup): every rank stops at its
# next step with the file named, exit 2; before, the reads past the new end came back as zeros
# and the run finished, exit 0, at a loss of 0.0001.
cp "$WORK_DIR/tiny.h5" moving.h5
mpi 2 train deck.ini --train.steps=1000000 --train.eval_batches=0 --data.path=moving.h5 --data.generate=none \
  --run.dir=moving > moving.out 2> moving.err &
runner=$!
for _ in $(seq 200); do [ -s moving/metrics.jsonl ] && break; sleep 0.1; done
truncate -s 20000 moving.h5
for _ in $(seq 600); do kill -0 $runner 2>/dev/null || break; sleep 0.1; done
if kill -0 $runner 2>/dev/null; then
  kill -9 $runner; fail "truncated dataset: still running 60 s later"
else
  wait $runner; rc=$?
  [ $rc -eq 2 ] && grep -q "dataset 'moving.h5': changed while training (its size was [0-9]* bytes at start-up and is 20000 now)" moving.err \
    && pass "truncated dataset: exit 2 naming the change" || fail "truncated dataset: rc $rc: $(grep -m2 'error' moving.err)"
fi
finish
