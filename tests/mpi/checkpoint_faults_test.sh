# Checkpoints that go wrong (docs/checkpoint-format.md), on 2 ranks (dp = 2):
# - a flipped byte inside a tensor of the newest checkpoint, and a truncated newest checkpoint:
#   each reported (file and reason), set aside as .bad (as .bad.2 where a .bad of that step is
#   already there, which is kept), and the previous checkpoint used; the continued run's losses
#   are bit-identical to an uninterrupted run;
# - kill -9 of one rank halfway through writing a checkpoint: the next run resumes from the
#   previous complete checkpoint and finishes with the same losses;
# - a checkpoint with a missing tensor, and one of another model: exit 2 on every rank naming
#   the file and tensor, or the key and both values;
# - run.restart = auto when every checkpoint failed verification: exit 2, not a silent fresh start;
# - damaged attributes (step, loss_scale) set aside like damaged tensors; latest that cannot be
#   updated: exit 2, the new checkpoint kept.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
common="--optim.decay_steps=20 --train.eval_batches=0 --parallel.dp=2"

# resumed_from LOG STEP: the log says it resumed from step-STEP.
resumed_from() { grep -q "^restart: resuming from .*step-$(printf %09d "$2").h5 after step $2" "$1"; }

# same_tail NAME DIR: DIR's losses equal the uninterrupted run's, bit for bit: every row, so
# that rows the resume should have dropped (steps past its checkpoint, left from the run before)
# fail too, not only the last 10 (the steps must match row by row).
same_tail() {
  "$CHECK_METRICS" compare straight/metrics.jsonl "$2/metrics.jsonl" loss 0 > "$1.compare.txt"
}

mpi 2 train deck.ini --train.steps=20 --run.dir=straight $common > straight.log 2>&1 || { tail -5 straight.log; fail "straight run"; }
mpi 2 train deck.ini --train.steps=15 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=base $common > base.log 2>&1 \
  || { tail -5 base.log; fail "base run"; }
newest=checkpoints/step-000000015.h5

# A flipped byte in the middle of a tensor's data, where an earlier copy of the same step was set
# aside before (a rerun wrote step 15 again and it went bad again): that one must be kept.
cp -r base flip && flip_byte "flip/$newest" block0.mlp.up.weight 301 && echo earlier > "flip/$newest.bad"
mpi 2 train deck.ini --train.steps=20 --run.dir=flip $common > flip.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^restart: skipping .*step-000000015.h5: .*tensor 'block0.mlp.up.weight' fails its checksum.*set aside as step-000000015.h5.bad.2;" flip.log \
  && resumed_from flip.log 10 && [ -f "flip/$newest.bad.2" ] && [ "$(cat "flip/$newest.bad")" = earlier ] && same_tail flip flip \
  && pass "flipped byte: reported, set aside as .bad.2 beside the earlier .bad, resumed from step 10, losses bit-identical" \
  || fail "flipped byte: rc $rc: $(grep -m3 '^restart\|error' flip.log)"

# A truncated file (a crash of the file system, a copy cut short).
cp -r base trunc && truncate -s 200000 "trunc/$newest"
mpi 2 train deck.ini --train.steps=20 --run.dir=trunc $common > trunc.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^restart: skipping .*step-000000015.h5: .*truncated: 200000 of its [0-9]* bytes are there.*set aside as step-000000015.h5.bad;" trunc.log \
  && resumed_from trunc.log 10 && [ -f "trunc/$newest.bad" ] && same_tail trunc trunc \
  && pass "truncated file: reported, set aside as .bad, resumed from step 10, losses bit-identical" \
  || fail "truncated file: rc $rc: $(grep -m3 '^restart\|error' trunc.log)"

