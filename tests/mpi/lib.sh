# Helpers for the script tests. Environment (set by CTest): TRIDENT, MPIEXEC, WORK_DIR,
# TRIDENT_SOURCE_DIR, CHECK_METRICS.
set -u
rm -rf "$WORK_DIR" && mkdir -p "$WORK_DIR" && cd "$WORK_DIR" || exit 1
failures=0

# mpi NP ARGS...: trident under mpirun with NP ranks.
mpi() { local np=$1; shift; "$MPIEXEC" --oversubscribe -np "$np" "$TRIDENT" "$@"; }

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# reduction_buffers_match NAME LOG [nonzero]: the end-of-run line of LOG says rank 0's
# gradient-reduction buffers hold what the start-up estimate counted (parallel/comm_buffers.h),
# and with `nonzero` that they hold something.
reduction_buffers_match() {
  local line held estimated
  line=$(sed -n "s/^memory: rank 0's gradient-reduction buffers: \([0-9]*\) bytes held, \([0-9]*\) bytes estimated$/\1 \2/p" "$2")
  read -r held estimated <<< "$line"
  if [ -n "${held:-}" ] && [ "$held" = "$estimated" ] && { [ "${3:-}" != nonzero ] || [ "$held" -gt 0 ]; }; then
    pass "$1: gradient-reduction buffers as estimated ($held bytes)"
  else
    fail "$1: gradient-reduction buffers held '${held:-?}' bytes against an estimate of '${estimated:-?}'"
  fi
}

# A tiny deck every test can start from (fast on 2 cores): the synthetic source, generated
# on first use.
tiny_deck() {
  cat > "$1" <<DECK
[run]
dir = run
seed = 7
[model]
layers = 2
heads = 2
hidden = 32
context = 32
vocab = 33
vocab_multiple = 8
[data]
path = $WORK_DIR/tiny.h5
generate = synthetic
synthetic_vocab = 32
synthetic_tokens = 20000
[train]
steps = 10
global_batch = 8
micro_batch = 2
seq_len = 16
eval_batches = 1
[optim]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 2
[log]
every = 5
peak_tflops = 0.05
DECK
}

# flip_byte FILE DATASET BYTE: flips bit 4 of byte BYTE of DATASET's data, in place.
flip_byte() {
  local offset at byte
  offset=$(h5dump -p -H -d "/$2" "$1" | awk '$1 == "OFFSET" {print $2; exit}')
  at=$((offset + $3))
  byte=$(od -An -tu1 -j "$at" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 16)))" | dd of="$1" bs=1 seek="$at" conv=notrunc status=none
}

finish() {
  if [ "$failures" -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
  echo "all checks passed"
}
