#!/usr/bin/env bash
# The CUDA backend against its CPU twin, on a lent GPU machine (docs/gpu-machines in ../shared,
# and the note in docs/performance.md). Prepare here, then run there in one command:
#
#   here:   cmake -S . -B build -DTRIDENT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j2
#           ../shared/tools/device-pack .devpack build/bin/trident build/bin/trident_gpu_tests \
#               build/bin/check_metrics
#   there:  bash perf/gpu_check.sh .devpack            (carry .devpack with the working tree)
#
# It prints the GPU, runs every CUDA kernel against the CPU backend (trident_gpu_tests), then
# trains the quickstart deck for 10 steps on the CPU and on the GPU in fp32 and compares every
# step's loss (issue 4: within 1e-4), and writes everything under $OUT when that is set.
set -u
pack=${1:-.devpack}
# shellcheck disable=SC1091
source "$pack/env.sh"
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"

echo "== CUDA kernels against the CPU twin"
trident_gpu_tests 2>&1 | tee "$out/gpu_tests.txt" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== quickstart, 10 fp32 steps, CPU against GPU"
common=(--train.steps=10 --train.eval_batches=0 --data.path="$out/quickstart.h5")
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
for device in cpu cuda; do
  mpirun "${flags[@]}" -np 1 trident train inputs/quickstart.ini --run.device="$device" --run.dir="$out/$device" \
    "${common[@]}" > "$out/$device.log" 2>&1 || { echo "$device run failed:"; tail -20 "$out/$device.log"; status=1; }
done
grep '^backend' "$out/cuda.log"
check_metrics compare "$out/cpu/metrics.jsonl" "$out/cuda/metrics.jsonl" loss 1e-4 || status=1
exit $status
