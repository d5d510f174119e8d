#!/usr/bin/env bash
# Runs every kernel-playground program on a lent GPU machine (perf/kernels/README.md):
#
#   here:   PACK_PLAYGROUND=PATTERN bash perf/gpu_pack.sh build   (.gpu/pack.tgz; carry ".gpu")
#   there:  tar xzf .gpu/pack.tgz -C /tmp && bash perf/kernels/run.sh /tmp/devpack [REPS]
#           (writes $OUT/playground.txt when OUT is set; PLAYGROUND=PATTERN: only the programs
#           whose name matches the extended regular expression, e.g. 'attention|layernorm')
#
# Exit status: 0 when every variant of every program passed its validation, 1 otherwise.
# Each program is capped (PROGRAM_CAP_S, default 120 s) within one budget for the script
# (perf/gpu_budget.sh: GPU_BUDGET_S, default 540 s); the log is written as it goes.
set -u
pack=${1:-/tmp/devpack}
reps=${2:-50}
# shellcheck disable=SC1091
source "$pack/env.sh"
# shellcheck source=perf/gpu_budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/../gpu_budget.sh"
program_cap=${PROGRAM_CAP_S:-120}
out=${OUT:-$(mktemp -d)}  # one file: $OUT/playground.txt ($OUT/playground-$TAG.txt with TAG set)
mkdir -p "$out"
log="$out/playground${TAG:+-$TAG}.txt"
gpu_description "$pack" | tee "$log"
status=0
# Every playground program of this pack (a second build's pack may hold programs the first lacks);
# with PLAYGROUND=PATTERN only those whose name matches it (PLAYGROUND=attention: the attention
# programs; 'attention|layernorm': those and the LayerNorm programs).
only=${PLAYGROUND:-}
for exe in "$pack"/bin/playground_*; do
  program=$(basename "$exe")
  [[ -z "$only" || "$program" =~ $only ]] || continue
  echo "== $program all $reps" | tee -a "$log"
  capped "$program_cap" "$exe" all "$reps" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "== $program: exit $rc" | tee -a "$log"
  [ "$rc" -eq 0 ] || status=1
done
# Production flash attention (variant 3: the tensor-core kernels on bf16; 10: its tiles copied
# through registers; the forward's 11: 16 query rows a warp; the backward's 11: dQ in the key
# walk; 12: every head's longest walk first) and the GEMM attention's options
# (variants 5: production, min(B, NH) strided calls per product; 6: one pointer-array call; 7 and
# 8: 2 and 4 causal row blocks; 9: 6 and 8 together) again at micro-batch 32, where 5 makes 12
# calls per product; and validated with B > NH (the strided calls then batch over batch
# elements; the default validation has B = 2 < NH).
for program in playground_attention_forward playground_attention_backward; do
  [ -x "$pack/bin/$program" ] || continue
  [[ -z "$only" || "$program" =~ $only ]] || continue
  variants=(3 10 5 6 7 8 9)
  [ "$program" = playground_attention_forward ] && variants=(3 10 11 12 5 6 7 8 9)
  [ "$program" = playground_attention_backward ] && variants=(3 10 11 12 5 6 7 8 9)
  for setting in "ATTN_B=32 $reps" "ATTN_B=6 ATTN_C=128 ATTN_NH=2 ATTN_VALIDATE_B=6 3"; do
    read -r -a words <<< "$setting"
    shape=("${words[@]:0:${#words[@]}-1}")
    n=${words[-1]}
    for variant in "${variants[@]}"; do
      echo "== $program $variant $n ${shape[*]}" | tee -a "$log"
      capped "$program_cap" env "${shape[@]}" "$pack/bin/$program" "$variant" "$n" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      echo "== $program $variant ${shape[*]}: exit $rc" | tee -a "$log"
      [ "$rc" -eq 0 ] || status=1
    done
  done
done
# LayerNorm's backward at GPT-2 774M's width (C = 1280: 40 values a lane since 2026-11-24, 48
# before; 7.3 ms of the 774M step in the 2026-11-23 profile) and 350M's (1024): the parameter
# sums apart (1, 3) against in the walk over the rows (5, 6), fp32 and bf16, and the walk in bf16
# with 3, 4 and 5 chunks an SM (7, 8, 9).
program=playground_layernorm_backward
if [ -x "$pack/bin/$program" ] && [[ -z "$only" || "$program" =~ $only ]]; then
  for width in 1280 1024; do
    for variant in 1 5 3 6 7 8 9; do
      echo "== $program $variant $reps LN_C=$width" | tee -a "$log"
      capped "$program_cap" env LN_C="$width" "$pack/bin/$program" "$variant" "$reps" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      echo "== $program $variant LN_C=$width: exit $rc" | tee -a "$log"
      [ "$rc" -eq 0 ] || status=1
    done
  done
fi
# The linear layers' backward on one stream and on two (variants 1 and 2), and cuBLASLt's other
# algorithms for the products (all), at GPT-2 124M's width too (C = 768, where the GEMMs have
# fewer tiles still).
for program in playground_matmul_backward playground_matmul_algorithms; do
  [ -x "$pack/bin/$program" ] && [[ -z "$only" || "$program" =~ $only ]] || continue
  variants=(1 2)
  [ "$program" = playground_matmul_algorithms ] && variants=(all)
  for variant in "${variants[@]}"; do
    echo "== $program $variant $reps MM_C=768" | tee -a "$log"
    capped "$program_cap" env MM_C=768 "$pack/bin/$program" "$variant" "$reps" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    echo "== $program $variant MM_C=768: exit $rc" | tee -a "$log"
    [ "$rc" -eq 0 ] || status=1
  done
done
exit $status
