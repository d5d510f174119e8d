#!/usr/bin/env bash
# Trident's side of the issue-4 benchmark on one GPU: GPT-2 124M at sequence 1024 in bf16 with
# micro-batches 8, 16 and 32, then GPT-2 350M and 774M (micro-batch 8), one rank, no gradient
# accumulation (global batch = micro-batch). For each: median tokens/s and MFU over the steps
# after the warm-up, and the GPU's peak memory in use (nvidia-smi, sampled every 0.2 s), with
# flash attention (what run.attention = auto takes there). Then GPT-2 124M with the GEMM
# attention at micro-batches 8 and 32, and with run.matmul_epilogues = separate (cuBLAS GEMMs and
# separate bias and GELU kernels) at 8. Last,
# the GEMM attention's other schedules (run.attention_blocks, run.attention_batching) at 8 and
# 32 against the default (4 blocks, pointer arrays: the fastest of the 2026-11-22 sitting).
#
#   here:   build with -DTRIDENT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real -DTRIDENT_SHARED_KERNELS=ON,
#           pack (perf/gpu_pack.sh)
#   there:  tar xzf .gpu/pack.tgz -C /tmp && bash perf/gpu_bench.sh /tmp/devpack [STEPS]
#           (writes $OUT/bench.md when OUT is set; see TAG below)
#   BENCH_ROWS=core runs only the issue's table (124M at 8, 16, 32; fp32; 350M; 774M), =variants
#   only the rows after it (flash, separate epilogues, attention schedules); all (the default)
#   both, so that a sitting can split them between commands. BENCH_ATTENTION=gemm runs the
#   issue's bf16 rows with run.attention = gemm (default flash). =profile runs 124M and 774M at
#   micro-batch 8 with each attention under run.profile = true (docs/running.md) and appends
#   rank 0's kernel table of each to the summary: where a step goes (profiled steps run slower,
#   so their tokens/s is not comparable with the other rows'). =mfu runs GPT-2 350M at
#   micro-batches 16 and 32 and 774M at 16 and 32: the issue asks their MFU without naming a
#   micro-batch, and at 124M MFU grew from 32% to 37% between 8 and 32 (2026-11-23). `trident
#   check` estimates 20, 34, 38 and 62 GiB; a micro-batch the GPU cannot hold is refused at
#   start-up and leaves its row saying so. Then the same models with gradient accumulation, as
#   they would train (GPT-2 was trained on batches of 0.5M tokens): 350M and 774M at micro-batch
#   16 and 774M at 8, each over a global batch of 128 sequences (131k tokens), so that AdamW,
#   the gradient norm and the zero-fill run once per 8 or 16 passes (at 774M micro-batch 8
#   they were 11 of 113 ms a step, 2026-11-23). Those rows run ACCUM_STEPS steps (12).
#   =candidates times whole steps with the kernel choices that wait for a GPU's timing
#   (run.flash_dq = key_walk, run.flash_block_order = longest_first, run.layernorm_sums = row_walk,
#   run.cross_entropy_loads = packs, run.adamw_loads = packs, run.matmul_backward_streams = two,
#   run.matmul_bias_gradients = epilogue, run.matmul_algorithms = timed; and flash attention on
#   Hopper's wgmma, run.flash_forward and run.flash_backward = wgmma or wgmma_overlapped): GPT-2
#   774M at micro-batch 8 with the defaults, each of the twelve choices alone, the first eight
#   together and the defaults again (their spread), then 124M with the defaults and those eight
#   (bf16, flash; 17 runs). A choice that wins becomes the default. The summary ends with the choices
#   faster at 774M by 1% (or twice the defaults' spread, when more) and the BENCH_OPTIONS line
#   that runs =mfu with them: the fastest first, leaving out a choice that a faster one excludes
#   (a direction's other wgmma way; dQ in the key walk against the overlapped wgmma backward)
#   (tests/mpi/gpu_bench_rehearsal_test.sh rehearses it on the CPU).
# BENCH_OPTIONS: deck flags every row adds (say --run.flash_dq=key_walk), named in its attention
# column; e.g. BENCH_ROWS=mfu with the choices =candidates found faster. BENCH_OPTIONS=from-candidates
# takes them from the pack, where =candidates leaves its verdict's options (none without a verdict).
#
# MFU is against log.peak_tflops = 989 (H100 SXM dense bf16; set PEAK_TFLOPS for another GPU).
# The data is a synthetic token file generated on first use (the speed does not depend on it).
# llm.c and PyTorch run on the same GPU in the same sitting; docs/performance.md says how.
# The table's last two columns say where a sitting's minutes go: each run's start-up (trident's
# "start-up:" line: deck, data, device, NCCL, allocation, initialisation) and its whole wall time.
# Each run is capped (RUN_CAP_S, default 150 s) within one budget for the script
# (perf/gpu_budget.sh: GPU_BUDGET_S, default 540 s), and the table goes to $OUT after every
# run, so a hang costs its own row, not the sitting.
set -u
pack=${1:-/tmp/devpack}
steps=${2:-30}
rows=${BENCH_ROWS:-all}
# The attention of the issue's bf16 rows: flash (the default: what run.attention = auto takes for
# 16 bits on a GPU, 1.5 to 1.6 times faster a step on one H100 on 2026-11-23) or gemm (fp32
# stays on gemm: fp32 flash is the scalar kernels).
core_attention=${BENCH_ATTENTION:-flash}
case $core_attention in
  gemm | flash) ;;
  *) echo "gpu_bench.sh: BENCH_ATTENTION = $core_attention; use gemm or flash" >&2; exit 2 ;;
