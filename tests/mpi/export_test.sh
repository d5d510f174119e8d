# trident export (docs/export.md): the model weights of a checkpoint written on (dp 2, tp 2),
# exported by one process and under mpirun on 2 ranks:
# - exit 0 and the one summary line (once, whatever the ranks);
# - no optimizer state; wte cut from the tp = 2 padded vocabulary (48 rows) to the real 33;
#   the model attributes and the source, no layout attributes (dp, tp, pp, padded_vocab);
# - every tensor bit-identical to final-params.h5 of the same step (the run ends at the
#   checkpoint), on the common rows of wte, whose extra padded rows there are zero;
# - docs/export.md's Python (the numpy forward, the Hugging Face renaming) run on the export
#   gives trident's validation loss; the h5py snippets of param-file.md and checkpoint-format.md run;
# and the user errors: missing checkpoint, a file that is not a checkpoint (the token dataset,
# final-params.h5 without a deck), a checkpoint missing a tensor, an OUT that cannot be written,
# whose write fails (EIO) or that is the checkpoint, wrong arguments: exit 2 with one line naming
# the file; and
# run.restart given final-params.h5, an export or a directory: exit 2 saying which it is.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini

mpi 4 train deck.ini --parallel.tp=2 --parallel.dp=2 --checkpoint.every=10 > train.log 2>&1 \
  || { tail -5 train.log; fail "training on (dp 2, tp 2)"; finish; }
checkpoint="run/checkpoints/step-000000010.h5"
"$CHECK_METRICS" describe "$checkpoint" > checkpoint.txt || fail "describe $checkpoint"
grep -qx "wte \[48, 32\]" checkpoint.txt && grep -q "^optimizer\.m\.wte " checkpoint.txt \
  && pass "checkpoint: wte padded for tp = 2, optimizer state present" || fail "checkpoint: $(grep wte checkpoint.txt)"

# export_ok NAME LOG: the export into NAME.h5 succeeded, printed its line once, holds the model.
export_ok() {
  local name=$1 log=$2
  grep -qx "export: 28 tensors, 27552 parameters (0.1 MB) from $checkpoint at step 10 -> $name.h5" "$log" \
    && [ "$(grep -c '^export:' "$log")" -eq 1 ] && pass "$name: summary line" || fail "$name: summary: $(cat "$log")"
  "$CHECK_METRICS" describe "$name.h5" > "$name.txt" || { fail "describe $name.h5"; return; }
  [ "$(grep -vc '^@' "$name.txt")" -eq 28 ] && ! grep -q "^optimizer\." "$name.txt" \
    && pass "$name: 28 model tensors, no optimizer state" || fail "$name: datasets: $(grep -v '^@' "$name.txt")"
  grep -qx "wte \[33, 32\]" "$name.txt" && grep -qx "wpe \[32, 32\]" "$name.txt" \
    && grep -qx "block1.attn.qkv.weight \[3, 32, 32\]" "$name.txt" \
    && pass "$name: wte [vocab, C], wpe [context, C], qkv [3, C, C]" || fail "$name: shapes: $(head -3 "$name.txt")"
  local missing=""
  for attribute in "@step = 10" "@vocab = 33" "@layers = 2" "@heads = 2" "@hidden = 32" "@context = 32" \
                   "@format = trident-params" "@format_version = 2" "@checksum_algorithm = sum64-splitmix64-v1" \
                   "@source = $checkpoint"; do
    grep -qx "$attribute" "$name.txt" || missing="$missing '$attribute'"
  done
  grep -q "^@deck = [1-9][0-9]* lines$" "$name.txt" || missing="$missing @deck"
  [ -z "$missing" ] && pass "$name: attributes" || fail "$name: attributes missing:$missing"
  # docs/export.md: no layout attributes, wte has exactly vocab rows.
  ! grep -qE "^@(dp|tp|pp|padded_vocab) = " "$name.txt" && pass "$name: no layout attributes" \
    || fail "$name: layout attributes: $(grep -E '^@(dp|tp|pp|padded_vocab)' "$name.txt")"
  "$CHECK_METRICS" compare-params run/final-params.h5 "$name.h5" 0 > "$name.compare.txt" \
    && pass "$name: every tensor bit-identical to final-params.h5" || fail "$name: $(cat "$name.compare.txt")"
}

