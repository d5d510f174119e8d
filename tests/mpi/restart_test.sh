# Checkpoint and restart (HDF5, global shapes):
# - same layout: 20 steps straight against 10 steps, a checkpoint, and a restarted run to 20:
#   every loss and the final parameters bit-identical, for (1,1,1), (2,2,1) and (2,1,2) with
#   ZeRO-1;
# - other layout: a checkpoint at step 10 of (2,2,2) with ZeRO-1, resumed on (1,1,1), (4,1,1),
#   (1,4,1) and (1,1,4): every later step's loss within 1e-5 relative of the uninterrupted (2,2,2)
#   run (only fp32 reassociation differs between layouts), its gradient norm and the final
#   parameters within 1e-4;
# - checkpoint.keep, an explicit run.restart path, and a missing one; none or an older path
#   beside later checkpoints, and a finished run without checkpoints, refused.
# optim.decay_steps is fixed: with 0 the cosine would end at train.steps, which differs
# between the 10-step and the 20-step run.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
sed -i 's/^layers = 2$/layers = 4/; s/^heads = 2$/heads = 4/' deck.ini
common="--optim.decay_steps=20 --train.eval_batches=0"

# layout NAME DP TP PP EXTRA: the flags of a layout
for spec in "l111:1:1:1:" "l221:2:2:1:" "l212z:2:1:2:--parallel.zero=1"; do
  IFS=: read -r name dp tp pp extra <<< "$spec"
  ranks=$((dp * tp * pp))
  flags="--parallel.dp=$dp --parallel.tp=$tp --parallel.pp=$pp $extra $common"
  mpi $ranks train deck.ini --train.steps=20 --run.dir="$name.straight" $flags > "$name.straight.log" 2>&1 \
    || { tail -5 "$name.straight.log"; fail "$name straight run"; continue; }
  mpi $ranks train deck.ini --train.steps=10 --checkpoint.every=10 --run.dir="$name.split" $flags \
    > "$name.first.log" 2>&1 || { tail -5 "$name.first.log"; fail "$name first half"; continue; }
  mpi $ranks train deck.ini --train.steps=20 --run.dir="$name.split" $flags > "$name.second.log" 2>&1 \
    || { tail -5 "$name.second.log"; fail "$name restarted half"; continue; }
  grep -q "^restart: resuming from .*step-000000010.h5 after step 10" "$name.second.log" || fail "$name did not resume"
  # The resumed run's first step has its progress line; the summary counts its own steps.
  grep -q "^step 11/20 | " "$name.second.log" && grep -q "^done: steps 11 to 20 in .* (resumed after step 10)" \
    "$name.second.log" || fail "$name: progress after the restart: $(grep -E '^(step|done)' "$name.second.log")"
  "$CHECK_METRICS" compare "$name.straight/metrics.jsonl" "$name.split/metrics.jsonl" loss 0 >/dev/null &&
  "$CHECK_METRICS" compare-params "$name.straight/final-params.h5" "$name.split/final-params.h5" 0 >/dev/null &&
    pass "$name: restart bit-identical (20 losses, final parameters)" || fail "$name: restart differs"
done

# train.recompute may change on restart (a run short of memory switches it on): bit-identical.
mkdir -p l111.rc/checkpoints && cp l111.split/checkpoints/step-000000010.h5 l111.rc/checkpoints/ \
  && head -n 10 l111.split/metrics.jsonl > l111.rc/metrics.jsonl
mpi 1 train deck.ini --train.steps=20 --run.dir=l111.rc --train.recompute=full --parallel.dp=1 --parallel.tp=1 \
  --parallel.pp=1 $common > l111.rc.log 2>&1 && grep -q "after step 10" l111.rc.log \
  && "$CHECK_METRICS" compare l111.straight/metrics.jsonl l111.rc/metrics.jsonl loss 0 >/dev/null \
  && "$CHECK_METRICS" compare-params l111.straight/final-params.h5 l111.rc/final-params.h5 0 >/dev/null \
  && pass "restart with train.recompute = full: bit-identical" || fail "restart with recompute: $(grep error l111.rc.log)"

# Other layouts from a (2,2,2) ZeRO-1 checkpoint.
big="--parallel.dp=2 --parallel.tp=2 --parallel.pp=2 --parallel.zero=1 $common"
mpi 8 train deck.ini --train.steps=20 --run.dir=ref222 $big > ref222.log 2>&1 || { tail -5 ref222.log; fail "(2,2,2) run"; }
mpi 8 train deck.ini --train.steps=10 --checkpoint.every=10 --run.dir=ck222 $big > ck222.log 2>&1 \
  || { tail -5 ck222.log; fail "(2,2,2) checkpoint run"; }
