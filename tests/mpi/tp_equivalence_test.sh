# Tensor parallelism trains the same model as one rank: 10 steps of every layout below give
# every step's loss within 1e-5 relative and the gradient norm within 1e-4 relative of the
# single-rank run, and the final parameters within 1e-4 relative (fp32 reassociation only:
# partial sums of the row-parallel matmuls and of the vocabulary-parallel cross-entropy are
# added in another order). Layouts compose tensor with data parallelism, ZeRO-1 and activation
# recomputation; the vocabulary (33 tokens) divides by no tp, so the padding rows are spread
# unevenly (tp = 4: the last rank holds padding only).
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
sed -i 's/^heads = 2$/heads = 4/' deck.ini   # 4 heads, so tp = 4 gives each rank one
mpi 1 train deck.ini --run.dir=ref > ref.log 2>&1 || { cat ref.log; fail "single-rank run"; finish; }

# run_layout NAME RANKS OVERRIDES...: train and compare with the single-rank run: the losses,
# gradient norms, and the final parameters (gathered from every rank's slices into one file,
# docs/param-file.md) within 1e-4 relative in the 2-norm over the model, 1e-3 per tensor
# (check_metrics compare-params states the rule).
run_layout() {
  local name=$1 ranks=$2; shift 2
  mpi "$ranks" train deck.ini --run.dir="$name" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "$name run"; return; }
  "$CHECK_METRICS" compare ref/metrics.jsonl "$name"/metrics.jsonl loss 1e-5 >/dev/null && \
  "$CHECK_METRICS" compare ref/metrics.jsonl "$name"/metrics.jsonl grad_norm 1e-4 >/dev/null && \
    pass "$name: $("$CHECK_METRICS" compare ref/metrics.jsonl "$name"/metrics.jsonl loss 1e-5)" || fail "$name differs"
  "$CHECK_METRICS" compare-params ref/final-params.h5 "$name"/final-params.h5 1e-4 > "$name.params.txt" \
    && pass "$name: $(tail -n 1 "$name.params.txt")" || { cat "$name.params.txt"; fail "$name final parameters differ"; }
}
run_layout tp2 2 --parallel.tp=2
run_layout tp4 4 --parallel.tp=4
run_layout dp2_tp2 4 --parallel.tp=2 --parallel.dp=2
run_layout tp2_zero 2 --parallel.tp=2 --parallel.zero=1
run_layout dp2_tp2_zero 4 --parallel.tp=2 --parallel.dp=2 --parallel.zero=1
run_layout tp2_recompute 2 --parallel.tp=2 --train.recompute=full
run_layout tp4_vocab_multiple_1 4 --parallel.tp=4 --model.vocab_multiple=1
# Sequence parallelism: each tensor rank keeps B*T/tp of the rows outside the matmuls (B*T = 32
# rows here), all-gather / reduce-scatter instead of the all-reduces, and the LayerNorm
# gradients summed over the tensor group (dp2_tp2_sp: after the data-parallel buckets that the
# last backward started; _zero: there too, those buckets summed to their owners only).
run_layout tp2_sp 2 --parallel.tp=2 --parallel.sequence_parallel=true
run_layout tp4_sp 4 --parallel.tp=4 --parallel.sequence_parallel=true
run_layout dp2_tp2_sp 4 --parallel.tp=2 --parallel.dp=2 --parallel.sequence_parallel=true
run_layout dp2_tp2_zero_sp 4 --parallel.tp=2 --parallel.dp=2 --parallel.zero=1 --parallel.sequence_parallel=true
run_layout tp2_recompute_sp 2 --parallel.tp=2 --train.recompute=full --parallel.sequence_parallel=true
# The padded vocabulary must not change the single-rank numbers either.
run_layout tp1_vocab_multiple_1 1 --model.vocab_multiple=1
finish
