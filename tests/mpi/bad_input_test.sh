# Every class of bad input: one line on rank 0 naming the key or file, exit status 2 on every
# rank, no MPI abort, within seconds.
source "$(dirname "$0")/lib.sh"
tiny_deck good.ini

# expect_user_error NAME NP "TEXT" ARGS...: every rank must exit 2, rank 0's stderr must be one
# "trident: error:" line containing TEXT, and nothing may mention an abort.
expect_user_error() {
  local name=$1 np=$2 text=$3; shift 3
  # Each rank reports its own exit status, so "exit 2 on every rank" is checked, not assumed.
  timeout 60 "$MPIEXEC" --oversubscribe -np "$np" bash -c \
    '"$0" "$@" 2>err.$OMPI_COMM_WORLD_RANK >/dev/null; echo "rank $OMPI_COMM_WORLD_RANK exit $?" >>status.txt' \
    "$TRIDENT" "$@" >mpirun.out 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then fail "$name: hung (timeout)"; rm -f status.txt err.*; return; fi
  local twos; twos=$(grep -c "exit 2$" status.txt 2>/dev/null || echo 0)
  [ "$twos" -eq "$np" ] || fail "$name: expected exit 2 on $np ranks, got: $(tr '\n' ' ' < status.txt)"
  local lines; lines=$(wc -l < err.0)
  [ "$lines" -eq 1 ] || fail "$name: expected 1 line on rank 0's stderr, got $lines: $(cat err.0)"
  grep -q "^trident: error: .*$text" err.0 || fail "$name: message lacks '$text': $(cat err.0)"
  for f in err.*; do [ "$f" = err.0 ] || [ ! -s "$f" ] || fail "$name: rank ${f#err.} printed: $(cat "$f")"; done
  if grep -qiE "abort|backtrace|signal" err.* mpirun.out; then fail "$name: abort or stack trace printed"; fi
  [ "$failures" -eq 0 ] && pass "$name: $(cat err.0)"
  rm -f status.txt err.* mpirun.out
}

expect_user_error missing_deck 2 "nosuch.ini" train nosuch.ini
expect_user_error unreadable_deck 2 "cannot read" train "$WORK_DIR"   # a directory is not a deck
expect_user_error unknown_key 2 "train.stepz.*train.steps" train good.ini --train.stepz=5
printf '[train]\nsteps = 5\nbogus_key = 1\n' > unknown.ini
expect_user_error unknown_key_in_deck 2 "train.bogus_key" train unknown.ini
expect_user_error malformed_value 2 "optim.lr" train good.ini --optim.lr=fast
# Batch sizes whose products overflowed 64 bits (a check that passed, then a crash) or whose
# pipeline schedule took gigabytes before any check.
expect_user_error huge_global_batch 1 "train.global_batch = 4611686018427387904 is out of range (must be >= 1 and <= 16777216)" \
  train good.ini --train.global_batch=4611686018427387904 --train.micro_batch=4611686018427387904
expect_user_error too_many_micro_batches 1 "= 4194304 micro-batches a step on each data rank, more than 65536: raise train.micro_batch" \
  train good.ini --train.global_batch=16777216 --train.micro_batch=4
expect_user_error out_of_range 2 "train.micro_batch" train good.ini --train.micro_batch=0
expect_user_error loss_scale_above_2_24 2 "train.loss_scale = 33554432 is out of range (must be >= 1 and <= 16777216)" \
  train good.ini --train.precision=fp16 --train.loss_scale=33554432
expect_user_error bad_choice 2 "run.device" train good.ini --run.device=tpu
# Flash attention: only the CUDA backend has it (after the device is chosen, on every rank).
expect_user_error flash_on_cpu 2 "run.attention = flash: only the CUDA backend" train good.ini --run.device=cpu \
  --run.attention=flash --model.hidden=128 --model.heads=2
