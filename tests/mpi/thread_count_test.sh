# The thread count per rank does not change the bits (kernels/cpu/fixed_tile_gemm.h): one rank
# with 1 thread and with 2 give every loss, gradient norm and final parameter the same in fp32
# and in bf16, and two pipeline stages of 1 thread each the bf16 losses of one rank of 2. The
# model is large enough for the products to span several 256 x 256 tiles and for OpenBLAS to
# thread them (hidden 320, 512 tokens a micro-batch): with its own threading, 1 and 2 threads
# differed by 3e-7 in the loss after 4 steps.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
shape="--model.hidden=320 --model.heads=4 --model.context=64 --train.seq_len=64 --train.micro_batch=8
  --train.global_batch=16 --train.steps=4 --train.eval_batches=0"

for precision in fp32 bf16; do
  for threads in 1 2; do
    "$TRIDENT" train deck.ini $shape --train.precision=$precision --run.threads=$threads \
      --run.dir="$precision-$threads" > "$precision-$threads.log" 2>&1 \
      || { tail -3 "$precision-$threads.log"; fail "$precision with $threads thread(s)"; }
  done
  grep -q "backend: cpu (OpenBLAS, 2 threads)" "$precision-2.log" || fail "$precision: the 2-thread run did not use 2 threads"
  if "$CHECK_METRICS" compare "$precision-1/metrics.jsonl" "$precision-2/metrics.jsonl" loss 0 >/dev/null &&
     "$CHECK_METRICS" compare "$precision-1/metrics.jsonl" "$precision-2/metrics.jsonl" grad_norm 0 >/dev/null &&
     "$CHECK_METRICS" compare-params "$precision-1/final-params.h5" "$precision-2/final-params.h5" 0 >/dev/null; then
    pass "$precision: 1 and 2 threads give the same losses, norms and parameters"
  else
    "$CHECK_METRICS" compare "$precision-1/metrics.jsonl" "$precision-2/metrics.jsonl" loss 0
    fail "$precision: 1 and 2 threads differ"
  fi
done

mpi 2 train deck.ini $shape --train.precision=bf16 --run.threads=1 --parallel.pp=2 --run.dir=pp2 > pp2.log 2>&1 \
  || { tail -3 pp2.log; fail "bf16 on two stages"; }
"$CHECK_METRICS" compare bf16-2/metrics.jsonl pp2/metrics.jsonl loss 0 >/dev/null \
  && pass "bf16: two stages of 1 thread give one rank of 2 threads' losses" \
  || { "$CHECK_METRICS" compare bf16-2/metrics.jsonl pp2/metrics.jsonl loss 0; fail "bf16: pp = 2 differs"; }
finish
