#!/usr/bin/env bash
# Runs one deck on several parallel layouts and prints, per layout: mean step time (steps after
# the first), the communication report (payload bytes and time per group kind) and the memory
# line (estimate vs measured resident growth). Figures in docs/performance.md come from it.
#
#   perf/parallel_layouts.sh DECK STEPS "NAME:RANKS:OVERRIDES" ...
#   perf/parallel_layouts.sh inputs/gpt2-124m.ini 4 "1rank:1:" "dp2:2:--parallel.dp=2" \
#       "tp2:2:--parallel.tp=2" "pp2:2:--parallel.pp=2"
set -euo pipefail
deck=${1:?usage: perf/parallel_layouts.sh DECK STEPS NAME:RANKS:OVERRIDES ...}
steps=${2:?}
shift 2
trident=${TRIDENT:-build/bin/trident}
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
for spec in "$@"; do
  IFS=: read -r name ranks overrides <<< "$spec"
  # shellcheck disable=SC2086  # overrides are separate words on purpose
  mpirun "${flags[@]}" -np "$ranks" "$trident" train "$deck" --train.steps="$steps" --log.every=1 \
    --run.dir="$work/$name" --run.save_final=false --train.eval_batches=0 $overrides > "$work/$name.log" 2>&1 \
    || { echo "== $name: failed"; tail -5 "$work/$name.log"; continue; }
  echo "== $name ($ranks rank(s): $overrides)"
  # Mean ms/step over the steps after the first, from metrics.jsonl.
  awk -F'"ms_per_step": ' 'NR > 1 { split($2, v, ","); sum += v[1]; n++ } END { if (n) printf "  mean step %.1f ms over %d steps\n", sum / n, n }' \
    "$work/$name/metrics.jsonl"
  sed -n '/^communication per step/,/^  total/p; /^memory: rank 0 estimate/p' "$work/$name.log" | sed 's/^/  /'
done
