# The stall watchdog (run.stall_timeout, src/train/stall_watchdog.h): a rank that hangs (the
# TRIDENT_TEST_STALL hook, src/app/gradient_fault.h: it sleeps inside a kernel call, as a stuck
# kernel or a lost collective would leave it) ends the job within seconds of the timeout, exit 4,
# each reporting rank saying where it was; the rerun resumes from the newest checkpoint and ends
# with the losses of a run that never hung; jobs/mpirun-until-complete.sh reruns such a job until
# it is complete; time stopped by SIGSTOP does not count. Two pipeline stages, so that the waiting
# rank is in a send or receive.
source "$(dirname "$0")/lib.sh"
# Its own deck name and run directories, apart from the other script tests' (ctest runs some
# side by side, and some signal their runs by command line).
tiny_deck stall.ini
# Four micro-batches a step on stage 0 (rank 0, which holds the embedding): its 13th embedding
# backward is step 4's first, after the checkpoint of step 3.
common="--parallel.pp=2 --train.steps=10 --checkpoint.every=3 --train.eval_batches=0 --optim.decay_steps=10"
stall_at_4="TRIDENT_TEST_STALL=0:13"
# The timeout: long enough that a rank starved of CPU by the tests beside this one (ctest -j2 on
# two cores) does not pass for stalled, short enough to keep the test quick.
timeout_s=5

mpi 2 train stall.ini $common --run.dir=straight > straight.log 2>&1 || { tail -5 straight.log; fail "straight run"; }

started=$(date +%s)
env $stall_at_4 timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train stall.ini $common --run.dir=hung \
  --run.stall_timeout=$timeout_s > hung.log 2>&1; rc=$?
elapsed=$(( $(date +%s) - started ))
rank0=$(grep -m1 "^trident: error on rank 0 " hung.log)
rank1=$(grep -m1 "^trident: error on rank 1 " hung.log)
if [ $rc -eq 4 ] && [ $elapsed -lt 60 ] && [ -n "$rank0$rank1" ]; then
  pass "exit 4 after ${elapsed} s: $(echo "${rank0:-$rank1}" | cut -c1-160)..."
else
  fail "hung run: rc $rc after ${elapsed} s: $(grep -m2 'error' hung.log)"
fi
# Whoever reported says where it was: rank 0 in the kernel call of step 4's first backward, rank 1
# (stage 1) waiting on stage 0.
[ -z "$rank0" ] || echo "$rank0" | grep -q "^trident: error on rank 0 (tensor 0, data 0, stage 0): no progress for [0-9]* s (run.stall_timeout = $timeout_s) at step 4: backward of micro-batch 0\. A rank of the job is stuck or has died .*ending the job with exit status 4\. Rerun the same command to resume from the newest checkpoint in hung/checkpoints$" \
  && pass "rank 0's line names its step and action" || fail "rank 0's line: '$rank0'"
[ -z "$rank1" ] || echo "$rank1" | grep -q "^trident: error on rank 1 (tensor 0, data 0, stage 1): no progress for [0-9]* s (run.stall_timeout = $timeout_s) at step 4: \(receiving\|sending\) .*pipeline stage 0\. " \
  && pass "rank 1's line names a send or receive with stage 0" || fail "rank 1's line: '$rank1'"
[ "$(cat hung/checkpoints/latest 2>/dev/null)" = step-000000003.h5 ] && [ ! -e hung/complete ] \
  && pass "latest is step 3's checkpoint; the run is not complete" || fail "hung run's checkpoints: $(ls hung/checkpoints)"

# The rerun (no hook) resumes from step 3 to the straight run's losses, bit for bit.
mpi 2 train stall.ini $common --run.dir=hung > rerun.log 2>&1; rc=$?
# Every row: steps 1-3 of the hung run, 4-10 of the rerun, no row of the hung step left.
[ $rc -eq 0 ] && grep -q "resuming from .*step-000000003.h5 after step 3" rerun.log \
  && "$CHECK_METRICS" compare straight/metrics.jsonl hung/metrics.jsonl loss 0 >/dev/null \
  && pass "rerun: resumed after step 3, losses 1-10 bit-identical to the run that never hung" \
  || fail "rerun: rc $rc: $(tail -3 rerun.log)"

# jobs/mpirun-until-complete.sh reruns a stalled job. The hook counts afresh in every attempt, so
# attempts stall at steps 4, 7 and 10 (each after the checkpoint before it) and the fourth completes.
MAX_ATTEMPTS=6 env $stall_at_4 bash "$TRIDENT_SOURCE_DIR/jobs/mpirun-until-complete.sh" 2 retried stall.ini $common \
  --run.stall_timeout=$timeout_s > retried.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^complete after 4 attempt(s)" retried.log && [ "$(grep -c 'ended (exit 4)' retried.log)" = 3 ] \
  && "$CHECK_METRICS" compare straight/metrics.jsonl retried/metrics.jsonl loss 0 >/dev/null \
  && pass "mpirun-until-complete.sh: three stalls (exit 4), complete after 4 attempts, losses bit-identical" \
  || fail "mpirun-until-complete.sh: rc $rc: $(grep -E 'attempt|complete' retried.log | tail -5)"

# Time the ranks spend stopped (SIGSTOP, as Slurm's suspend sends) is not a stall: stopped for
# longer than the timeout, then continued, the run goes on, and SIGUSR1 stops it cleanly.
"$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train stall.ini --train.steps=1000000 --train.eval_batches=0 \
  --checkpoint.every=0 --run.dir=paused --run.stall_timeout=$timeout_s > paused.log 2>&1 &
job=$!
for _ in $(seq 300); do [ -s paused/metrics.jsonl ] && break; sleep 0.1; done
ranks=$(pgrep -f "^$TRIDENT train stall.ini .*--run.dir=paused")
kill -STOP $job $ranks; sleep $((timeout_s + 3)); kill -CONT $job $ranks
sleep 1; kill -USR1 $job; wait $job; rc=$?
[ $rc -eq 0 ] && [ -n "$ranks" ] && grep -q "^stopped by a signal after step" paused.log && ! grep -q "no progress" paused.log \
  && pass "stopped $((timeout_s + 3)) s under a $timeout_s s timeout, continued: no stall; SIGUSR1 ends it cleanly" \
  || fail "stopped and continued: rc $rc, ranks '$ranks': $(grep -m2 'error\|stopped' paused.log)"

# run.stall_timeout = 0 never fires: the hung rank is still there when timeout ends the job.
env $stall_at_4 timeout 8 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train stall.ini $common --run.dir=off \
  --run.stall_timeout=0 > off.log 2>&1; rc=$?
[ $rc -eq 124 ] && ! grep -q "no progress" off.log && pass "run.stall_timeout = 0: no watchdog (the run hung until killed)" \
  || fail "run.stall_timeout = 0: rc $rc: $(grep -m1 error off.log)"

TRIDENT_TEST_STALL=x "$MPIEXEC" --oversubscribe -np 1 "$TRIDENT" train stall.ini --run.dir=bad > bad.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "TRIDENT_TEST_STALL = 'x': expected RANK:CALL" bad.log \
  && pass "a malformed TRIDENT_TEST_STALL: exit 2" || fail "malformed hook value: rc $rc"
finish
