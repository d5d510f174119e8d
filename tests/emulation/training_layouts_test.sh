# Parallel layouts on the CPU emulation of CUDA (CTest emulated.training_layouts, label
# emulated; docs/testing-without-a-gpu.md), beside the single-rank runs of training_test.sh:
# - tp = 2, pp = 2, dp = 2 and dp = 2 with ZeRO-1 (parallel.comm = mpi, both ranks on the one
#   emulated GPU) against one rank within 1e-4, the data group's host copies as estimated;
# - parallel.comm = nccl (the emulation's NCCL over MPI, tests/emulation/emulated_nccl.cpp):
#   one rank identical to parallel.comm = mpi; with two emulated GPUs dp = 2, tp = 2, pp = 2 and
#   ZeRO-1 against one rank within 1e-4, and with four dp = 2 x tp = 2 and dp = 2 x pp = 2 with
#   ZeRO-1, with three pp = 3 (an embedding group without the middle stage); the bf16 wire buffer as estimated, with and without ZeRO-1 (whose bf16 run gives
#   plain dp = 2's losses exactly: one addition per element either way, rounded alike); two
#   ranks on one GPU refused, the GPU named by its bus id; a failed NCCL call ends the job with
#   exit 1, an internal error, naming the call;
# - run.matmul_algorithms = timed with the emulation's random event times
#   (TRIDENT_CUDA_EMULATION_EVENT_MS=random: each process, each rank, times otherwise and keeps
#   other kernels, as on GPUs): a restart from a step-3 checkpoint of dp = 2 takes the kernels the
#   ranks agreed on, kept in it, and gives the uninterrupted run's losses and final parameters bit
#   for bit;
# - a model larger than the GPU refused with exit 2, naming it.
# The reference is the fp32 run on one emulated GPU (also training_test.sh's "gpu").
source "$(dirname "$0")/training_lib.sh"

train gpu $gpu
# Layouts against one rank, ranks sharing the one emulated GPU (parallel.comm = mpi).
common="$short $gpu"
for layout in "tp2 --parallel.tp=2" "pp2 --parallel.pp=2" "dp2 --parallel.dp=2" \
              "dp2zero --parallel.dp=2 --parallel.zero=1"; do
  read -r name flags <<< "$layout"
  mpi 2 train deck.ini $common --run.dir="$name" $flags > "$name.log" 2>&1 || { tail -5 "$name.log"; fail "$name"; }
  matches "$name on the emulated GPU against one rank" gpu "$name" 1e-4
done
reduction_buffers_match "dp2, staged through the host" dp2.log nonzero
reduction_buffers_match "dp2 ZeRO-1, staged through the host" dp2zero.log nonzero

# NCCL: one rank, then two ranks with a GPU each (TRIDENT_CUDA_EMULATION_DEVICES).
nccl="$short --run.device=cuda --parallel.comm=nccl"
mpi 1 train deck.ini $nccl --run.dir=nccl1 > nccl1.log 2>&1 || { tail -5 nccl1.log; fail "nccl1"; }
grep -q "parallel.comm = nccl" nccl1.log || fail "the NCCL run does not say so"
matches "parallel.comm = nccl, one rank, against parallel.comm = mpi" gpu nccl1 0
# two_gpus NAME FLAGS...: two ranks over NCCL, a GPU each.
two_gpus() {
  local name=$1
  shift
  TRIDENT_CUDA_EMULATION_DEVICES=2 mpi 2 train deck.ini $nccl --run.dir="$name" "$@" > "$name.log" 2>&1 \
    || { tail -5 "$name.log"; fail "$name"; }
}
for layout in "ndp2 --parallel.dp=2" "ntp2 --parallel.tp=2" "npp2 --parallel.pp=2" \
              "ndp2zero --parallel.dp=2 --parallel.zero=1"; do
  read -r name flags <<< "$layout"
  two_gpus "$name" $flags
  matches "$name over NCCL against one rank" gpu "$name" 1e-4
done
# A failed NCCL call (the emulation returns ncclSystemError from rank 1's ncclAllReduce): exit 1,
# an internal error naming the call, on every rank; it once exited 3, a diverged run's status,
# which job scripts do not retry (jobs/mpirun-until-complete.sh) and tell to lower optim.lr.
TRIDENT_CUDA_EMULATION_DEVICES=2 TRIDENT_CUDA_EMULATION_NCCL_FAIL_RANK=1 mpi 2 train deck.ini $nccl --run.dir=ncclfail \
  --parallel.dp=2 > ncclfail.log 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "^trident: NCCL error: ncclAllReduce(.*) failed: system error (NCCL emulation over MPI)" ncclfail.log \
  && pass "a failed NCCL call: exit 1 naming the call" \
  || fail "a failed NCCL call: rc $rc: $(grep -m2 'trident' ncclfail.log)"