expect_user_error bad_precision 2 "train.precision" train good.ini --train.precision=fp8
expect_user_error bad_loss_scale 2 "train.loss_scale" train good.ini --train.precision=fp16 --train.loss_scale=0.5
expect_user_error bad_comm 2 "parallel.comm" train good.ini --parallel.comm=gloo
expect_user_error bad_grad_reduce 2 "parallel.grad_reduce" train good.ini --parallel.grad_reduce=fp8
# run.device = cuda where the node has no GPU (or the build no CUDA): refused on every rank.
if "$TRIDENT" --version | grep -Eq "CUDA: (no|yes \(0 device)"; then
  expect_user_error cuda_without_gpu 2 "run.device = cuda: " train good.ini --run.device=cuda
  expect_user_error cuda_without_gpu_staged 2 "run.device = cuda: " train good.ini --run.device=cuda --parallel.comm=mpi
fi
expect_user_error world_size 3 "parallel.dp" train good.ini --parallel.dp=2
expect_user_error batch_divisibility 2 "train.global_batch = 6 .*(parallel.dp = 2 follows from the 2 ranks of this job; use train.global_batch = 4 or 8, or launch 1 or 3 ranks, so that parallel.dp divides the micro-batches train.global_batch / train.micro_batch = 3)" \
  train good.ini --train.global_batch=6 --train.micro_batch=2
expect_user_error batch_divisibility_dp_set 2 "train.global_batch = 6 .*(use train.global_batch = 4 or 8, or a parallel.dp that divides the micro-batches train.global_batch / train.micro_batch = 3)" \
  train good.ini --train.global_batch=6 --train.micro_batch=2 --parallel.dp=2
expect_user_error heads_tp 2 "model.heads = 2 is not divisible by parallel.tp = 3.*use parallel.tp = 1 or 2" train good.ini \
  --parallel.tp=3 --parallel.dp=1 --model.heads=2 --model.hidden=32
expect_user_error sequence_parallel_rows 2 "train.micro_batch.*train.seq_len.*parallel.tp" train good.ini \
  --parallel.tp=2 --parallel.dp=1 --parallel.sequence_parallel=true --train.micro_batch=1 --train.seq_len=15
expect_user_error fewer_layers_than_stages 4 "model.layers" train good.ini --parallel.pp=4 --parallel.dp=1
# Independent problems come in one line, so that fixing the first does not lead into the next.
expect_user_error two_layout_problems 4 "model.layers = 2 is fewer than parallel.pp = 3 .*; also, parallel.tp \* parallel.pp = 6 does not divide the 4 ranks of this job" \
  train good.ini --parallel.tp=2 --parallel.pp=3
# Sizes whose products overflowed 32 bits (a SIGFPE, or std::vector's length error) before they
# had bounds and 64-bit products.
expect_user_error huge_tp_pp 1 "parallel.tp = 65536 is out of range (must be >= 1 and <= 1024)" train good.ini \
  --parallel.tp=65536 --parallel.pp=65536
expect_user_error huge_dp_product 1 "parallel.dp \* parallel.tp \* parallel.pp = 16777216 \* 1 \* 256 = 4294967296 but the job has 1 rank" \
  train good.ini --parallel.dp=16777216 --parallel.pp=256
expect_user_error stage_list_sum 2 "parallel.stage_layers" train good.ini --parallel.pp=2 --parallel.stage_layers=1,2
expect_user_error stage_list_malformed 2 "parallel.stage_layers" train good.ini --parallel.pp=2 --parallel.stage_layers=1,x
expect_user_error interleaved_layers 2 "virtual stages of parallel.schedule = interleaved; every virtual stage needs at least one layer, and 2 layers cannot give each of the 2 ranks two chunks: use parallel.schedule = 1f1b" \
  train good.ini --parallel.pp=2 --parallel.schedule=interleaved --parallel.virtual_stages=2
expect_user_error interleaved_layers_fewer_chunks 2 "layer: use parallel.virtual_stages <= 2, or parallel.schedule = 1f1b" \
  train good.ini --parallel.pp=2 --model.layers=5 --parallel.schedule=interleaved --parallel.virtual_stages=3
expect_user_error interleaved_micro_batches 2 "multiple of parallel.pp" train good.ini --parallel.pp=2 \
  --model.layers=4 --parallel.schedule=interleaved --train.global_batch=6
