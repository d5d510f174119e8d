# perf/kernels/run.sh rehearsed without a GPU (CTest mpi.playground_rehearsal): step 4 of a GPU
# sitting (perf/kernels/README.md) runs it on the playground programs of the pack, and its loops
# (the attention programs again at micro-batch 32 and at a shape of fewer blocks than SMs,
# LayerNorm's backward at C = 1280 and 1024, the linear layers' backward and cuBLASLt's algorithms
# at C = 768) have changed
# since a GPU last ran them. Here the pack's programs are stand-ins that note how they were called
# (arguments and the shape variables), so what is checked is which runs the script makes:
# - with PLAYGROUND, only the programs it names run, each first with `all REPS`;
# - the attention programs' variants at both settings, LayerNorm's at both widths, the linear
#   layers' backward (1 and 2) and the algorithms (all) at C = 768, each with its shape in the
#   environment;
# - a program that fails makes the script's exit status 1 and its log line says so, and the
#   programs after it still run; $OUT gets the log.
source "$(dirname "$0")/lib.sh"

pack=$WORK_DIR/pack
mkdir -p "$pack/bin"
for program in attention_forward attention_backward layernorm_backward matmul_backward matmul_algorithms adamw; do
  cat > "$pack/bin/playground_$program" <<STANDIN
#!/usr/bin/env bash
# The rehearsal's playground program (tests/mpi/playground_rehearsal_test.sh): notes its call.
echo "playground_$program \$* B=\${ATTN_B:-} C=\${ATTN_C:-} NH=\${ATTN_NH:-} VB=\${ATTN_VALIDATE_B:-} LN_C=\${LN_C:-} MM_C=\${MM_C:-}" \\
  >> "$WORK_DIR/calls"
[ "playground_$program \$1" = "\${REHEARSAL_FAIL:-none}" ] && exit 1
exit 0
STANDIN
  chmod +x "$pack/bin/playground_$program"
done
cat > "$pack/bin/nvidia-smi" <<'SMI'
#!/usr/bin/env bash
echo "name, driver_version, memory.total [MiB], clocks.max.sm [MHz]"
echo "rehearsal (no GPU), 0, 0 MiB, 0 MHz"
SMI
chmod +x "$pack/bin/nvidia-smi"
echo "export PATH=\"$pack/bin:\$PATH\"" > "$pack/env.sh"
echo "trident rehearsal (tests/mpi/playground_rehearsal_test.sh)" > "$pack/build.txt"
run_sh="$TRIDENT_SOURCE_DIR/perf/kernels/run.sh"

# calls PATTERN: how many noted calls match the extended regular expression.
calls() { grep -c -E -- "$1" calls; }

OUT=$WORK_DIR/out PLAYGROUND='attention|layernorm_backward|matmul_backward|matmul_algorithms' bash "$run_sh" "$pack" 5 > run.log 2>&1
rc=$?
[ $rc -eq 0 ] && pass "run.sh: exit 0" || fail "run.sh: exit $rc: $(tail -5 run.log)"
[ "$(calls 'playground_adamw')" = 0 ] && pass "PLAYGROUND leaves adamw out" || fail "adamw ran: $(cat calls)"
for program in attention_forward attention_backward layernorm_backward matmul_backward matmul_algorithms; do
  [ "$(calls "^playground_$program all 5 .* MM_C=$")" = 1 ] && pass "$program: all 5 once" \
    || fail "$program: 'all 5' ran $(calls "^playground_$program all 5 ") times"
done
for program in attention_forward attention_backward; do
  for variant in 3 10 11 12 5 6 7 8 9; do
    [ "$(calls "^playground_$program $variant 5 B=32 C= NH= VB= ")" = 1 ] \
      && [ "$(calls "^playground_$program $variant 3 B=6 C=128 NH=2 VB=6 ")" = 1 ] \
      && pass "$program $variant: at micro-batch 32 and at B = 6, C = 128, 2 heads" \
      || fail "$program $variant: calls $(grep "^playground_$program $variant " calls | tr '\n' ';')"
  done
done
for width in 1280 1024; do
  for variant in 1 5 3 6 7 8 9; do
    [ "$(calls "^playground_layernorm_backward $variant 5 .* LN_C=$width ")" = 1 ] \
      || fail "layernorm_backward $variant at C = $width: $(grep "^playground_layernorm_backward $variant " calls)"
  done
done
[ "$(calls '^playground_layernorm_backward [0-9] 5 ')" = 14 ] && pass "layernorm_backward: 7 variants at two widths" \
  || fail "layernorm_backward: $(calls '^playground_layernorm_backward [0-9] 5 ') runs, not 14"
[ "$(calls '^playground_matmul_backward [12] 5 .* MM_C=768$')" = 2 ] && pass "matmul_backward 1 and 2 at C = 768" \
  || fail "matmul_backward: $(grep '^playground_matmul_backward' calls)"
[ "$(calls '^playground_matmul_algorithms all 5 .* MM_C=768$')" = 1 ] && pass "matmul_algorithms: all at C = 768" \
  || fail "matmul_algorithms: $(grep '^playground_matmul_algorithms' calls)"
[ -s out/playground.txt ] && grep -q '^== playground_matmul_backward 2 MM_C=768: exit 0$' out/playground.txt \
  && pass "\$OUT/playground.txt has the log" || fail "\$OUT/playground.txt: $(tail -3 out/playground.txt 2>&1)"

# A program that fails: exit status 1, its line says so, the later programs still run.
rm -f calls
REHEARSAL_FAIL="playground_attention_backward all" PLAYGROUND='attention_backward|layernorm_backward' \
  bash "$run_sh" "$pack" 5 > failing.log 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q '^== playground_attention_backward: exit 1$' failing.log \
  && [ "$(calls '^playground_layernorm_backward')" = 15 ] \
  && pass "a failing program: exit 1, said in the log, the rest ran" \
  || fail "a failing program: exit $rc, $(calls '^playground_layernorm_backward') LayerNorm runs: $(tail -3 failing.log)"
finish