# damaged_attribute DIR ATTR VALUE REASON: the newest checkpoint with attribute ATTR set to VALUE
# (a numpy expression; `del`: deleted), metadata the tensors' checksums do not cover, is reported
# with REASON, set aside, and the run resumes from step 10 with the uninterrupted run's losses.
damaged_attribute() {
  local edit="f.attrs['$2'] = $3"
  [ "$3" = del ] && edit="del f.attrs['$2']"
  cp -r base "$1" && /usr/bin/python3 -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); $edit; f.close()" "$1/$newest"
  mpi 2 train deck.ini --train.steps=20 --run.dir="$1" $common > "$1.log" 2>&1; rc=$?
  [ $rc -eq 0 ] && grep -q "^restart: skipping .*step-000000015.h5: .*$4; set aside as step-000000015.h5.bad;" "$1.log" \
    && resumed_from "$1.log" 10 && same_tail "$1" "$1" \
    && pass "$2 attribute $3: reported, set aside, resumed from step 10, losses bit-identical" \
    || fail "$2 attribute: rc $rc: $(grep -m3 '^restart\|error' "$1.log")"
}
# A step that disagrees with the name: resuming at step 13 would replay two steps on step 15's
# tensors. A loss scale that is not a finite positive number: every fp16 step of the restart
# would overflow or underflow.
damaged_attribute stepattr step "numpy.int64(13)" "its step attribute is 13 where its name says 15 (damaged metadata)"
damaged_attribute scaleattr loss_scale "numpy.float64('nan')" "its loss_scale attribute is nan (damaged metadata)"
# Without its deck the restart cannot check the model, optimizer and seed against it (it resumed
# under any deck); without samples the data position is lost.
damaged_attribute nodeck deck del "no deck attribute (damaged metadata)"
damaged_attribute nosamples samples del "no samples attribute (damaged metadata)"

# A saved deck that does not read back (damaged metadata): train and check refuse it naming the
# checkpoint (check once called it unreadable and said train would set it aside).
cp -r base baddeck && /usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['deck'] = '[model]\nlayers = abc\n'; f.close()" "baddeck/$newest"
mpi 2 train deck.ini --train.steps=20 --run.dir=baddeck $common > baddeck.log 2>&1; rc=$?
"$TRIDENT" check deck.ini --ranks 2 --train.steps=20 --run.dir=baddeck $common > baddeck_check.log 2>&1; check_rc=$?
[ $rc -eq 2 ] && [ $check_rc -eq 2 ] \
  && grep -q "^trident: error: checkpoint 'baddeck/$newest': its saved deck does not read back (model.layers = 'abc' is not an integer" baddeck.log \
  && grep -q "^trident: error: checkpoint 'baddeck/$newest': its saved deck does not read back" baddeck_check.log \
  && pass "a saved deck that does not read back: train and check exit 2 naming the checkpoint" \
  || fail "saved deck: train rc $rc, check rc $check_rc: $(grep -m1 error baddeck.log) / $(grep -m1 'error\|warning' baddeck_check.log)"

# A checkpoint directory that cannot be written is found at start-up, before any step.
mkdir -p rofs && echo x > rofs/blocker
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.dir="$PWD/rofs/blocker/ck" --run.dir=rofs/run $common \
  > rofs.log 2> rofs.err; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: checkpoint.dir '$PWD/rofs/blocker/ck': cannot be created: '$PWD/rofs/blocker' is a file" rofs.err \
  && ! grep -q "^step " rofs.log && pass "unwritable checkpoint.dir: exit 2 at start-up, no step trained" \
  || fail "unwritable checkpoint.dir: rc $rc: $(cat rofs.err) $(grep -m3 '^step' rofs.log)"
# (The error lines are read from stderr alone: mpirun forwards a rank's stdout and stderr apart,
# so in one file an error may land inside a line of the start-up report.)
# A file in checkpoint.dir's place, named as such (it was read as a directory without
# checkpoints: here a finished run without any, "run.restart = none to train it again").
mkdir -p ckfile && cp base/metrics.jsonl base/config.ini ckfile/ && touch ckfile/complete && echo x > ckfile/checkpoints
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --run.dir=ckfile $common > ckfile.log 2> ckfile.err; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: checkpoint.dir 'ckfile/checkpoints': cannot be created: 'ckfile/checkpoints' is a file, not a directory$" ckfile.err \
  && pass "a file in checkpoint.dir's place: named" || fail "a file as checkpoint.dir: rc $rc: $(cat ckfile.err)"

# A directory named like a checkpoint the run will write (a user's unpacked copy): the rename
# that publishes step 20 could not replace it, so train and check refuse it at start-up, not 20
# steps in.
mkdir -p ckclash/checkpoints/step-000000020.h5
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --run.dir=ckclash $common > ckclash.log 2> ckclash.err; rc=$?
"$TRIDENT" check deck.ini --ranks 2 --train.steps=20 --checkpoint.every=5 --run.dir=ckclash $common \
  > ckclash_check.log 2>&1; check_rc=$?
