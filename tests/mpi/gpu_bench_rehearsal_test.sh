# perf/gpu_bench.sh rehearsed without a GPU (CTest mpi.gpu_bench_rehearsal): a sitting on a lent
# GPU has 30 minutes, and its steps 2, 3 and 5 (perf/kernels/README.md) are this script's
# BENCH_ROWS=candidates, =mfu and =profile, whose row logic and verdict no GPU has run yet. A
# slip there (a flag the deck refuses, a verdict line that does not parse, a row that kills the
# rest) would cost the sitting; here it costs a CI run.
#
# The pack is a stand-in: its `trident` runs this build's trident on the CPU with the tiny
# deck in place of inputs/gpt2-*.ini (run.device = cuda -> cpu, run.attention = flash -> gemm:
# the CPU backend has no flash kernels), and its `nvidia-smi` prints a made-up GPU. So the
# figures mean nothing; what is checked is what the script makes of them:
# - candidates: 15 rows at 774M (the defaults, each of the twelve choices alone, the first eight
#   together, the defaults again) and 2 at 124M, each naming its flags. The stand-in writes the
#   step times the script reads (the real ones here would hang on this machine's load): 100 ms,
#   94 with run.flash_dq = key_walk, 95 with run.flash_backward = wgmma_overlapped, 96 and 98
#   with run.flash_forward = wgmma_overlapped and wgmma, 97 with run.layernorm_sums = row_walk,
#   the second defaults' row 100.4. So the verdict must name those five, with the defaults' two
#   times and the margin (1%), and leave out of its BENCH_OPTIONS line the two that a faster one
#   excludes (the overlapped backward, by dQ in the key walk; the forward's other wgmma way), a
#   line that =mfu takes as given; with the defaults' rows 10% apart, the margin is 20% and no
#   choice is named;
# - mfu with that line: 7 rows naming the option, the last three accumulating 8, 8 and 16 passes;
# - profile: 4 rows and a kernel table under each, and a run that fails (the stand-in refuses
#   124M there) costs its own row, not the rows after it;
# - a spent budget skips rows (nine choices at once still name a run's files), and bad BENCH_ROWS or BENCH_OPTIONS stop the script at once;
# - with OUT set, the summary and the logs' archive are there (named by TAG).
source "$(dirname "$0")/lib.sh"
tiny_deck tiny.ini
# Head size 64, as GPT-2's (the flash rows' shapes; here only the deck's).
sed -i 's/^hidden = 32$/hidden = 128/' tiny.ini

pack=$WORK_DIR/pack
mkdir -p "$pack/bin"
cat > "$pack/bin/trident" <<WRAPPER
#!/usr/bin/env bash
# The rehearsal's trident (tests/mpi/gpu_bench_rehearsal_test.sh): the CPU build on the tiny deck.
args=()
dir=""
for a in "\$@"; do
  case \$a in
    inputs/gpt2-*.ini)
      [ "\$a" = "inputs/gpt2-\${REHEARSAL_FAIL_MODEL:-none}.ini" ] \\
        && { echo "trident: error: \$a: refused by the rehearsal's stand-in" >&2; exit 2; }
      args+=("$WORK_DIR/tiny.ini") ;;
    --run.device=cuda) args+=(--run.device=cpu) ;;
    --run.attention=flash) args+=(--run.attention=gemm) ;;
    --data.synthetic_vocab=*) args+=(--data.synthetic_vocab=32) ;;
    --data.synthetic_tokens=*) args+=(--data.synthetic_tokens=20000) ;;
    --run.dir=*) dir=\${a#--run.dir=}; args+=("\$a") ;;
    *) args+=("\$a") ;;
  esac
done
"$TRIDENT" "\${args[@]}" || exit
# The step time the script reads, made up so that its verdict does not hang on this machine's
# load: 100 ms, 94 to 98 with the choices the verdict must name (tests/mpi/gpu_bench_rehearsal_test.sh),
# and the second run with the defaults at 774M REHEARSAL_SECOND_DEFAULTS_MS (100.4).
ms=100
case " \$* " in
  *" --run.flash_dq=key_walk "*) ms=94 ;;
  *" --run.flash_backward=wgmma_overlapped "*) ms=95 ;;
  *" --run.flash_forward=wgmma_overlapped "*) ms=96 ;;
  *" --run.layernorm_sums=row_walk "*) ms=97 ;;
  *" --run.flash_forward=wgmma "*) ms=98 ;;
  *"flash_dq="* | *"flash_block_order="* | *"cross_entropy_loads="* | *"adamw_loads="* | *"matmul_backward_streams="* \\
    | *"matmul_bias_gradients="* | *"matmul_algorithms="* | *"flash_forward="* | *"flash_backward="*) ;;
  *" inputs/gpt2-774m.ini "*)
    count=\$((\$(cat "$WORK_DIR/defaults-runs" 2>/dev/null || echo 0) + 1))
    echo \$count > "$WORK_DIR/defaults-runs"
    [ \$count -eq 2 ] && ms=\${REHEARSAL_SECOND_DEFAULTS_MS:-100.4} ;;