esac
case $rows in
  core | variants | all | profile | mfu | candidates) ;;
  *) echo "gpu_bench.sh: BENCH_ROWS = $rows; use core, variants, all, profile, mfu or candidates" >&2; exit 2 ;;
esac
bench_options=${BENCH_OPTIONS:-}
# BENCH_OPTIONS=from-candidates: the options of the last BENCH_ROWS=candidates verdict in this pack
# (it writes them to $pack/bench-options), so that step 3's command can be written before step 2
# ends and sent the moment it does, within the machine's 30 s of idleness.
if [ "$bench_options" = from-candidates ]; then
  if [ ! -f "$pack/bench-options" ]; then
    echo "gpu_bench.sh: BENCH_OPTIONS = from-candidates, but $pack/bench-options does not exist: run BENCH_ROWS=candidates with this pack first (on this machine: a fresh one has none), or give the flags" >&2
    exit 2
  fi
  bench_options=$(cat "$pack/bench-options")
  echo "gpu_bench.sh: BENCH_OPTIONS from the candidates' verdict: '$bench_options'" >&2
fi
case " $bench_options" in
  *" "[!-]* | *" -"[!-]*) echo "gpu_bench.sh: BENCH_OPTIONS = '$bench_options'; give deck flags, --key=value" >&2; exit 2 ;;
esac
# shellcheck disable=SC1091
source "$pack/env.sh"
# shellcheck source=perf/gpu_budget.sh
source "$(dirname "${BASH_SOURCE[0]}")/gpu_budget.sh"
run_cap=${RUN_CAP_S:-150}
# Only a few files come back from a GPU machine's $OUT (at most 8), so the work stays in a
# scratch folder and $OUT gets bench[-TAG].md (the table) and one archive of the logs; TAG
# (when set) names them, to keep two packs' results apart.
out=$(mktemp -d)
peak=${PEAK_TFLOPS:-989}
flags=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
gpu_description "$pack" | tee "$out/gpu.txt"
table="$out/bench.md"
{ cat "$out/gpu.txt"; echo; } > "$table"  # the GPU and the build above the table
echo "| model | precision | micro-batch | attention (blocks, batching) | matmul epilogues | tokens/s (median) | ms/step | MFU | peak GPU memory (nvidia-smi) | held by the backend | estimate | loss (first -> last step) | start-up | run |" >> "$table"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$table"

