# A diverged step (src/train/training_diverged.h): a NaN that one rank's kernel leaves in its
# gradients (the TRIDENT_TEST_NAN_GRADIENT hook, src/app/gradient_fault.h) stops the run at
# that step on every rank, exit status 3, with one line naming the step and the checkpoint to
# restart from; the update is not applied, no checkpoint holds the step, and a restart from
# the checkpoint before it ends with the losses of a run that never met the NaN. fp16 skips
# such a step and backs off, unless its loss scale is already the smallest. Also over two
# pipeline stages, ZeRO-1 with the overlapped gather, and tp = 2: no rank waits for another.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
common="--train.steps=20 --checkpoint.every=5 --train.eval_batches=0 --optim.decay_steps=20"
# Two micro-batches a step on each of two data ranks: rank 1's 25th embedding backward is in
# step 13, after the checkpoint of step 10.
nan_at_13="TRIDENT_TEST_NAN_GRADIENT=1:25"

mpi 2 train deck.ini $common --parallel.dp=2 --run.dir=straight > straight.log 2>&1 || { tail -5 straight.log; fail "straight run"; }

# diverges NAME PRECISION-ARGS...: the faulted run stops at step 13 as described above.
diverges() {
  local name=$1; shift
  env $nan_at_13 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.dp=2 \
    --run.dir="$name" "$@" > "$name.log" 2>&1
  local rc=$? line
  line=$(grep -m1 "^trident: error:" "$name.log")
  if [ $rc -eq 3 ] && [ "$(grep -c '^trident: error:' "$name.log")" -eq 1 ] \
    && echo "$line" | grep -q "training diverged at step 13: an inf or NaN in the gradients" \
    && echo "$line" | grep -q "Restart from $name/checkpoints/step-000000010.h5 (run.restart = auto)"; then
    pass "$name: exit 3 on step 13: $(echo "$line" | cut -c1-150)..."
  else
    fail "$name: rc $rc, '$line'"
  fi
  [ "$(cat "$name/checkpoints/latest" 2>/dev/null)" = step-000000010.h5 ] && [ ! -e "$name/checkpoints/step-000000015.h5" ] \
    && pass "$name: latest is step 10's checkpoint, none after it" || fail "$name: checkpoints $(ls "$name/checkpoints")"
  tail -1 "$name/metrics.jsonl" | grep -q '"step": 13,.*"grad_norm": null.*"diverged": 1' \
    && pass "$name: the metrics end with step 13, marked diverged" || fail "$name: metrics end '$(tail -1 "$name/metrics.jsonl")'"
}

diverges fp32
# The checkpoint before the NaN restarts the run (without the hook) to the losses of a run
# that never met it: nothing of step 13 reached the parameters or the checkpoints.
mpi 2 train deck.ini $common --parallel.dp=2 --run.dir=fp32 > fp32-restart.log 2>&1; rc=$?
# Every row (steps 1-10 kept from the first run, 11-20 the restart's, none left of 11-13).
[ $rc -eq 0 ] && grep -q "resuming from .*step-000000010.h5 after step 10" fp32-restart.log \
  && "$CHECK_METRICS" compare straight/metrics.jsonl fp32/metrics.jsonl loss 0 >/dev/null \
  && pass "fp32: restarted from step 10, losses 1-20 bit-identical to the run without the NaN" \
  || fail "fp32 restart: rc $rc: $(tail -3 fp32-restart.log)"

diverges bf16 --train.precision=bf16
# The remedy exit 3's line advises: resume with a lower rate (both ends of the schedule halved, so
# every later step's rate is half the straight run's), which the restart names in a note.
"$TRIDENT" check deck.ini $common --parallel.dp=2 --run.dir=bf16 --train.precision=bf16 --optim.lr=1.5e-3 \
  --ranks 2 > bf16-check.log 2>&1 && grep -q "^restart: note: optim.lr = 0.0015 (0.003 in the checkpoint): the steps after the checkpoint would train" bf16-check.log \
  && pass "bf16: check names the changed rate" || fail "bf16: check: $(grep -m2 'restart\|error' bf16-check.log)"
mpi 2 train deck.ini $common --parallel.dp=2 --run.dir=bf16 --train.precision=bf16 \
  --optim.lr=1.5e-3 --optim.min_lr=1.5e-4 > bf16-restart.log 2>&1; rc=$?