esac
sed -i "s/\"ms_per_step\": [0-9.e+-]*/\"ms_per_step\": \$ms/" "\$dir/metrics.jsonl"
WRAPPER
cat > "$pack/bin/nvidia-smi" <<'SMI'
#!/usr/bin/env bash
# The rehearsal's nvidia-smi: a made-up GPU; the memory sampler prints once and waits to be killed.
case "$*" in
  *memory.used*) echo 1536; exec sleep 600 ;;
  *) echo "name, driver_version, memory.total [MiB], clocks.max.sm [MHz]"
     echo "rehearsal (the CPU backend, no GPU), 0, 0 MiB, 0 MHz" ;;
esac
SMI
chmod +x "$pack/bin/trident" "$pack/bin/nvidia-smi"
echo "export PATH=\"$pack/bin:\$PATH\"" > "$pack/env.sh"
echo "trident rehearsal (tests/mpi/gpu_bench_rehearsal_test.sh)" > "$pack/build.txt"

bench="$TRIDENT_SOURCE_DIR/perf/gpu_bench.sh"
steps=3
choices="flash_dq=key_walk flash_block_order=longest_first layernorm_sums=row_walk cross_entropy_loads=packs
  adamw_loads=packs matmul_backward_streams=two matmul_bias_gradients=epilogue matmul_algorithms=timed"

# rows SUMMARY [PATTERN]: the summary's table rows (matching PATTERN).
rows() { grep '^| gpt2-' "$1" | grep -c -- "${2:-}"; }
# no_failed_rows NAME SUMMARY: every row ran.
no_failed_rows() {
  if grep '^| gpt2-' "$2" | grep -q -E 'failed|timed out|skipped'; then
    fail "$1: rows that did not run: $(grep -E 'failed|timed out|skipped' "$2")"
  else
    pass "$1: every row ran"
  fi
}

# Step 2: the candidates.
rm -f defaults-runs
OUT=$WORK_DIR/out TAG=rehearsal BENCH_ROWS=candidates bash "$bench" "$pack" $steps > candidates.md 2> candidates.err
rc=$?
[ $rc -eq 0 ] && pass "candidates: exit 0" || fail "candidates: exit $rc: $(tail -5 candidates.err)"
[ "$(rows candidates.md gpt2-774m)" = 15 ] && [ "$(rows candidates.md gpt2-124m)" = 2 ] \
  && pass "candidates: 15 rows at 774M, 2 at 124M" || fail "candidates: rows: $(grep '^| gpt2-' candidates.md)"
no_failed_rows candidates candidates.md
# Each row says where the sitting's time went: trident's start-up line and the run's wall time.
if grep '^| gpt2-' candidates.md | grep -v -q -E '\| [0-9]+\.[0-9]{2} s \| [0-9]+ s \|$'; then
  fail "candidates: rows without the start-up and run seconds: $(grep '^| gpt2-' candidates.md | head -2)"
else
  pass "candidates: every row with its start-up and run seconds"
fi
for choice in $choices; do
  [ "$(rows candidates.md "$choice")" = 3 ] && pass "candidates: $choice alone and among all eight at 774M and 124M" \
    || fail "candidates: $choice in $(rows candidates.md "$choice") rows, not 3"
done
for choice in flash_forward=wgmma flash_forward=wgmma_overlapped flash_backward=wgmma flash_backward=wgmma_overlapped; do
  [ "$(rows candidates.md "$choice ")" = 1 ] && pass "candidates: $choice alone at 774M" \
    || fail "candidates: $choice in $(rows candidates.md "$choice ") rows, not 1"
done
want="Faster than the defaults at 774M by the margin (the defaults ran 100.00 and 100.40 ms a step, 0.4% apart; \
the margin: 1.0%): --run.flash_dq=key_walk --run.layernorm_sums=row_walk --run.flash_forward=wgmma \
--run.flash_forward=wgmma_overlapped --run.flash_backward=wgmma_overlapped. Left out, as a faster one excludes them: \
--run.flash_backward=wgmma_overlapped --run.flash_forward=wgmma. Next: BENCH_OPTIONS='--run.flash_dq=key_walk \
--run.flash_forward=wgmma_overlapped --run.layernorm_sums=row_walk' BENCH_ROWS=mfu"
verdict=$(tail -1 candidates.md)
[ "$verdict" = "$want" ] && pass "candidates: the verdict names the five faster choices, the options the three that go together" \
  || fail "candidates: the verdict is '$verdict', not '$want'"
options=$(sed -n "s/.* Next: BENCH_OPTIONS='\([^']*\)' BENCH_ROWS=mfu$/\1/p" <<< "$verdict")
for file in bench-rehearsal.md bench-rehearsal-logs.tgz; do
  [ -s "out/$file" ] && pass "candidates: \$OUT/$file" || fail "candidates: no \$OUT/$file: $(ls out)"
done
[ -n "$verdict" ] && grep -q -F "$verdict" out/bench-rehearsal.md && pass "candidates: \$OUT's summary has the verdict" \
  || fail "candidates: \$OUT's summary lacks the verdict"