# median FILE KEY: the median of KEY over the steps after the first third (warm-up).
# The table and the logs so far into $OUT (after every run: what is there when a kill comes,
# comes back).
# The kernel tables of the profiled rows (BENCH_ROWS=profile), kept apart from the table while it
# grows and put below it in the summary.
profiles="$out/profiles.md"
summary="$out/summary.md"
publish() {
  cat "$table" > "$summary"
  [ -s "$profiles" ] && { echo; echo "## Where a step goes (run.profile)"; cat "$profiles"; } >> "$summary"
  publish_to_out "$summary" "bench${TAG:+-$TAG}" "$out" '*.h5' 'checkpoint*'
}
median() {
  grep -o "\"$2\": [0-9.e+-]*" "$1" | awk '{print $2}' | awk -v n="$(grep -c . "$1")" 'NR > n / 3' | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# loss_span METRICS: the loss of the first and the last step. Every row of one model and
# micro-batch trains the same data from the same seed, so their losses agree to rounding: a NaN,
# or a row apart from the others, marks a run that was timed but computed something else.
loss_span() {
  local losses
  losses=$(grep -o '"loss": [^,}]*' "$1" | awk '{if ($2 ~ /^[-+0-9.eE]+$/) printf "%.4f\n", $2; else print $2}')
  echo "$(sed -n 1p <<< "$losses") -> $(sed -n '$p' <<< "$losses")"
}

# run MODEL PRECISION MICRO_BATCH [ATTENTION: gemm (default) | flash] [EPILOGUES: fused (default) | separate]
#     [BLOCKS: GEMM attention's causal row blocks, 4 (default)] [BATCHING: pointers (default) | strided]
#     [PROFILE: false (default) | true: run.profile, its table appended to $profiles]
#     [PASSES: micro-batches accumulated per optimizer step, 1 (default): global batch = PASSES x
#      MICRO_BATCH; more than 1 runs ACCUM_STEPS steps, each PASSES times as long]
# Deck flags of BENCH_OPTIONS and of the row (row_flags, set around one run by with_flags) are
# added to its command line and named in its attention column.
row_flags=""
row_ms=""  # the last row's median ms/step; empty when it failed
with_flags() {
  row_flags=$1
  shift
  "$@"
  row_flags=""
}
run() {
  local model=$1 precision=$2 mb=$3 attention=${4:-gemm} epilogues=${5:-fused} blocks=${6:-4} batching=${7:-pointers}
  local profile=${8:-false} passes=${9:-1}
  local name="$1-$2-mb$3-$attention-$epilogues-b$blocks-$batching"
  local flags_here
  flags_here=$(echo $bench_options $row_flags)  # unquoted: one space between flags
  if [ -n "$flags_here" ]; then
    # The flags in the name while it stays short; past 100 characters their first 60 and a hash
    # of all (nine choices made a name past the 255 bytes of a file name: every row failed).
    local flag_name
    flag_name=$(echo "$flags_here" | sed 's/--run\.//g; s/[^A-Za-z0-9]\+/_/g')
    if [ ${#flag_name} -gt 100 ]; then
      flag_name="${flag_name:0:60}-$(echo "$flags_here" | md5sum | cut -c1-8)"
    fi
    name="$name-$flag_name"
  fi
  local batch_label=$mb row_steps=$steps log_every=5
  if [ "$passes" -gt 1 ]; then
    name="$name-x$passes"
    batch_label="$mb, $passes accumulated"
    row_steps=${ACCUM_STEPS:-12}
    log_every=2
  fi
  local label=$attention
  [ "$attention" = gemm ] && label="gemm ($blocks, $batching)"
  [ -n "$flags_here" ] && label="$label, $(echo "$flags_here" | sed 's/--run\.//g; s/ /, /g')"
  if [ "$profile" = true ]; then
    name="$name-profiled"
    label="$label, profiled"
  fi
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out/$name.mem" &
  local sampler=$!
  local run_start=$SECONDS
  capped "$run_cap" mpirun "${flags[@]}" -np 1 trident train "inputs/gpt2-$model.ini" --run.device=cuda --train.precision="$precision" \
    --train.micro_batch="$mb" --train.global_batch="$((mb * passes))" --train.steps="$row_steps" --train.eval_batches=0 \
    --run.attention="$attention" --run.matmul_epilogues="$epilogues" \
    --run.attention_blocks="$blocks" --run.attention_batching="$batching" --run.profile="$profile" \
    --log.every="$log_every" --log.peak_tflops="$peak" --checkpoint.every=0 --run.save_final=false --run.restart=none \
    $flags_here \
    --data.path="$out/synthetic.h5" --data.generate=synthetic --data.synthetic_vocab=50256 \
    --data.synthetic_tokens=4000000 --run.dir="$out/$name" > "$out/$name.log" 2>&1
  local rc=$? run_s=$((SECONDS - run_start))
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  # A row cut short by its cap was sent SIGTERM, which makes trident write a checkpoint (9 GiB
  # at 774M, cut off 5 s later): not kept on the machine's 64 GiB of disk for the rows after it.
  rm -rf "$out/$name/checkpoints"
  row_ms=""
  if [ $rc -ne 0 ]; then
    local why
    case $rc in
      124) why="timed out" ;;
      125) why="skipped: budget spent" ;;
      *) why="failed (exit $rc): $( (grep -m1 -E 'error' "$out/$name.log" || tail -1 "$out/$name.log") | tr '|' '/')" ;;
    esac
    echo "| gpt2-$model | $precision | $batch_label | $label | $epilogues | $why | | | | | | | | $run_s s |" >> "$table"
    publish
    return
  fi
  local metrics="$out/$name/metrics.jsonl"
  row_ms=$(median "$metrics" ms_per_step)
  local mem_mib
  mem_mib=$(sort -n "$out/$name.mem" | tail -1)
  local held estimate
  held=$(sed -n 's/^memory: device memory held by the backend at most: \([0-9.]*\) MiB.*/\1/p' "$out/$name.log")
  estimate=$(sed -n 's/^memory: rank 0 estimate \([^;]*\);.*/\1/p' "$out/$name.log")
  # Where the sitting's minutes go: the run's start-up (trident's own line: deck, data, device,
  # NCCL, model memory, initialisation) and the whole run as the script waited for it.
  local startup
  startup=$(sed -n 's/^start-up: \([0-9.]*\) s to the first step.*/\1/p' "$out/$name.log")
  printf "| gpt2-%s | %s | %s | %s | %s | %.0f | %.1f | %.1f%% | %.1f GiB | %.1f GiB | %s | %s | %s s | %s s |\n" \
    "$model" "$precision" "$batch_label" \
    "$label" "$epilogues" \
    "$(median "$metrics" tokens_per_s)" "$row_ms" \
    "$(awk -v m="$(median "$metrics" mfu)" 'BEGIN {print 100 * m}')" \
    "$(awk -v m="${mem_mib:-0}" 'BEGIN {print m / 1024}')" "$(awk -v m="${held:-0}" 'BEGIN {print m / 1024}')" \
    "${estimate:-?}" "$(loss_span "$metrics")" "${startup:-?}" "$run_s" >> "$table"
  if [ "$profile" = true ]; then
    { echo; echo "gpt2-$model $precision micro-batch $mb, $label:"; echo '```'; cat "$out/$name/profile-rank0.txt"; echo '```'; } \
      >> "$profiles"
  fi
  publish
}