# One process without mpirun (Open MPI's singleton start), then 2 ranks: rank 0 works alone.
if "$TRIDENT" export "$checkpoint" single.h5 > single.log 2>&1; then export_ok single single.log
else fail "export on one process: $(cat single.log)"; fi
if mpi 2 export "$checkpoint" two.h5 > two.log 2>&1; then export_ok two two.log
else fail "export on 2 ranks: $(cat two.log)"; fi

# docs/export.md's Python, run as written on the export (tests/tools/export_forward.py): its
# numpy forward pass, and its Hugging Face renaming fed to a forward in HF's Conv1D layout, each
# give the validation loss trident logged at step 10 for the same parameters and samples
# (eval_batches 1 x global_batch 8 samples of seq_len 16). Tolerance 1e-5: float32 numpy
# against trident's fp32 kernels, summing in other orders (they agreed to 1e-8 when written).
python=""
for candidate in python3 /usr/bin/python3; do
  "$candidate" -c "import h5py, numpy" 2>/dev/null && { python=$candidate; break; }
done
val_loss=$(grep '"step": 10,' run/metrics.jsonl | sed -n 's/.*"val_loss": \([0-9.]*\).*/\1/p')
if [ -z "$python" ]; then
  fail "docs/export.md's Python: no python3 with h5py and numpy (scripts/install-deps.sh installs them)"
elif ! "$python" "$TRIDENT_SOURCE_DIR/tests/tools/export_forward.py" "$TRIDENT_SOURCE_DIR/docs/export.md" single.h5 \
       "$WORK_DIR/tiny.h5" 8 16 > forward.txt 2>&1; then
  fail "docs/export.md's Python failed: $(tail -3 forward.txt)"
else
  for forward in docs_forward hf_layout_forward; do
    loss=$(sed -n "s/^$forward //p" forward.txt)
    awk -v a="${loss:-nan}" -v b="${val_loss:-nan}" 'BEGIN { d = a - b; exit !(a == a + 0 && b == b + 0 && d < 1e-5 && -d < 1e-5) }' \
      && pass "docs/export.md $forward: validation loss $loss, trident's $val_loss" \
      || fail "docs/export.md $forward: validation loss '$loss', trident's '$val_loss'"
  done
  # The h5py snippets of param-file.md and checkpoint-format.md run on this run's files.
  for doc in param-file checkpoint-format; do
    "$python" "$TRIDENT_SOURCE_DIR/tests/tools/run_doc_python.py" "$TRIDENT_SOURCE_DIR/docs/$doc.md" \
      "step-000001000.h5=step-000000010.h5" > "$doc.python.txt" 2>&1 \
      && pass "docs/$doc.md: its Python runs" || fail "docs/$doc.md: its Python: $(tail -3 "$doc.python.txt")"
  done
fi

# expect_error NAME NP TEXT ARGS...: `trident ARGS` on one process (NP = 1, no mpirun) or on NP
# ranks must exit 2 on every rank, with one "trident: error:" line containing TEXT on rank 0's
# stderr and nothing on the others'.
expect_error() {
  local name=$1 np=$2 text=$3; shift 3
  rm -f err.* status.txt
  if [ "$np" -eq 1 ]; then
    "$TRIDENT" "$@" > /dev/null 2> err.0; echo "rank 0 exit $?" > status.txt
  else
    timeout 60 "$MPIEXEC" --oversubscribe -np "$np" bash -c \
      '"$0" "$@" 2>err.$OMPI_COMM_WORLD_RANK >/dev/null; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >>status.txt' \
      "$TRIDENT" "$@" > mpirun.out 2>&1
  fi
  local before=$failures
  [ "$(grep -c "exit 2$" status.txt 2>/dev/null)" = "$np" ] || fail "$name: expected exit 2 on $np rank(s): $(cat status.txt)"
  [ "$(wc -l < err.0)" -eq 1 ] && grep -q "^trident: error: .*$text" err.0 \
    || fail "$name: expected one error line with '$text', got: $(cat err.0)"
  for f in err.*; do [ "$f" = err.0 ] || [ ! -s "$f" ] || fail "$name: rank ${f#err.} printed: $(cat "$f")"; done
  [ "$failures" -eq "$before" ] && pass "$name: $(cat err.0)"
}
expect_error missing 1 "checkpoint 'nowhere.h5': no such file" export nowhere.h5 out.h5
expect_error missing_on_2_ranks 2 "checkpoint 'nowhere.h5': no such file" export nowhere.h5 out.h5
ln -s loop loop  # a path whose lookup fails: its reason, not "no such file"
expect_error lookup 1 "checkpoint 'loop/step-1.h5': cannot look it up (Too many levels of symbolic links)" \
  export loop/step-1.h5 out.h5
