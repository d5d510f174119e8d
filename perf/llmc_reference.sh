#!/usr/bin/env bash
# The llm.c side of the issue-4 GPU comparison (docs/performance.md, "GPU"): runs an llm.c
# `train_gpt2cu` binary (built elsewhere as docs/performance.md describes; neither llm.c's code
# nor a script that builds it is in this repository) on the shapes of perf/gpu_bench.sh:
# GPT-2 124M at micro-batches 8, 16 and 32, 350M and 774M at 8, sequence 1024, fresh models
# (-e dN), no gradient accumulation, no recomputation (-r 0).
#
#   there:  source /tmp/devpack/env.sh && bash perf/llmc_reference.sh PATH/TO/train_gpt2cu [STEPS]
#           (writes $OUT/llmc.md when OUT is set; RUNS="124m:8 350m:8" picks runs)
#
# Per run: the median tokens/s and ms/step of llm.c's per-step lines after the first third
# (warm-up), MFU with Trident's FLOP count (GptConfig::flops_per_token, as
# perf/pytorch_reference.py; against PEAK_TFLOPS, default 989: H100 SXM dense bf16) beside the
# MFU llm.c prints, and the GPU's peak memory in use (nvidia-smi every 0.2 s). Each run is capped
# (RUN_CAP_S, default 150 s) within perf/gpu_budget.sh's budget; the table goes to $OUT after
# every run.
set -u
binary=${1:?usage: llmc_reference.sh PATH/TO/train_gpt2cu [STEPS]}
steps=${2:-30}
[ -x "$binary" ] || { echo "llmc_reference.sh: $binary is not an executable" >&2; exit 2; }
# shellcheck source=perf/gpu_budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_budget.sh"
run_cap=${RUN_CAP_S:-150}
peak=${PEAK_TFLOPS:-989}
runs=${RUNS:-124m:8 124m:16 124m:32 350m:8 774m:8}
out=$(mktemp -d)
table="$out/llmc.md"
# The GPU and which binary ran (its SHA-256, to tie the figures to the build described in
# docs/performance.md) above the table.
# shellcheck disable=SC2119  # no pack to describe: the llm.c binary is named on the next line
{ gpu_description
  echo "llm.c: $(basename "$binary"), sha256 $(sha256sum < "$binary" | cut -c1-16)"; echo; } | tee "$table"
echo "| model | micro-batch | tokens/s (median) | ms/step | MFU (Trident's FLOPs) | MFU (llm.c's) | peak GPU memory (nvidia-smi) |" >> "$table"
echo "|---|---|---|---|---|---|---|" >> "$table"
publish() { publish_to_out "$table" llmc "$out" '*.bin'; }

# llm.c's token file: 256 int32 of header (magic 20240520, version 1, token count), then the
# tokens as uint16; 4M random tokens of GPT-2's 50257 (the speed does not depend on them).
tokens="$out/tokens.bin"
python3 - "$tokens" <<'PY'
import array, random, sys
n = 4_000_000
header = array.array("i", [0] * 256)
header[0], header[1], header[2] = 20240520, 1, n
rng = random.Random(1)
body = array.array("H", (rng.randrange(50257) for _ in range(n)))
with open(sys.argv[1], "wb") as f:
    header.tofile(f)
    body.tofile(f)
PY

# median FILE UNIT: the median of the number just before UNIT (" ms", " tok/s", "% bf16 MFU") on
# llm.c's step lines, over the steps after the first third.
median() {
  grep -E '^step ' "$1" | grep -oE "[0-9.]+$2" | grep -oE '^[0-9.]+' > "$1.values"
  awk -v n="$(grep -c . "$1.values")" 'NR > n / 3' "$1.values" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
for run in $runs; do
  model=${run%%:*} mb=${run##*:}
  case $model in
    124m) layers=12 width=768 ;;
    350m) layers=24 width=1024 ;;
    774m) layers=36 width=1280 ;;
    *) echo "llmc_reference.sh: unknown model $model in RUNS" >&2; exit 2 ;;
  esac
  name="llmc-$model-mb$mb"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out/$name.mem" &
  sampler=$!
  capped "$run_cap" "$binary" -i "$tokens" -j "$tokens" -e "d$layers" -b "$mb" -t 1024 -x "$steps" \
    -v 100000 -m 1 -s 0 -r 0 > "$out/$name.log" 2>&1
  rc=$?
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  if [ $rc -ne 0 ]; then
    echo "| gpt2-$model | $mb | exit $rc: $( (grep -m1 -iE 'error' "$out/$name.log" || tail -1 "$out/$name.log") | tr '|' '/') | | | | |" >> "$table"
    publish
    continue
  fi
  tok_s=$(median "$out/$name.log" " tok/s")
  ms=$(median "$out/$name.log" " ms")
  own_mfu=$(median "$out/$name.log" "% bf16 MFU")
  mem_mib=$(sort -n "$out/$name.mem" | tail -1)
  # Trident's GptConfig::flops_per_token: 6 x matmul weights (the head at the real vocabulary)
  # + 6 x layers x T x C.
  mfu=$(awk -v L="$layers" -v C="$width" -v t="$tok_s" -v p="$peak" \
    'BEGIN {f = 6 * (L * 12 * C * C + 50257 * C) + 6 * L * 1024 * C; printf "%.1f%%", 100 * t * f / (p * 1e12)}')
  printf "| gpt2-%s | %s | %.0f | %.1f | %s | %s%% | %.1f GiB |\n" "$model" "$mb" "$tok_s" "$ms" "$mfu" "$own_mfu" \
    "$(awk -v m="${mem_mib:-0}" 'BEGIN {print m / 1024}')" >> "$table"
  publish
done
cat "$table"
publish
