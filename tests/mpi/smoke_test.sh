# The executable itself: --help, --version, check, prepare, an empty deck.
source "$(dirname "$0")/lib.sh"
tiny_deck good.ini

out=$("$TRIDENT" --help) && echo "$out" | grep -q "usage: trident" && pass "--help" || fail "--help: $out"
# No command at all is a usage error: the usage on stderr, exit 2.
"$TRIDENT" > bare.out 2> bare.err; rc=$?
[ $rc -eq 2 ] && [ ! -s bare.out ] && grep -q "^usage: trident COMMAND" bare.err && pass "no command: usage on stderr, exit 2" \
  || fail "no command: exit $rc: $(head -2 bare.out bare.err)"
# A warm-up longer than the run is noted with the learning rate it reaches (0.003 * 1/2).
"$TRIDENT" check good.ini --train.steps=1 2>&1 | grep -q "^note: optim.warmup_steps = 2 is more than train.steps = 1: the learning rate rises to 0.0015 at the last step" \
  && pass "warm-up longer than the run: noted" || fail "warm-up longer than the run: no note"
# mpirun's binding: where it left rank 0 one CPU of a larger node, a note says how to unbind;
# with --bind-to none there is none.
"$MPIEXEC" --oversubscribe -np 1 "$TRIDENT" train good.ini --train.steps=1 --run.dir=bound > bound.log 2>&1
"$MPIEXEC" --oversubscribe --bind-to none -np 1 "$TRIDENT" train good.ini --train.steps=1 --run.dir=unbound > unbound.log 2>&1
if grep -q "^backend: cpu (OpenBLAS, 1 thread)" bound.log && [ "$(nproc --all)" -gt 1 ]; then
  grep -q "^note: mpirun bound each rank to 1 CPU(s), fewer than the .* add --bind-to none" bound.log \
    && pass "binding note where mpirun bound one rank to one CPU" || fail "no binding note: $(grep -E '^(backend|note)' bound.log)"
else
  echo "skip: binding note: this mpirun did not bind the rank to one CPU of several ($(grep '^backend' bound.log))"
fi
! grep -q "^note: mpirun bound" unbound.log && pass "no binding note with --bind-to none" \
  || fail "binding note with --bind-to none: $(grep '^note' unbound.log)"
