#!/usr/bin/env bash
# The CUDA backend against its CPU twin, on a lent GPU machine (docs/gpu-machines in ../shared,
# and the note in docs/performance.md). Prepare here, then run there in one command:
#
#   here:   cmake -S . -B build -DTRIDENT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DTRIDENT_SHARED_KERNELS=ON
#           cmake --build build -j2
#           PACK_PLAYGROUND=none bash perf/gpu_pack.sh build   (.gpu/pack.tgz; carry ".gpu")
#   there:  tar xzf .gpu/pack.tgz -C /tmp && bash perf/gpu_check.sh /tmp/devpack
#
# It prints the GPU, runs every CUDA kernel against the CPU backend (trident_gpu_tests), then
# the training tests of tests/gpu/training_test.sh (fp32 GPU against CPU within 1e-4, auto
# takes the GPU, bf16 and fp16 within 2% of fp32, tp = 2 and pp = 2 sharing the GPU, NCCL), and
# writes a summary and the logs under $OUT when that is set. Each stage runs under a time cap
# from one budget (perf/gpu_budget.sh: GPU_BUDGET_S, default 540 s), and the summary is
# rewritten after every stage, so a hang still leaves what ran before it in $OUT.
set -u
pack=${1:-/tmp/devpack}
# shellcheck disable=SC1091
source "$pack/env.sh"
# shellcheck source=perf/gpu_budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_budget.sh"
# Only a few files come back from a GPU machine's $OUT (at most 8), so the work stays in a
# scratch folder and $OUT gets check[-TAG].txt (the kernels' and the training tests' summaries)
# and one archive of the logs; TAG (when set) names them, to keep two packs' results apart.
out=$(mktemp -d)
status=0
touch "$out/gpu_tests.txt" "$out/training.txt" "$out/twin_margins.tsv"
# $OUT/check[-TAG].txt: the GPU, the kernel tests' verdicts (and the last one started, which
# is the one that hung if they timed out), the tightest tolerance margins, the training tests'
# tail; and the logs' archive, with every comparison's margin in twin_margins.tsv.
summarize() {
  [ -n "${OUT:-}" ] || return 0
  mkdir -p "$OUT"
  # A test that skips itself inside the binary (wgmma on a GPU that is not compute capability
  # 9.0, say) leaves the binary passing: its SKIPPED lines say which, so that is never mistaken
  # for a test that ran.
  { cat "$out/gpu.txt"; grep -E "^\[(==========|  PASSED  |  FAILED  |  SKIPPED )\]|timed out|budget spent" "$out/gpu_tests.txt"
    grep -E "^\[ RUN      \]" "$out/gpu_tests.txt" | tail -1 | sed 's/^/last started: /'
    echo "tightest margins (test, what, max |gpu - cpu| / max |cpu|, tolerance, ratio):"
    sort -t "$(printf '\t')" -k5 -g -r "$out/twin_margins.tsv" | head -12
    # Every verdict line of the training tests first: a failure's log tail (20 lines each) can
    # push an early FAIL out of the last 40.
    echo "training verdicts:"; grep -E "^(FAIL|SKIPPED|not checked)" "$out/training.txt"
    tail -40 "$out/training.txt"
    [ -s "$out/memcheck.txt" ] && { echo "memcheck:"; tail -8 "$out/memcheck.txt"; }
    echo "exit status so far: $status (after: $1)"; } > "$OUT/check${TAG:+-$TAG}.txt"
  tar czf "$OUT/check${TAG:+-$TAG}-logs.tgz" --exclude='*.h5' -C "$out" .
}
gpu_description "$pack" | tee "$out/gpu.txt"

echo "== CUDA kernels against the CPU twin"
capped 240 env TRIDENT_TWIN_MARGINS="$out/twin_margins.tsv" trident_gpu_tests 2>&1 | tee "$out/gpu_tests.txt" | tail -30
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
summarize "kernel tests"

echo "== training on the GPU against the CPU twin (tests/gpu/training_test.sh)"
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
capped 300 env TRIDENT="$(command -v trident)" CHECK_METRICS="$(command -v check_metrics)" MPIEXEC=mpirun \
  TRIDENT_SOURCE_DIR="$PWD" WORK_DIR="$out/training" OMP_NUM_THREADS=2 \
  bash tests/gpu/training_test.sh 2>&1 | tee "$out/training.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
summarize "training tests"

# Memory errors in the riskiest kernels, when the machine has the sanitizer (part of the CUDA
# toolkit, not of the driver; refused on some sandboxes): an error it finds counts as a failure;
# a memcheck the budget skipped or cut short says so and counts as not run, not as a failure.
# gtest filters are case-sensitive: LayerNorm and Layernorm both, and the suites of the deck
# choices (flash options, AdamW's 16-byte loads) by name.
if command -v compute-sanitizer > /dev/null; then
  echo "== compute-sanitizer memcheck on attention, cross-entropy, layernorm and AdamW"
  capped 300 compute-sanitizer --tool memcheck --error-exitcode 1 trident_gpu_tests \
    --gtest_filter='*Attention*:*CrossEntropy*:*Layernorm*:*LayerNorm*:FlashMmaOptions.*:AdamwPacks.*' 2>&1 \
    | tee "$out/memcheck.txt" | tail -15
  memcheck_rc=${PIPESTATUS[0]}
  case $memcheck_rc in
    0) ;;
    124 | 125) echo "memcheck not run to the end (budget): no verdict, not a failure" | tee -a "$out/memcheck.txt" ;;
    *) status=1 ;;
  esac
else
  echo "== compute-sanitizer not on this machine: memcheck skipped"
fi
summarize "memcheck (the last stage)"
exit $status
