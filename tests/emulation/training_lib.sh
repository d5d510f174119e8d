# What the emulated training scripts share (training_test.sh: emulated.training;
# training_layouts_test.sh: emulated.training_layouts): the tiny deck, the flags of a short run
# on the emulated GPU and the helpers. Two scripts, so that ctest -j 2 runs them side by side:
# together in one they were the emulated label's longest test (220 s of its 220 s, 2026-11-24).
# Environment as for tests/mpi (TRIDENT, MPIEXEC, CHECK_METRICS, WORK_DIR, TRIDENT_SOURCE_DIR).
source "$(dirname "${BASH_SOURCE[0]}")/../mpi/lib.sh"

tiny_deck deck.ini
short="--train.steps=4 --train.eval_batches=0 --run.restart=none"
gpu="--run.device=cuda --parallel.comm=mpi"
# matches NAME REFERENCE RUN TOLERANCE: the losses and the gradient norms of RUN against
# REFERENCE's. The losses alone are nearly blind to a gradient's scale (AdamW divides it out: a
# clip factor of 1/1000 on every step moved a 4-step fp32 loss by 8e-5, inside 1e-4), so a
# gradient summed instead of averaged, or reduced twice, passed; its norm does not.
matches() {
  local out norms
  out=$("$CHECK_METRICS" compare "$2/metrics.jsonl" "$3/metrics.jsonl" loss "$4") \
    && norms=$("$CHECK_METRICS" compare "$2/metrics.jsonl" "$3/metrics.jsonl" grad_norm "$4") \
    && pass "$1: $out; $norms" || fail "$1: $out ${norms:-}"
}
# train NAME ARGS...: one rank, into run directory NAME (log NAME.log); says so on failure.
train() {
  local name=$1
  shift
  mpi 1 train deck.ini $short --run.dir="$name" "$@" > "$name.log" 2>&1 || { tail -5 "$name.log"; fail "$name"; }
}