# An option of check given twice is named as such (it would reach the deck as an unknown key).
out=$("$TRIDENT" check good.ini --ranks 2 --ranks 3 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "option --ranks given twice ('2' and '3')" <<< "$out" && pass "check --ranks twice" \
  || fail "check --ranks twice: exit $rc: $out"
# Each command's own help, before or after the deck, on every rank (exit 0, nothing trained).
out=$("$TRIDENT" train --help) && echo "$out" | grep -q "^usage: trident train DECK" && pass "train --help" \
  || fail "train --help: $out"
out=$(mpi 2 train good.ini --run.dir=helped -h) && [ "$(echo "$out" | grep -c "^usage: trident train DECK")" = 1 ] \
  && [ ! -e helped ] && pass "train DECK -h on 2 ranks: one usage, no run" || fail "train DECK -h: $out"
out=$("$TRIDENT" check good.ini --train.steps=9 --get train.steps) && [ "$out" = 9 ] && pass "check --get: the resolved value alone" \
  || fail "check --get: $out"
out=$("$TRIDENT" check good.ini --get train.stpes 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "did you mean train.steps" && pass "check --get of an unknown key: exit 2, the nearest key" \
  || fail "check --get unknown key: rc $rc: $out"
out=$("$TRIDENT" check good.ini --help) && echo "$out" | grep -q "^usage: trident check DECK \[--ranks N\]" \
  && pass "check --help" || fail "check --help: $out"
out=$("$TRIDENT" --version) || fail "--version exit"
for part in "trident " "MPI:" "HDF5:" "BLAS:" "CUDA:"; do
  echo "$out" | grep -q "$part" || fail "--version lacks '$part': $out"
done
# A CUDA build opens cuBLAS when a CUDA run starts, not at start-up (kernels/cuda/cublas_library.h):
# CPU runs, and nodes without cuBLAS, need none of it.
if readelf -d "$TRIDENT" | grep -q 'NEEDED.*libcublas'; then
  fail "trident needs cuBLAS at start-up: $(readelf -d "$TRIDENT" | grep 'NEEDED.*libcublas')"
else
  pass "trident does not load cuBLAS at start-up"
fi
out=$("$TRIDENT" check good.ini --ranks 4 2>&1) || fail "check: $out"
echo "$out" | grep -q "data groups: \[0,1,2,3\]" || fail "check: no layout table: $out"
echo "$out" | grep -q "memory per rank" || fail "check: no memory estimate: $out"
echo "$out" | grep -q "parallel.zero = 1, train.recompute = full" || fail "check: no memory alternatives: $out"
echo "$out" | grep -q "^dp = 4" || fail "check: dp not resolved: $out"
[ "$failures" -eq 0 ] && pass "check --ranks 4"

out=$("$TRIDENT" prepare synthetic --output syn.h5 --vocab 16 --tokens 5000 2>&1) || fail "prepare synthetic: $out"
echo "$out" | grep -qi "entropy rate" || fail "prepare synthetic does not print the entropy rate: $out"
printf 'hello world\nsecond line\n' > text.txt
out=$("$TRIDENT" prepare text --output text.h5 text.txt 2>&1) || fail "prepare text: $out"
[ -s text.h5 ] && pass "prepare text" || fail "prepare text wrote nothing"

# Every shipped deck validates (8 ranks; GPT-2 decks need a dataset of their own, so let check
# accept a missing one as "to be generated").
for deck in "$TRIDENT_SOURCE_DIR"/inputs/*.ini; do
  out=$("$TRIDENT" check "$deck" --ranks 8 --data.generate=synthetic --data.path=absent.h5 2>&1) \
    && pass "check $(basename "$deck")" || fail "check $(basename "$deck"): $out"
done

# Under bf16 the memory estimate counts the kernels of the deck's device, with or without a GPU
# here: the CUDA backend's 16-bit logits and unwidened operands need less than the CPU's
# widening, and flash attention (no T x T workspace) less again; run.attention = auto (the
# default) counts flash there, GPT-2's heads having 64 channels.
activations_mib() {  # stage 0's activations column, in MiB, from check's output on stdin
  awk '$1 == "0" && NF == 15 {v = $10; u = $11; print (u == "GiB" ? v * 1024 : u == "KiB" ? v / 1024 : v); exit}'
}
bf16_check() {
  "$TRIDENT" check "$TRIDENT_SOURCE_DIR/inputs/gpt2-124m.ini" --data.generate=synthetic --data.path=absent.h5 \
    --train.precision=bf16 --train.micro_batch=8 "$@" 2>&1
}
cpu_out=$(bf16_check --run.device=cpu) || fail "check on cpu: $cpu_out"
gemm_out=$(bf16_check --run.device=cuda --run.attention=gemm) || fail "check on cuda: $gemm_out"
flash_out=$(bf16_check --run.device=cuda --run.attention=flash) || fail "check on cuda, flash: $flash_out"
auto_out=$(bf16_check --run.device=cuda) || fail "check on cuda, run.attention = auto: $auto_out"
cpu_mib=$(echo "$cpu_out" | activations_mib)
gemm_mib=$(echo "$gemm_out" | activations_mib)
flash_mib=$(echo "$flash_out" | activations_mib)
auto_mib=$(echo "$auto_out" | activations_mib)
[ -n "$auto_mib" ] && [ "$auto_mib" = "$flash_mib" ] 2>/dev/null \
  && pass "check, run.attention = auto, bf16 on cuda: flash's activations ($auto_mib MiB)" \
  || fail "check, run.attention = auto, bf16 on cuda: activations $auto_mib MiB, not flash's $flash_mib"
echo "$cpu_out" | grep -q "^16-bit kernels: memory counted for the CPU backend (run.device = cpu)" \
  || fail "check on cpu names no kernels: $cpu_out"
echo "$gemm_out" | grep -q "^16-bit kernels: memory counted for the CUDA backend (run.device = cuda)" \
  || fail "check on cuda names no kernels: $gemm_out"
if [ -n "$cpu_mib" ] && [ -n "$gemm_mib" ] && [ -n "$flash_mib" ] &&
   awk -v c="$cpu_mib" -v g="$gemm_mib" -v f="$flash_mib" 'BEGIN {exit !(c > g && g > f)}'; then
  pass "check counts the device's 16-bit kernels: activations cpu $cpu_mib > cuda $gemm_mib > cuda flash $flash_mib MiB"
else
  fail "check's bf16 activations do not fall from cpu ($cpu_mib) to cuda ($gemm_mib) to flash ($flash_mib) MiB"
fi

# An empty deck is all defaults: GPT-2 124M on data/tokens.h5, which does not exist here: check
# reports the model and its memory, and warns that the run would stop for want of the data.
: > empty.ini
# The start-up report says when the data-parallel buckets start: during backward, with the
# interleaved schedule chunk by chunk (a chunk's blocks are final after its last backward).
for schedule in 1f1b interleaved; do
  out=$("$TRIDENT" check good.ini --ranks 4 --model.layers=4 --parallel.pp=2 --parallel.schedule=$schedule 2>&1)
  want="buckets overlapping backward"
  [ $schedule = interleaved ] && want="buckets overlapping backward (each chunk's from its last backward of the step on)"
  grep -q "^gradient reduction: over 2 data ranks in fp32 (parallel.grad_reduce), $want" <<< "$out" \
    && pass "start-up report, $schedule: $want" || fail "start-up report, $schedule: $(grep 'gradient reduction' <<< "$out")"
done
# fp16 gradient sums outside an fp16 run (no loss scale keeps them in range) are noted; fp16's own are not.
out=$("$TRIDENT" check good.ini --ranks 2 --parallel.dp=2 --train.precision=bf16 --parallel.grad_reduce=fp16 2>&1)
fp16_out=$("$TRIDENT" check good.ini --ranks 2 --parallel.dp=2 --train.precision=fp16 2>&1)
grep -q "^note: parallel.grad_reduce = fp16 in a bf16 run, without fp16's loss scaling" <<< "$out" \
  && ! grep -q "^note: parallel.grad_reduce" <<< "$fp16_out" \
  && pass "start-up report: fp16 gradient sums in a bf16 run noted" || fail "grad_reduce = fp16 note: $(grep -E 'note|gradient' <<< "$out")"
out=$("$TRIDENT" check empty.ini 2>&1); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -q "^model: GPT, 12 layers" \
  && echo "$out" | grep -q "^warning: data.path 'data/tokens.h5': no such file" \
  && pass "empty deck: defaults, and a warning naming the missing data" || fail "empty deck: rc $rc: $out"
finish