checkpoint="$PWD/ck222/checkpoints/step-000000010.h5"
for spec in "r111:1:1:1" "r411:4:1:1" "r141:1:4:1" "r114:1:1:4"; do
  IFS=: read -r name dp tp pp <<< "$spec"
  mpi $((dp * tp * pp)) train deck.ini --train.steps=20 --run.dir="$name" --run.restart="$checkpoint" \
    --parallel.dp="$dp" --parallel.tp="$tp" --parallel.pp="$pp" $common > "$name.log" 2>&1 \
    || { tail -5 "$name.log"; fail "$name restart"; continue; }
  # The resumed run's metrics hold steps 11-20: compare them with the same steps of (2,2,2).
  # The losses alone would miss part of the optimizer state lost in the resharding (AdamW's
  # steps barely move the loss: one tensor's moments zeroed stayed within 3e-6), so the gradient
  # norms and the final parameters too, at layout_equivalence's tolerances.
  tail -n 10 ref222/metrics.jsonl > "$name.ref.jsonl"
  "$CHECK_METRICS" compare "$name.ref.jsonl" "$name/metrics.jsonl" loss 1e-5 >/dev/null &&
  "$CHECK_METRICS" compare "$name.ref.jsonl" "$name/metrics.jsonl" grad_norm 1e-4 >/dev/null &&
  "$CHECK_METRICS" compare-params ref222/final-params.h5 "$name/final-params.h5" 1e-4 > "$name.params.txt" &&
    pass "$name: resumed (2,2,2) checkpoint, $("$CHECK_METRICS" compare "$name.ref.jsonl" "$name/metrics.jsonl" loss 1e-5), final parameters within 1e-4" \
    || fail "$name: resharded restart differs: $(grep FAIL "$name.params.txt" | head -3)"
done
# model.vocab_multiple may change too: like tp, it only pads wte with zero rows (33 tokens: 48
# rows at tp 2 x 8 in the checkpoint, 64 here).
mpi 1 train deck.ini --train.steps=20 --run.dir=r111v64 --run.restart="$checkpoint" --model.vocab_multiple=64 \
  --parallel.dp=1 --parallel.tp=1 --parallel.pp=1 $common > r111v64.log 2>&1 \
  && tail -n 10 ref222/metrics.jsonl > r111v64.ref.jsonl \
  && "$CHECK_METRICS" compare r111v64.ref.jsonl r111v64/metrics.jsonl loss 1e-5 >/dev/null \
  && "$CHECK_METRICS" compare-params ref222/final-params.h5 r111v64/final-params.h5 1e-4 >/dev/null \
  && pass "restart with another model.vocab_multiple (64): losses within 1e-5, parameters within 1e-4" || fail "restart with vocab_multiple 64: $(grep -m2 error r111v64.log)"

# checkpoint.keep: checkpoints every 2 steps, keep 2 -> the newest two remain, latest names 10.
mpi 1 train deck.ini --train.steps=10 --checkpoint.every=2 --checkpoint.keep=2 --run.dir=keep $common > keep.log 2>&1 \
  || fail "keep run"
[ "$(ls keep/checkpoints | grep -c '^step-')" -eq 2 ] && [ "$(cat keep/checkpoints/latest)" = "step-000000010.h5" ] \
  && pass "checkpoint.keep = 2" || fail "checkpoint.keep: $(ls keep/checkpoints)"
# A run that is already complete resumes at its end and trains nothing more.
# It says so rather than report a loss it did not compute.
mpi 1 train deck.ini --train.steps=10 --run.dir=keep $common > again.log 2>&1 && grep -q "after step 10" again.log \
  && grep -q "^done: nothing left to train: the checkpoint is at step 10 of train.steps = 10" again.log \
  && ! grep -q "final loss nan" again.log && pass "resume of a finished run" \
  || fail "resume of a finished run: $(grep '^done' again.log)"
# With a lower train.steps: still nothing trained, and final-params.h5 and complete name step 10,
# the step its parameters are at (they said 6).
mpi 1 train deck.ini --train.steps=6 --run.dir=keep $common > lower.log 2>&1 \
  && grep -q "^done: nothing left to train: the checkpoint is at step 10 of train.steps = 6" lower.log \
  && [ "$(/usr/bin/python3 -c "import h5py, sys; print(int(h5py.File(sys.argv[1], 'r').attrs['step']))" keep/final-params.h5)" = 10 ] \
  && [ "$(cat keep/complete)" = 10 ] && pass "rerun below the checkpoint's step: final-params.h5 and complete say step 10" \
  || fail "rerun below the checkpoint's step: $(grep '^done\|error' lower.log); complete: $(cat keep/complete)"