# Step 3: the MFU rows with the options of the verdict, as the pack keeps them.
[ "$(cat "$pack/bench-options" 2>/dev/null)" = "$options" ] && pass "candidates: the pack keeps the verdict's options" \
  || fail "candidates: \$pack/bench-options is '$(cat "$pack/bench-options" 2>&1)', not '$options'"
BENCH_OPTIONS=from-candidates BENCH_ROWS=mfu ACCUM_STEPS=2 bash "$bench" "$pack" $steps > mfu.md 2> mfu.err
rc=$?
[ $rc -eq 0 ] && pass "mfu: exit 0" || fail "mfu: exit $rc: $(tail -5 mfu.err)"
[ "$(rows mfu.md)" = 7 ] && [ "$(rows mfu.md layernorm_sums=row_walk)" = 7 ] \
  && pass "mfu: 7 rows, each with the options" || fail "mfu: rows: $(grep '^| gpt2-' mfu.md)"
no_failed_rows mfu mfu.md
[ "$(rows mfu.md '| 16, 8 accumulated |')" = 2 ] && [ "$(rows mfu.md '| 8, 16 accumulated |')" = 1 ] \
  && pass "mfu: the three accumulating rows" || fail "mfu: accumulating rows: $(grep accumulated mfu.md)"

# The defaults' own spread sets the margin: 10% apart, so a choice must gain 20%, and 6% is not named.
rm -f defaults-runs
REHEARSAL_SECOND_DEFAULTS_MS=110 BENCH_ROWS=candidates bash "$bench" "$pack" $steps > spread.md 2> spread.err
want="No choice was faster than the defaults at 774M by the margin (the defaults ran 100.00 and 110.00 ms a step, \
10.0% apart; the margin: 20.0%)."
[ "$(tail -1 spread.md)" = "$want" ] && pass "candidates: a wide spread between the defaults' rows widens the margin" \
  || fail "candidates: with the defaults 10% apart the verdict is '$(tail -1 spread.md)', not '$want'"
[ -f "$pack/bench-options" ] && [ -z "$(cat "$pack/bench-options")" ] && pass "candidates: no winner leaves no options" \
  || fail "candidates: with no winner \$pack/bench-options is '$(cat "$pack/bench-options" 2>&1)'"

# Step 5: the profile, with 124M refused by the stand-in.
REHEARSAL_FAIL_MODEL=124m BENCH_ROWS=profile bash "$bench" "$pack" $steps > profile.md 2> profile.err
rc=$?
[ $rc -eq 0 ] && pass "profile: exit 0" || fail "profile: exit $rc: $(tail -5 profile.err)"
[ "$(rows profile.md 'gpt2-124m .*| failed (exit [1-9][0-9]*): trident: error: inputs/gpt2-124m.ini: refused')" = 2 ] \
  && pass "profile: the failed runs say why in their rows" || fail "profile: 124M rows: $(grep '^| gpt2-124m' profile.md)"
[ "$(rows profile.md 'gpt2-774m .*, profiled | fused | [0-9]')" = 2 ] && pass "profile: the rows after a failure ran" \
  || fail "profile: 774M rows: $(grep '^| gpt2-774m' profile.md)"
grep -q '^## Where a step goes (run.profile)' profile.md && [ "$(grep -c '^kernels per step on rank 0 ' profile.md)" = 2 ] \
  && pass "profile: a kernel table under each profiled row that ran" || fail "profile: kernel tables: $(cat profile.md)"

# A spent budget: every row skipped, and the script still ends well. With nine choices, as step
# 3 may get them: their names once made a file name past 255 bytes, and every row failed.
long_options="$(printf -- '--run.%s ' $choices)--run.flash_forward=wgmma_overlapped"
GPU_BUDGET_S=5 BENCH_OPTIONS="$long_options" BENCH_ROWS=mfu bash "$bench" "$pack" $steps > spent.md 2> spent.err
rc=$?
[ $rc -eq 0 ] && [ "$(rows spent.md 'skipped: budget spent')" = 7 ] && pass "a spent budget skips every row" \
  || fail "spent budget: exit $rc, rows: $(grep '^| gpt2-' spent.md)"

# Bad settings stop the script before any run.
for setting in "BENCH_ROWS=everything" "BENCH_OPTIONS=run.flash_dq=key_walk" "BENCH_ATTENTION=fast"; do
  env "$setting" bash "$bench" "$pack" $steps > bad.out 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q "^gpu_bench.sh: ${setting%%=*} = " bad.out && pass "$setting: refused (exit 2)" \
    || fail "$setting: exit $rc: $(cat bad.out)"
done
BENCH_OPTIONS=from-candidates bash "$bench" "$WORK_DIR/no-pack" $steps > bad.out 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "^gpu_bench.sh: BENCH_OPTIONS = from-candidates, but .* does not exist" bad.out \
  && pass "BENCH_OPTIONS=from-candidates without a verdict: refused (exit 2)" || fail "from-candidates: exit $rc: $(cat bad.out)"
finish
