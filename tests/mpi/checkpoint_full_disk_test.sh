# A full disk while writing a checkpoint (docs/checkpoint-format.md): checkpoint.dir on a small
# tmpfs that holds one or two checkpoints of the tiny model but not three. The write that does
# not fit fails with one line naming the file and the reason, exit 2 on every rank; no .tmp is
# left; `latest` and the checkpoint it names are intact, and a restart from it finishes with
# the losses of an uninterrupted run.
# Mounting needs root with CAP_SYS_ADMIN: without it the test reports itself skipped (77).
# A run killed at its timeout may have left the tmpfs mounted, which lib.sh could not remove.
umount "$WORK_DIR/small" 2>/dev/null || true
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
common="--optim.decay_steps=20 --train.eval_batches=0 --parallel.dp=2"
mkdir -p small
if ! mount -t tmpfs -o size=1100k tmpfs small 2>/dev/null; then
  echo "SKIPPED: cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)"
  exit 77
fi
trap 'umount "$WORK_DIR/small"' EXIT

mpi 2 train deck.ini --train.steps=20 --run.dir=straight $common > straight.log 2>&1 || { tail -5 straight.log; fail "straight run"; }
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.dir="$WORK_DIR/small/ck" --run.dir=full \
  $common > full.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "error: .*step-[0-9]*.h5'.*No space left on device" full.log \
  && pass "full disk: exit 2: $(grep -m1 'error:' full.log | cut -c1-220)" || fail "full disk: rc $rc: $(tail -3 full.log)"
survivor=$(cat small/ck/latest)
step=$(echo "$survivor" | sed 's/^step-0*\([0-9]*\)\.h5$/\1/')
[ -f "small/ck/$survivor" ] && [ -z "$(ls small/ck | grep '\.tmp$')" ] && [ "$step" -ge 5 ] \
  && pass "no .tmp left; latest names $survivor" || fail "after the full disk: $(ls small/ck)"
# The surviving checkpoint restarts the run (on a disk with room) to the same losses.
mkdir -p roomy && cp -r small/ck roomy/checkpoints && cp full/metrics.jsonl roomy/
mpi 2 train deck.ini --train.steps=20 --run.dir=roomy $common > roomy.log 2>&1; rc=$?
tail -n $((20 - step)) straight/metrics.jsonl > ref.jsonl && tail -n $((20 - step)) roomy/metrics.jsonl > got.jsonl
[ $rc -eq 0 ] && grep -q "resuming from .*$survivor after step $step" roomy.log \
  && "$CHECK_METRICS" compare ref.jsonl got.jsonl loss 0 >/dev/null \
  && pass "restart from $survivor: $((20 - step)) losses bit-identical" || fail "restart after the full disk: rc $rc"

# prepare and export into a full disk: exit 2 with the sizes, nothing left behind (prepare wrote
# zeros with exit 0, export crashed in MPI_Finalize with 139 after its line).
dd if=/dev/zero of=small/fill bs=1k count=2000 2>/dev/null
"$TRIDENT" prepare synthetic --output small/p.h5 --tokens 100000 > prep_full.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: dataset 'small/p.h5': not enough space on its disk (needs" prep_full.log \
  && [ -z "$(ls small | grep 'p.h5')" ] && pass "prepare into a full disk: exit 2, nothing left" \
  || fail "prepare into a full disk: rc $rc: $(tail -2 prep_full.log) $(ls small)"
mpi 2 export "$WORK_DIR/roomy/checkpoints/$survivor" small/x.h5 > export_full.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: parameter file 'small/x.h5': not enough space on its disk" export_full.log \
  && ! grep -q "Segmentation\|signal" export_full.log && [ -z "$(ls small | grep 'x.h5')" ] \
  && pass "export into a full disk on 2 ranks: exit 2, no crash, nothing left" \
  || fail "export into a full disk: rc $rc: $(grep -m3 'error\|Segm' export_full.log)"
rm -f small/fill

# A read-only checkpoint.dir is refused at start-up, not after checkpoint.every steps.
rm -rf small/ck && mkdir small/empty
if mount -o remount,ro small 2>/dev/null; then
  mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.dir="$WORK_DIR/small/empty" --run.dir=ro \
    $common > ro.log 2>&1; rc=$?
  mount -o remount,rw small
  [ $rc -eq 2 ] && grep -q "^trident: error: checkpoint.dir '$WORK_DIR/small/empty': cannot create a file there (Read-only file system): the first checkpoint would fail" ro.log \
    && ! grep -q "^step " ro.log && pass "read-only checkpoint.dir: exit 2 before any step" \
    || fail "read-only checkpoint.dir: rc $rc: $(grep -m2 'error\|^step' ro.log)"
else
  fail "could not remount the tmpfs read-only"
fi
finish