# A rerun that changes checkpoint.dir, where run.dir's last run kept its checkpoints elsewhere:
# refused by train and check, naming both (it started over from step 0, overwriting metrics.jsonl).
mpi 1 train deck.ini --train.steps=6 --checkpoint.every=3 --run.dir=moved $common > moved1.log 2>&1 \
  && rm moved/complete || fail "moved: first run"
mpi 1 train deck.ini --train.steps=9 --checkpoint.every=3 --checkpoint.dir=elsewhere --run.dir=moved $common > moved.log 2>&1; rc=$?
"$TRIDENT" check deck.ini --train.steps=9 --checkpoint.every=3 --checkpoint.dir=elsewhere --run.dir=moved $common \
  > moved_check.log 2>&1; check_rc=$?
[ $rc -eq 2 ] && [ $check_rc -eq 2 ] \
  && grep -q "^trident: error: run.dir 'moved' was last trained with its checkpoints in 'moved/checkpoints' (2 there, the newest: step-000000006.h5), but this run's checkpoint.dir 'moved/elsewhere' holds none" moved.log \
  && grep -q "was last trained with its checkpoints in 'moved/checkpoints'" moved_check.log \
  && [ "$(grep -c '"step"' moved/metrics.jsonl)" -ge 6 ] && pass "changed checkpoint.dir beside the last run's checkpoints: refused" \
  || fail "changed checkpoint.dir: rc $rc, check rc $check_rc: $(grep -m1 error moved.log)"
mpi 1 train deck.ini --train.steps=9 --checkpoint.every=3 --run.dir=moved $common > moved2.log 2>&1 \
  && grep -q "^restart: resuming from moved/checkpoints/step-000000006.h5 after step 6" moved2.log \
  && pass "the same run with its own checkpoint.dir resumes" || fail "moved: resume: $(grep -m2 'error\|restart' moved2.log)"
# The complete marker cannot be written (here a directory holds its name; in the field, a full
# disk): exit 2 naming it, as job scripts would otherwise rerun the finished run forever.
mkdir -p blocked/complete/x
mpi 1 train deck.ini --train.steps=3 --run.dir=blocked --run.restart=none $common > blocked.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: run.dir 'blocked': cannot write its 'complete' marker (Is a directory)" blocked.log \
  && pass "complete marker not writable: exit 2 naming it" || fail "complete marker: rc $rc: $(grep -m2 'error' blocked.log)"
# A deck that changes the model or the optimizer against the checkpoint is refused on every rank,
# naming the key and both values; run.dir's config.ini still holds the run's deck, which resumes
# it (it was once overwritten with the refused deck, which config.ini then could not resume).
# (The learning-rate schedule may change: tests/mpi/diverged_test.sh.)
config_before=$(md5sum < l111.split/config.ini)
mpi 2 train deck.ini --train.steps=20 --run.dir=l111.split --optim.weight_decay=0.01 $common > changed.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "run.restart: optim.weight_decay = 0.01 differs from 0.1" changed.log \
  && [ "$(md5sum < l111.split/config.ini)" = "$config_before" ] \
  && pass "changed optim.weight_decay refused, config.ini untouched" \
  || fail "changed optim.weight_decay: rc $rc: $(tail -2 changed.log); config.ini $(grep weight_decay l111.split/config.ini)"
# A directory of another line of training is not mixed with this one (exit 2 on every rank,
# nothing deleted): run.restart = none where checkpoints are, or an explicit checkpoint older
# than others there (a run that deleted its own new checkpoints as the oldest before).
before=$(ls keep/checkpoints | tr '\n' ' ')
mpi 2 train deck.ini --train.steps=4 --checkpoint.every=2 --run.dir=keep --run.restart=none $common > none.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "run.restart = none, but checkpoint.dir 'keep/checkpoints' holds 2 checkpoint(s) of an earlier run (the newest: step-000000010.h5)" none.log \
  && [ "$(ls keep/checkpoints | tr '\n' ' ')" = "$before" ] && pass "run.restart = none beside checkpoints: refused" \
  || fail "run.restart = none beside checkpoints: rc $rc: $(grep error none.log) $(ls keep/checkpoints)"
mpi 2 train deck.ini --train.steps=10 --checkpoint.every=2 --run.dir=keep \
  --run.restart=keep/checkpoints/step-000000008.h5 $common > older.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "resumes after step 8, but checkpoint.dir 'keep/checkpoints' holds 1 checkpoint(s) of later steps (the newest: step-000000010.h5)" older.log \
  && pass "an older explicit checkpoint beside later ones: refused" || fail "older explicit checkpoint: rc $rc: $(grep error older.log)"