lr_of() { grep "\"step\": $2," "$1" | sed 's/.*"lr": \([^,}]*\).*/\1/'; }
[ $rc -eq 0 ] && grep -q "resuming from .*step-000000010.h5 after step 10" bf16-restart.log \
  && grep -qx "restart: note: optim.lr = 0.0015 (0.003 in the checkpoint), optim.min_lr = 0.00015 (3e-4 in the checkpoint): the steps after the checkpoint train with these" bf16-restart.log \
  && awk -v a="$(lr_of straight/metrics.jsonl 11)" -v b="$(lr_of bf16/metrics.jsonl 11)" \
       'BEGIN { exit !(a > 0 && (b / a - 0.5) ^ 2 < 1e-12) }' \
  && pass "bf16: resumed from step 10 at half the rate, with a note: step 11's lr $(lr_of bf16/metrics.jsonl 11)" \
  || fail "bf16 restart at a lower rate: rc $rc: $(grep -m2 'restart\|error' bf16-restart.log)"

# fp16: the step is skipped and the scale halved on both ranks; the run goes on to the end.
env $nan_at_13 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.dp=2 --run.dir=fp16 \
  --train.precision=fp16 > fp16.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^step 13: fp16 gradients overflowed at loss scale 65536: update skipped, scale now 32768" fp16.log \
  && pass "fp16: step 13 skipped, scale halved, the run finished" || fail "fp16: rc $rc: $(grep -m1 'step 13' fp16.log)"
# ... unless the scale is already the smallest.
env $nan_at_13 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.dp=2 --run.dir=fp16min \
  --train.precision=fp16 --train.loss_scale=1 > fp16min.log 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "^trident: error: training diverged at step 13: .* at the smallest loss scale (1)" fp16min.log \
  && pass "fp16 at loss scale 1: exit 3 on step 13" || fail "fp16 at loss scale 1: rc $rc: $(grep -m1 'error' fp16min.log)"

# Two pipeline stages: the NaN on stage 0 (rank 0, whose embedding backward is the step's
# last) stops the last stage too; no rank waits for another. dp = 1: all 4 micro-batches of a
# step pass stage 0, so its 49th embedding backward is in step 13.
TRIDENT_TEST_NAN_GRADIENT=0:49 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.pp=2 \
  --parallel.dp=1 --run.dir=pp > pp.log 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "^trident: error: training diverged at step 13:" pp.log \
  && pass "pp = 2: exit 3 on step 13 on both stages" || fail "pp = 2: rc $rc: $(grep -m1 'error' pp.log)"

# ZeRO-1 with the overlapped parameter gather (the NaN reaches one rank's block through the
# reduce-scatter; the gather started by step 12's update is waited for before the ranks stop),
# and tp = 2 (rank 1's vocabulary shard of the embedding; 4 micro-batches a step, the 49th in
# step 13).
TRIDENT_TEST_NAN_GRADIENT=1:25 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.dp=2 \
  --parallel.zero=1 --parallel.overlap_param_gather=true --run.dir=zero > zero.log 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "^trident: error: training diverged at step 13:" zero.log \
  && pass "ZeRO-1, overlapped gather: exit 3 on step 13" || fail "ZeRO-1: rc $rc: $(grep -m1 'error' zero.log)"
TRIDENT_TEST_NAN_GRADIENT=1:49 "$MPIEXEC" --oversubscribe -np 2 "$TRIDENT" train deck.ini $common --parallel.tp=2 \
  --parallel.dp=1 --model.heads=2 --run.dir=tp > tp.log 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "^trident: error: training diverged at step 13:" tp.log \
  && pass "tp = 2: exit 3 on step 13" || fail "tp = 2: rc $rc: $(grep -m1 'error' tp.log)"

# jobs/mpirun-until-complete.sh does not rerun a diverged run (a rerun would meet the step
# again; here, with the hook counting afresh, it would not, and would complete).
MAX_ATTEMPTS=3 env $nan_at_13 bash "$TRIDENT_SOURCE_DIR/jobs/mpirun-until-complete.sh" 2 until deck.ini $common \
  --parallel.dp=2 > until.log 2>&1; rc=$?
[ $rc -eq 3 ] && grep -q "^training diverged (exit 3): not retrying" until.log && [ ! -e until/complete ] \
  && pass "mpirun-until-complete.sh: exit 3 after one attempt" || fail "mpirun-until-complete.sh: rc $rc: $(tail -1 until.log)"

# The hook itself refuses a malformed value.
TRIDENT_TEST_NAN_GRADIENT=one "$MPIEXEC" --oversubscribe -np 1 "$TRIDENT" train deck.ini --run.dir=bad > bad.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "TRIDENT_TEST_NAN_GRADIENT = 'one': expected RANK:CALL" bad.log \
  && pass "a malformed TRIDENT_TEST_NAN_GRADIENT: exit 2" || fail "malformed hook value: rc $rc"
finish