if [ "$rows" = profile ]; then
  for model in 124m 774m; do
    run "$model" bf16 8 gemm fused 4 pointers true
    run "$model" bf16 8 flash fused 4 pointers true
  done
  cat "$summary"
  exit 0
fi
# excluded CHOICE OPTIONS: true when CHOICE cannot join a flag among OPTIONS: one of the same key
# (CHOICE begins with that flag's "key="), or the overlapped wgmma backward beside dQ in the key
# walk, which the deck refuses together.
excluded() {
  local choice=$1 option
  for option in $2; do
    case "$choice $option" in
      "${option%%=*}="* | "--run.flash_dq=key_walk --run.flash_backward=wgmma_overlapped" \
        | "--run.flash_backward=wgmma_overlapped --run.flash_dq=key_walk") return 0 ;;
    esac
  done
  return 1
}
if [ "$rows" = candidates ]; then
  rm -f "$pack/bench-options"  # an earlier sitting's verdict is not this one's
  choices="--run.flash_dq=key_walk --run.flash_block_order=longest_first --run.layernorm_sums=row_walk --run.cross_entropy_loads=packs --run.adamw_loads=packs
    --run.matmul_backward_streams=two --run.matmul_bias_gradients=epilogue --run.matmul_algorithms=timed"
  # Flash attention on Hopper's warpgroup products, each alone only: a direction's two ways
  # exclude each other, and the overlapped backward excludes dQ in the key walk (the deck refuses
  # it), so they stay out of the run with all eight. Their rows mean something only where step 1's
  # WarpgroupMatrixProducts passed.
  warpgroup_choices="--run.flash_forward=wgmma --run.flash_forward=wgmma_overlapped --run.flash_backward=wgmma
    --run.flash_backward=wgmma_overlapped"
  # The defaults run first and again after the choices, so that the sitting measures its own
  # run-to-run spread instead of assuming one. A choice whose median ms/step at 774M beats the
  # faster of the two defaults rows by the margin (1%, or twice the spread when that is more) is
  # named below the table with the BENCH_OPTIONS line for the next command, so that the sitting
  # can go on at once. Read the rows themselves before flipping a default.
  run 774m bf16 8 flash
  first_ms=$row_ms
  declare -A choice_ms=()
  for choice in $choices $warpgroup_choices; do
    with_flags "$choice" run 774m bf16 8 flash
    choice_ms[$choice]=$row_ms
  done
  with_flags "$choices" run 774m bf16 8 flash
  run 774m bf16 8 flash
  second_ms=$row_ms
  run 124m bf16 8 flash
  with_flags "$choices" run 124m bf16 8 flash
  if [ -z "$first_ms" ] || [ -z "$second_ms" ]; then
    verdict="No verdict: a row with the defaults at 774M did not run."
  else
    read -r base_ms margin spread < <(awk -v a="$first_ms" -v b="$second_ms" 'BEGIN {
      lo = a < b ? a : b; hi = a < b ? b : a; spread = (hi - lo) / lo
      margin = 2 * spread > 0.01 ? 2 * spread : 0.01
      printf "%.6g %.6g %.6g\n", lo, margin, spread }')
    winners=""
    for choice in $choices $warpgroup_choices; do
      ms=${choice_ms[$choice]}
      if [ -n "$ms" ] && awk -v a="$ms" -v b="$base_ms" -v m="$margin" 'BEGIN { exit !(a > 0 && a <= (1 - m) * b) }'; then
        winners="$winners $choice"
      fi
    done
    winners=${winners# }
    # The options for the next rows: the winners, fastest first, each kept unless a faster one
    # already set its key or excludes it (the overlapped backward and dQ in the key walk).
    options="" left_out=""
    for choice in $(for c in $winners; do echo "${choice_ms[$c]} $c"; done | sort -g | cut -d' ' -f2); do
      if excluded "$choice" "$options"; then
        left_out="$left_out $choice"
      else
        options="$options $choice"
      fi
    done
    options=${options# } left_out=${left_out# }
    defaults=$(awk -v a="$first_ms" -v b="$second_ms" -v s="$spread" -v m="$margin" \
      'BEGIN { printf "the defaults ran %.2f and %.2f ms a step, %.1f%% apart; the margin: %.1f%%", a, b, 100 * s, 100 * m }')
    printf '%s\n' "$options" > "$pack/bench-options"  # BENCH_OPTIONS=from-candidates (empty: none won)
    if [ -n "$winners" ]; then
      verdict="Faster than the defaults at 774M by the margin ($defaults): $winners."
      [ -n "$left_out" ] && verdict="$verdict Left out, as a faster one excludes them: $left_out."
      verdict="$verdict Next: BENCH_OPTIONS='$options' BENCH_ROWS=mfu"
    else
      verdict="No choice was faster than the defaults at 774M by the margin ($defaults)."
    fi
  fi
  { echo; echo "$verdict"; } >> "$table"
  publish
  cat "$summary"
  exit 0
fi
if [ "$rows" = mfu ]; then
  run 350m bf16 16 "$core_attention"
  run 350m bf16 32 "$core_attention"
  run 774m bf16 16 "$core_attention"
  run 774m bf16 32 "$core_attention"
  run 350m bf16 16 "$core_attention" fused 4 pointers false 8
  run 774m bf16 16 "$core_attention" fused 4 pointers false 8
  run 774m bf16 8 "$core_attention" fused 4 pointers false 16
  cat "$summary"
  exit 0
fi
if [ "$rows" != variants ]; then
  for mb in 8 16 32; do run 124m bf16 "$mb" "$core_attention"; done
  run 124m fp32 8
  run 350m bf16 8 "$core_attention"
  run 774m bf16 8 "$core_attention"
fi
if [ "$rows" = core ]; then
  publish
  cat "$summary"
  exit 0
fi
# The GEMM attention (run.attention = gemm) in its default schedule against flash, and flash with
# the matmul epilogues in separate kernels.
run 124m bf16 8 gemm
run 124m bf16 32 gemm
run 124m bf16 8 flash separate
# The GEMM attention's other schedules against the default (4 blocks, pointer arrays): the full
# square in strided calls (the default before 2026-11-22), 2 and 8 blocks with pointer arrays,
# 4 blocks in strided calls; then the full square and 8 blocks at 32.
run 124m bf16 8 gemm fused 1 strided
run 124m bf16 8 gemm fused 2 pointers
run 124m bf16 8 gemm fused 8 pointers
run 124m bf16 8 gemm fused 4 strided
run 124m bf16 32 gemm fused 1 strided
run 124m bf16 32 gemm fused 8 pointers
cat "$table"
publish