# A finished run without checkpoints is not retrained over (its metrics and final parameters)
# unless run.restart = none says so; a new attempt removes `complete` until it completes again.
mpi 1 train deck.ini --train.steps=3 --run.dir=nockpt $common > nockpt.log 2>&1 || fail "run without checkpoints"
mpi 1 train deck.ini --train.steps=3 --run.dir=nockpt $common > nockpt2.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "run.dir 'nockpt' holds a finished run (nockpt/complete) and no checkpoint to resume" nockpt2.log \
  && pass "finished run without checkpoints: refused" || fail "finished run without checkpoints: rc $rc: $(grep error nockpt2.log)"
"$TRIDENT" check deck.ini $common --run.dir=nockpt > check_finished.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "run.dir 'nockpt' holds a finished run" check_finished.log && pass "check: finished" \
  || fail "check: finished: rc $rc: $(grep error check_finished.log)"
env TRIDENT_TEST_NAN_GRADIENT=0:5 "$MPIEXEC" --oversubscribe -np 1 "$TRIDENT" train deck.ini --train.steps=3 \
  --run.dir=nockpt --run.restart=none $common > nan.log 2>&1; rc=$?
[ $rc -eq 3 ] && [ ! -e nockpt/complete ] && pass "an attempt that does not finish leaves no complete" \
  || fail "complete after a failed attempt: rc $rc, $(ls nockpt)"
# trident check says what run.restart would do, and refuses what train would (one process). A
# refusal comes after the report, as the last line, with stdout and stderr in one file (it was
# once written before the buffered report, landing inside one of its lines).
check_restart() {  # NAME EXPECTED_RC TEXT ARGS...
  local name=$1 want=$2 text=$3; shift 3
  "$TRIDENT" check deck.ini $common "$@" > "check_$name.log" 2>&1; local rc=$?
  [ $rc -eq "$want" ] && grep -q "$text" "check_$name.log" \
    && { [ "$want" -eq 0 ] || tail -n 1 "check_$name.log" | grep -q "^trident: error: .*$text"; } && pass "check: $name" \
    || fail "check: $name: rc $rc: $(grep -E 'error|restart:' "check_$name.log")"
}
check_restart resume 0 "^restart: auto: would resume from keep/checkpoints/step-000000010.h5 after step 10" --run.dir=keep
check_restart none 2 "run.restart = none, but checkpoint.dir 'keep/checkpoints' holds 2" --run.dir=keep --run.restart=none
check_restart older 2 "resumes after step 8, but" --run.dir=keep --run.restart=keep/checkpoints/step-000000008.h5
check_restart changed 2 "run.restart: optim.weight_decay = 0.01 differs from 0.1" --run.dir=keep --optim.weight_decay=0.01
check_restart fresh 0 "^restart: auto: no checkpoint in fresh/checkpoints: a fresh start" --run.dir=fresh
# One training at a time in a run.dir (src/app/run_dir_lock.h): a second one is refused while the
# first runs, naming it, and nothing of the first is touched; once the first has ended (killed
# here: the kernel drops the lock), the directory takes a run again.
mpi 2 train deck.ini --train.steps=100000 --run.dir=locked $common > first.log 2>&1 &
first=$!
for _ in $(seq 100); do [ -s locked/config.ini ] && break; sleep 0.1; done
config_before=$(md5sum < locked/config.ini)
mpi 2 train deck.ini --train.steps=5 --run.dir=locked $common > second.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: run.dir 'locked' is in use by another training (host .*, pid [0-9]*, since " second.log \
  && [ "$(md5sum < locked/config.ini)" = "$config_before" ] \
  && pass "a second training in a busy run.dir: exit 2 naming the first, its config.ini untouched" \
  || fail "second training: rc $rc: $(grep -m2 'error' second.log)"
"$TRIDENT" check deck.ini --train.steps=5 --run.dir=locked $common > check_locked.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^warning: run.dir 'locked' is in use by another training (host .*, pid [0-9]*, since .*): train would stop" check_locked.log \
  && pass "check warns of the busy run.dir, exit 0" || fail "check of a busy run.dir: rc $rc: $(grep -m2 'warning\|error' check_locked.log)"
kill -9 $first 2>/dev/null; pkill -9 -f "run.dir=locked" 2>/dev/null; wait $first 2>/dev/null
mpi 2 train deck.ini --train.steps=2 --run.dir=locked --run.restart=none $common > third.log 2>&1 \
  && pass "after the first ended: the run.dir takes a run again" || fail "after the lock's holder died: $(grep -m2 error third.log)"
# A missing explicit checkpoint is a user error on every rank.
mpi 2 train deck.ini --run.restart=nowhere.h5 $common > missing.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "run.restart = 'nowhere.h5'" missing.log && pass "missing checkpoint: exit 2" \
  || fail "missing checkpoint: rc $rc: $(cat missing.log)"
finish