expect_user_error interleaved_one_chunk 2 "parallel.virtual_stages = 1 is the 1f1b schedule" train good.ini \
  --parallel.pp=2 --parallel.schedule=interleaved --parallel.virtual_stages=1
expect_user_error interleaved_stage_list 2 "parallel.stage_layers" train good.ini --parallel.pp=2 --model.layers=4 \
  --parallel.schedule=interleaved --parallel.stage_layers=2,2
expect_user_error seq_longer_than_context 2 "train.seq_len" train good.ini --train.seq_len=64
expect_user_error missing_dataset 2 "data.path 'absent.h5': no such file (make one with .trident prepare., or set data.generate = synthetic)" \
  train good.ini --data.path=absent.h5 --data.generate=none
echo "not hdf5" > text.h5
expect_user_error not_a_dataset 2 "text.h5" train good.ini --data.path=text.h5
# A FIFO in a file's place, refused naming its kind: train, check, prepare and export opened it
# and waited for a writer for good.
mkfifo fifo.h5
expect_user_error dataset_fifo 2 "dataset 'fifo.h5' is a FIFO, not a regular file" train good.ini --data.path=fifo.h5
expect_user_error check_dataset_fifo 1 "dataset 'fifo.h5' is a FIFO, not a regular file" check good.ini --data.path=fifo.h5
expect_user_error prepare_output_fifo 1 "--output 'fifo.h5' is a FIFO, not a regular file" \
  prepare synthetic --output fifo.h5 --tokens 1000
expect_user_error restart_fifo 1 "parameter file 'fifo.h5': cannot open (a FIFO, not a regular file)" \
  train good.ini --run.restart=fifo.h5
expect_user_error export_fifo 1 "checkpoint 'fifo.h5': is a FIFO, not a regular file" export fifo.h5 exported.h5
expect_user_error vocab_too_large 2 "model.vocab" train good.ini --model.vocab=20
# A model that no node holds (about 76 TiB for the two ranks): refused on every rank before
# anything of it is allocated, naming the node, the need and what is available.
expect_user_error model_too_large 2 "not enough memory on node .*its 2 ranks need about .* TiB.*available" train good.ini \
  --model.hidden=32768 --model.heads=32 --model.layers=200
expect_user_error unknown_command 1 "frobnicate" frobnicate
expect_user_error check_bad_ranks 1 "ranks" check good.ini --ranks=zero
# A synthetic file to be generated is checked by check as train checks it once made; an existing
# one made with other data.synthetic_* is refused by both instead of silently trained on.
expect_user_error check_synthetic_vocab 1 "its vocabulary of 33 tokens is larger than model.vocab = 17" check good.ini \
  --data.path=fresh.h5 --model.vocab=17
expect_user_error check_synthetic_split 1 "the validation split holds no sample" check good.ini \
  --data.path=fresh.h5 --data.synthetic_tokens=1000 --data.val_fraction=0.01
[ ! -e fresh.h5 ] && pass "check generates no file" || fail "check generated fresh.h5"
expect_user_error stale_synthetic 2 "holds a synthetic source made with other settings (.*20000 tokens.* 40000 tokens" \
  train good.ini --data.synthetic_tokens=40000
expect_user_error check_stale_synthetic 1 "holds a synthetic source made with other settings" check good.ini \
  --data.synthetic_branching=2