clash="checkpoint.dir 'ckclash/checkpoints': 'step-000000020.h5' is a directory, where the run would write the checkpoint of step 20"
[ $rc -eq 2 ] && [ $check_rc -eq 2 ] && grep -q "^trident: error: $clash" ckclash.err \
  && grep -q "^trident: error: $clash" ckclash_check.log && ! grep -q "^step " ckclash.log \
  && pass "a directory in a future checkpoint's place: train and check exit 2 at start-up, naming it" \
  || fail "a directory as a future checkpoint: train rc $rc, check rc $check_rc: $(cat ckclash.err) / $(grep -m1 error ckclash_check.log)"

# latest cannot be updated (here latest.tmp is a directory; in the field, a disk out of inodes):
# exit 2 with the system's reason, and the checkpoint just written is kept for the next restart.
cp -r base latestdir && mkdir latestdir/checkpoints/latest.tmp
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=latestdir $common \
  > latestdir.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: checkpoint.dir '.*': cannot update latest (cannot create latest.tmp: Is a directory)" latestdir.log \
  && [ -f latestdir/checkpoints/step-000000020.h5 ] && pass "latest not updatable: exit 2 naming latest.tmp's reason, step 20's file kept" \
  || fail "latest not updatable: rc $rc: $(grep -m3 'error' latestdir.log)"

# kill -9 of rank 1 halfway through its writes of the step-15 checkpoint (tests/tools/io_faults.c
# raises SIGKILL in place of the write that would pass 120000 bytes, of the 245056 that rank 1
# writes to a checkpoint of this run).
cp -r base killed && rm killed/checkpoints/step-000000015.h5 && echo step-000000010.h5 > killed/checkpoints/latest
LD_PRELOAD="$IO_FAULTS" TRIDENT_TEST_FAULT_RANK=1 TRIDENT_TEST_KILL_AFTER_BYTES=120000 \
  mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=killed $common > killed.log 2>&1; rc=$?
[ $rc -ne 0 ] && [ -f killed/checkpoints/step-000000015.h5.tmp ] && [ ! -f killed/checkpoints/step-000000015.h5 ] \
  && [ "$(cat killed/checkpoints/latest)" = step-000000010.h5 ] \
  && pass "kill -9 during the write: job failed (rc $rc), partial .tmp only, latest unchanged" \
  || fail "kill -9 during the write: rc $rc, $(ls killed/checkpoints)"
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=killed $common > rerun.log 2>&1; rc=$?
[ $rc -eq 0 ] && resumed_from rerun.log 10 && same_tail killed killed && [ ! -e killed/checkpoints/step-000000015.h5.tmp ] \
  && [ -f killed/checkpoints/step-000000015.h5 ] && pass "after kill -9: resumed from step 10, same losses, no .tmp left" \
  || fail "after kill -9: rc $rc: $(grep -m3 '^restart\|error' rerun.log)"

# An I/O error on rank 1 alone inside the collective write of step 20's checkpoint (a failing
# disk; tests/tools/io_faults.c fails its writes to *.h5.tmp with EIO): every rank exits 2 with
# one line naming the file, and no hang. Closing the file collectively after the failure waited
# for good (the ranks' HDF5 states differ), until run.stall_timeout ended the job with exit 4.
# The temporary file is removed, latest still names step 15, and the rerun resumes from it.
cp -r base eio
LD_PRELOAD="$IO_FAULTS" TRIDENT_TEST_FAULT_RANK=1 TRIDENT_TEST_FAIL_WRITES_AFTER_BYTES=0 \
  mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=eio --run.stall_timeout=60 \
  $common > eio.log 2> eio.err; rc=$?
[ $rc -eq 2 ] && [ "$(grep -c '^trident: error' eio.err)" -eq 1 ] \
  && grep -q "^trident: error: parameter file 'eio/checkpoints/step-000000020.h5': writing tensor '.*' failed" eio.err \
  && [ "$(cat eio/checkpoints/latest)" = step-000000015.h5 ] && [ ! -e eio/checkpoints/step-000000020.h5 ] \
  && [ ! -e eio/checkpoints/step-000000020.h5.tmp ] \
  && pass "EIO on one rank during the write: exit 2 with one line, no hang, latest unchanged, no .tmp" \
  || fail "EIO on one rank during the write: rc $rc: $(grep -m2 'trident:' eio.err) $(ls eio/checkpoints)"