expect_error directory 1 "checkpoint 'run/checkpoints' is a directory: give one of its step-N.h5 files" export run/checkpoints out.h5
expect_error token_file 1 "$WORK_DIR/tiny.h5" export "$WORK_DIR/tiny.h5" out.h5
expect_error final_params 1 "'run/final-params.h5' has no 'deck' attribute" export run/final-params.h5 out.h5
# An I/O error while OUT is written (tests/tools/io_faults.c fails rank 0's writes with EIO): exit
# 2 on every rank with one error line, no OUT and no OUT.tmp. HDF5 crashed in MPI_Finalize
# (SIGSEGV, exit 139) on the file the failed write left behind; export now ends without it.
rm -f status.txt err.*
LD_PRELOAD="$IO_FAULTS" TRIDENT_TEST_FAULT_RANK=0 TRIDENT_TEST_FAIL_WRITES_AFTER_BYTES=0 timeout 60 "$MPIEXEC" \
  --oversubscribe -np 2 bash -c \
  '"$0" "$@" 2>err.$OMPI_COMM_WORLD_RANK >/dev/null; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >>status.txt' \
  "$TRIDENT" export "$checkpoint" eio.h5 > mpirun.out 2>&1
[ "$(grep -c "exit 2$" status.txt 2>/dev/null)" = 2 ] && [ "$(grep -c '^trident: error' err.0)" -eq 1 ] \
  && grep -q "^trident: error: parameter file 'eio.h5': writing tensor '.*' failed" err.0 \
  && ! grep -q "Segmentation fault\|Process received signal" err.* mpirun.out && [ ! -e eio.h5 ] && [ ! -e eio.h5.tmp ] \
  && pass "EIO while writing OUT: exit 2 on both ranks, one line, no crash, no OUT or .tmp" \
  || fail "EIO while writing OUT: $(tr '\n' ' ' < status.txt) $(grep -m2 'trident\|Segm' err.0) $(ls eio.h5* 2>/dev/null)"

# A checkpoint that lacks a tensor of its deck's model (remove_dataset: a tests/tools helper).
if cp "$checkpoint" incomplete.h5 && "$REMOVE_DATASET" incomplete.h5 block1.mlp.down.bias; then
  expect_error missing_tensor 1 "checkpoint 'incomplete.h5': tensor 'block1.mlp.down.bias' is missing" \
    export incomplete.h5 out.h5
else
  fail "could not make incomplete.h5"
fi
# A deck attribute naming another, far larger model (no checksum covers the deck): refused from
# the file's shapes before the memory is taken (it was asked for first: std::bad_alloc, exit 1).
cp "$checkpoint" bigdeck.h5 && /usr/bin/python3 -c "
import h5py, re, sys
f = h5py.File(sys.argv[1], 'r+')
deck = f.attrs['deck']
deck = deck.decode() if isinstance(deck, bytes) else deck
deck = re.sub(r'(?m)^hidden = .*$', 'hidden = 65536', re.sub(r'(?m)^heads = .*$', 'heads = 1', deck))
f.attrs['deck'] = deck
f.close()" bigdeck.h5
expect_error other_model_deck 1 "checkpoint 'bigdeck.h5': tensor '[a-z0-9_.]*' has shape \\[.*\\] in the file, where the model's is \\[[0-9]*, 65536\\].*: a file of another model" \
  export bigdeck.h5 out.h5