# check without the dataset: the layout and the memory anyway (they do not depend on it), and a
# warning that the run would stop (docs/running.md).
out=$("$TRIDENT" check good.ini --data.path=absent.h5 --data.generate=none 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^warning: data.path 'absent.h5': no such file (make one" <<< "$out" \
  && grep -q "^memory per rank" <<< "$out" && pass "check without the dataset: layout and memory, and a warning" \
  || fail "check without the dataset: exit $rc: $out"

# A path whose lookup fails (here a loop of links; also a directory that cannot be searched, a
# name too long): one line naming the key and the system's reason, not an internal error of rank 0.
ln -s loop loop
expect_user_error data_path_lookup 2 "data.path '$PWD/loop/d.h5': cannot look it up (Too many levels of symbolic links)" \
  train good.ini --data.path="$PWD/loop/d.h5"
expect_user_error restart_lookup 2 "run.restart '$PWD/loop/step-1.h5': cannot look it up" \
  train good.ini --run.restart="$PWD/loop/step-1.h5"
out=$("$TRIDENT" check good.ini --data.path="$PWD/loop/d.h5" 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" = "trident: error: data.path '$PWD/loop/d.h5': cannot look it up (Too many levels of symbolic links)" ] \
  && pass "check: a data.path that cannot be looked up" || fail "check, data.path in a loop of links: rc $rc: $out"

# check refuses the directories train could not create (a file in the way) with train's line.
echo x > a_file
for spec in "run.dir|--run.dir=a_file|run.dir 'a_file': cannot be created: 'a_file' is a file" \
            "checkpoint.dir|--checkpoint.dir=$PWD/a_file/ck --checkpoint.every=2|checkpoint.dir '$PWD/a_file/ck': cannot be created" \
            "data.path|--data.path=$PWD/a_file/x.h5 --data.generate=synthetic|data.path's directory '$PWD/a_file': cannot be created"; do
  IFS='|' read -r what overrides text <<< "$spec"
  out=$("$TRIDENT" check good.ini $overrides 2>&1); rc=$?
  trained=$(mpi 1 train good.ini --run.restart=none $overrides 2>&1 >/dev/null | grep "^trident: error:")
  [ $rc -eq 2 ] && grep -q "^trident: error: $text" <<< "$out" && [ "$(tail -1 <<< "$out")" = "$trained" ] \
    && pass "check and train refuse a $what under a file alike" \
    || fail "check, $what under a file: rc $rc: $(tail -1 <<< "$out") / train: $trained"
done
# run.device = cuda where this machine has no GPU: check warns (another machine has one).
if "$TRIDENT" --version | grep -Eq "CUDA: (no|yes \(0 device)"; then
  out=$("$TRIDENT" check good.ini --run.device=cuda 2>&1); rc=$?
  [ $rc -eq 0 ] && grep -q "^warning: run.device = cuda, and this machine has no GPU" <<< "$out" \
    && pass "check: run.device = cuda without a GPU here is a warning" || fail "check, cuda without GPU: rc $rc: $(grep -E 'warning|error' <<< "$out")"
fi

# check warns (exit 0: another machine may hold it) where one rank would not fit this one.
out=$("$TRIDENT" check good.ini --run.device=cpu --model.hidden=32768 --model.heads=32 --model.layers=200 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^warning: on this machine even one rank does not fit: not enough memory on node" <<< "$out" \
  && pass "check: a rank larger than this machine's memory is a warning" || fail "check, memory: exit $rc: $(grep -E 'warning|error' <<< "$out")"
# ... and notes how many ranks a node like this one holds where each fits but all do not
# (1024 ranks of about 1.5 GiB: 1.5 TiB).
out=$("$TRIDENT" check good.ini --run.device=cpu --model.hidden=2048 --model.heads=16 --ranks 1024 \
  --train.global_batch=1024 --train.micro_batch=1 2>&1); rc=$?
[ $rc -eq 0 ] && grep -Eq "^note: memory: [0-9]+ of the 1024 ranks fit in the .* available on a node like this one \(.* each, largest stage\): on such nodes start at most [0-9]+ rank\(s\) per node" <<< "$out" \
  && ! grep -q "^warning: on this machine" <<< "$out" \
  && pass "check: ranks that do not fit one node together are noted" || fail "check, ranks per node: exit $rc: $(grep -E 'note|warning|error' <<< "$out")"

# Without the per-rank wrapper: mpirun itself returns 2, and with -q (which silences mpirun's own
# "a process exited non-zero" notice) the whole output is the one line.
out=$(timeout 60 "$MPIEXEC" -q --oversubscribe -np 2 "$TRIDENT" train good.ini --train.stepz=1 2>&1); rc=$?
[ $rc -eq 2 ] || fail "mpirun -q: exit status $rc, expected 2"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && pass "mpirun -q: one line: $out" || fail "mpirun -q printed: $out"
finish