mpi 2 train deck.ini --train.steps=20 --checkpoint.every=5 --checkpoint.keep=5 --run.dir=eio $common > eio_rerun.log 2>&1; rc=$?
[ $rc -eq 0 ] && resumed_from eio_rerun.log 15 && same_tail eio eio && [ -f eio/checkpoints/step-000000020.h5 ] \
  && pass "after the EIO: resumed from step 15, same losses" \
  || fail "after the EIO: rc $rc: $(grep -m3 '^restart\|error' eio_rerun.log)"

# A missing tensor: not a corrupt file but a wrong one, so an error rather than a fallback.
cp -r base missing && "$REMOVE_DATASET" "missing/$newest" optimizer.v.ln_f.bias
mpi 2 train deck.ini --train.steps=20 --run.dir=missing $common > missing.log 2>&1; rc=$?
[ $rc -eq 2 ] && [ "$(grep -c "step-000000015.h5': tensor 'optimizer.v.ln_f.bias' is missing" missing.log)" -ge 1 ] \
  && pass "missing tensor: exit 2 naming the file and tensor" || fail "missing tensor: rc $rc: $(tail -3 missing.log)"

# A checkpoint of another model.
mpi 2 train deck.ini --train.steps=20 --run.dir=base --model.hidden=48 $common > other.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "model.hidden = 48 differs from 32" other.log && pass "other model: exit 2 naming the key" \
  || fail "other model: rc $rc: $(tail -3 other.log)"

# Every checkpoint corrupt: refuse rather than start afresh.
# trident check refuses it too, before train has set it aside and after (it once warned and
# exited 0, then named a finished run).
mkdir -p allbad/checkpoints && cp base/checkpoints/step-000000005.h5 allbad/checkpoints/ \
  && truncate -s 1000 allbad/checkpoints/step-000000005.h5
"$TRIDENT" check deck.ini --ranks 2 --train.steps=20 --run.dir=allbad $common > allbad_check.log 2>&1; check_rc=$?
mpi 2 train deck.ini --train.steps=20 --run.dir=allbad $common > allbad.log 2>&1; rc=$?
"$TRIDENT" check deck.ini --ranks 2 --train.steps=20 --run.dir=allbad $common > allbad_check2.log 2>&1; check_rc2=$?
mpi 2 train deck.ini --train.steps=20 --run.dir=allbad $common > allbad2.log 2> allbad2.err; rc2=$?
[ $rc -eq 2 ] && [ $rc2 -eq 2 ] && grep -q "no checkpoint in .* verifies" allbad.log && grep -q "no checkpoint in .* verifies" allbad2.err \
  && pass "no checkpoint verifies: exit 2 (also on the next attempt)" || fail "no checkpoint verifies: rc $rc/$rc2: $(tail -2 allbad.log)"
[ $check_rc -eq 2 ] && [ $check_rc2 -eq 2 ] \
  && grep -q "^trident: error: run.restart = auto: no checkpoint in allbad/checkpoints verifies (1 set aside as \*.bad; the newest: .*truncated" allbad_check.log \
  && [ "$(tail -1 allbad_check2.log)" = "$(grep '^trident: error' allbad2.err)" ] \
  && pass "check: no checkpoint verifies, before and after train set it aside, with train's line" \
  || fail "check, no checkpoint verifies: rc $check_rc/$check_rc2: $(tail -1 allbad_check.log) / $(tail -1 allbad_check2.log)"
# An explicit run.restart that is no HDF5 file: check and train say it with the same line.
echo "not hdf5" > notckpt.h5
"$TRIDENT" check deck.ini --ranks 2 --train.steps=20 --run.dir=notckpt --run.restart=notckpt.h5 $common > notckpt_check.log 2>&1
mpi 2 train deck.ini --train.steps=20 --run.dir=notckpt --run.restart=notckpt.h5 $common > notckpt.log 2> notckpt.err; rc=$?
[ $rc -eq 2 ] && grep -q "^trident: error: run.restart = 'notckpt.h5' cannot be used: " notckpt.err \
  && [ "$(tail -1 notckpt_check.log)" = "$(grep '^trident: error' notckpt.err)" ] \
  && pass "an explicit run.restart that is no HDF5 file: check and train alike" \
  || fail "explicit non-HDF5 restart: rc $rc: $(tail -1 notckpt_check.log) / $(cat notckpt.err)"
finish