# A corrupt checkpoint is refused, naming the tensor that fails its checksum.
cp "$checkpoint" corrupt.h5 && flip_byte corrupt.h5 block0.attn.qkv.weight 17
expect_error corrupt 1 "cannot export: parameter file 'corrupt.h5': tensor 'block0.attn.qkv.weight' fails its checksum" \
  export corrupt.h5 out.h5
# OUT's directory is made when missing (as prepare makes --output's); one under a file cannot be.
"$TRIDENT" export "$checkpoint" models/new/out.h5 > nested.log 2>&1 && [ -f models/new/out.h5 ] \
  && pass "OUT in a directory that did not exist" || fail "OUT in a new directory: $(cat nested.log)"
expect_error out_not_writable 1 "OUT 'deck.ini/out.h5': cannot create its directory (Not a directory)" \
  export "$checkpoint" deck.ini/out.h5
expect_error out_is_checkpoint 1 "is the checkpoint itself" export "$checkpoint" "./$checkpoint"
expect_error out_empty 1 "OUT is empty (an unset variable?)" export "$checkpoint" ""
# A damaged step attribute (no checksum covers it) is not exported as the checkpoint's step.
cp "$checkpoint" step-000000010.h5 && /usr/bin/python3 -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['step'] = numpy.int64(-7); f.close()" step-000000010.h5
expect_error negative_step 1 "cannot export: parameter file 'step-000000010.h5': its step attribute is -7 (damaged metadata)" \
  export step-000000010.h5 neg.h5
# An existing OUT that is not an earlier export (a deck, a token file) is left as it is.
cp deck.ini kept.ini
expect_error out_not_an_export 1 "OUT 'kept.ini' exists and is not an earlier export; it is left as it is" export "$checkpoint" kept.ini
cmp -s deck.ini kept.ini && pass "the file OUT named is untouched" || fail "export changed kept.ini"
# The checkpoint under OUT.tmp's name (the name the export writes first) would be overwritten.
cp "$checkpoint" named.h5.tmp
expect_error checkpoint_is_out_tmp 1 "checkpoint 'named.h5.tmp' is named.h5.tmp, the name the export is written under" \
  export named.h5.tmp named.h5
# Another export writing the same OUT (its lock on OUT.tmp held here by flock(1)).
flock busy.h5.tmp sleep 20 &
holder=$!
sleep 0.3
expect_error out_busy 1 "OUT 'busy.h5' is being written by another export (busy.h5.tmp is locked)" export "$checkpoint" busy.h5
kill $holder 2>/dev/null; wait $holder 2>/dev/null
expect_error one_argument 1 "expected 2 arguments" export "$checkpoint"
expect_error three_arguments 2 "expected 2 arguments" export "$checkpoint" a.h5 b.h5
[ ! -e out.h5 ] && [ ! -e out.h5.tmp ] && pass "no file left by a failed export" || fail "a failed export left out.h5"
# Weights-only files and a directory are not restart points: run.restart names what each is.
expect_error restart_final_params 2 "run.restart = 'run/final-params.h5' is not a checkpoint but a parameter file such as final-params.h5" \
  train deck.ini --run.dir=r1 --run.restart=run/final-params.h5
expect_error restart_export 2 "run.restart = 'single.h5' is not a checkpoint but an export of a checkpoint" \
  train deck.ini --run.dir=r2 --run.restart=single.h5
expect_error restart_directory 2 "run.restart = 'run/checkpoints' is a directory: give a checkpoint file in it (the newest: run/checkpoints/step-000000010.h5)" \
  train deck.ini --run.dir=r3 --run.restart=run/checkpoints
out=$("$TRIDENT" export --help) && echo "$out" | grep -q "usage: trident export CHECKPOINT OUT" \
  && pass "export --help" || fail "export --help: $out"
"$TRIDENT" --help | grep -q "export CHECKPOINT OUT" && pass "--help lists export" || fail "--help lacks export"
finish