# Two groups over NCCL at once (a communicator and a stream each), four ranks with a GPU each.
for layout in "ndp2tp2 --parallel.dp=2 --parallel.tp=2" "ndp2pp2zero --parallel.dp=2 --parallel.pp=2 --parallel.zero=1"; do
  read -r name flags <<< "$layout"
  TRIDENT_CUDA_EMULATION_DEVICES=4 mpi 4 train deck.ini $nccl --run.dir="$name" $flags > "$name.log" 2>&1 \
    || { tail -5 "$name.log"; fail "$name"; }
  matches "$name over NCCL against one rank" gpu "$name" 1e-4
done
# Three pipeline stages over NCCL, a GPU each: the embedding group (first and last stage) has a
# communicator the middle stage takes no part in (the emulation's set-up once involved every
# rank, and the middle stage's absence hung it).
train gpu3 $gpu --model.layers=3
TRIDENT_CUDA_EMULATION_DEVICES=3 mpi 3 train deck.ini $nccl --run.dir=npp3 --parallel.pp=3 --model.layers=3 \
  > npp3.log 2>&1 || { tail -5 npp3.log; fail "npp3"; }
matches "npp3 over NCCL against one rank" gpu3 npp3 1e-4
two_gpus ndp2bf16 --parallel.dp=2 --train.precision=bf16
reduction_buffers_match "dp2 over nccl, bf16 wire" ndp2bf16.log nonzero
# ZeRO-1's buckets on the bf16 wire: each summed to its owner, which alone decodes the sum; at
# dp = 2 the same single bf16 addition per element as the all-reduce, so the same losses.
two_gpus ndp2zbf16 --parallel.dp=2 --parallel.zero=1 --train.precision=bf16
matches "dp2 ZeRO-1 over NCCL, bf16 wire, against the plain dp2's" ndp2bf16 ndp2zbf16 0
reduction_buffers_match "dp2 ZeRO-1 over nccl, bf16 wire" ndp2zbf16.log nonzero
mpi 2 train deck.ini $nccl --parallel.dp=2 --run.dir=same > same.log 2>&1 \
  && fail "two ranks on one GPU were not refused under nccl"
grep -q -E "node-local ranks 0 and 1 would both take GPU [0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9]" same.log \
  && pass "two ranks on one GPU: refused under nccl, the GPU named by bus id" \
  || { tail -5 same.log; fail "two ranks on one GPU: no refusal naming the GPU's bus id"; }

# The timed kernels kept by the checkpoint. Without them the restart would time anew and keep
# other answers, whose sums the emulated cuBLASLt rounds otherwise: other bits.
timed="--train.eval_batches=0 --train.precision=bf16 --run.matmul_algorithms=timed --parallel.dp=2 $gpu"
TRIDENT_CUDA_EMULATION_EVENT_MS=random mpi 2 train deck.ini $timed --train.steps=6 --checkpoint.every=3 \
  --run.restart=none --run.dir=timed > timed.log 2>&1 || { tail -5 timed.log; fail "timed"; }
TRIDENT_CUDA_EMULATION_EVENT_MS=random mpi 2 train deck.ini $timed --train.steps=6 \
  --run.restart="$PWD/timed/checkpoints/step-000000003.h5" --run.dir=timedrestart > timedrestart.log 2>&1 \
  || { tail -5 timedrestart.log; fail "timed restart"; }
tail -n 3 timed/metrics.jsonl > timed.ref.jsonl
"$CHECK_METRICS" compare timed.ref.jsonl timedrestart/metrics.jsonl loss 0 > /dev/null \
  && "$CHECK_METRICS" compare-params timed/final-params.h5 timedrestart/final-params.h5 0 > /dev/null \
  && pass "timed cuBLASLt kernels, dp = 2: the restart gives the uninterrupted run's losses and parameters bit for bit" \
  || fail "timed cuBLASLt kernels, dp = 2: the restart differs from the uninterrupted run"
shapes=$(sed -n 's/^matmul algorithms: \([0-9]*\) cuBLASLt product shapes timed.*; \([0-9]*\) of them on the answer another.*/\1 \2/p' \
  timedrestart.log)
read -r total taken <<< "$shapes"
[ -n "$total" ] && [ "$total" -gt 0 ] && [ "$taken" = "$total" ] \
  && pass "the timed restart ran the checkpoint's kernels at all $total shapes" \
  || fail "the timed restart did not take the checkpoint's kernels: $(grep '^matmul' timedrestart.log)"

mpi 2 train deck.ini $common --parallel.dp=2 --model.hidden=32768 --model.heads=32 --model.layers=200 \
  --run.dir=huge > huge.log 2>&1
rc=$?
[ $rc -eq 2 ] \
  && grep -q "not enough memory on GPU [0-9]* (CUDA emulation on the CPU, .*) of node .*: its 2 ranks need about" huge.log \
  && pass "a model larger than the GPU: refused with exit 2, naming the GPU" \
  || { tail -5 huge.log; fail "a model larger than the GPU: exit $rc, no refusal naming the GPU"; }
finish
