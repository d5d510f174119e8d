#!/usr/bin/env bash
# Checkpoint write and read bandwidth against the raw bandwidth of the same disk, and the time
# from launch to the first resumed step. Figures in docs/performance.md come from it.
#
#   perf/checkpoint_io.sh [DECK [RANKS...]]     (default: inputs/gpt2-124m.ini 1 2 4)
#
# For each rank count N (data-parallel: every rank holds the model and writes its band):
#   write: five training steps with a checkpoint after each (parameters + AdamW moments),
#          timed by trident itself (checksums, transfers, fsync and rename included; not the
#          removal of the previous checkpoint), against five `dd bs=16M conv=fsync` of the same
#          size into the same directory;
#   read:  twice, page cache dropped, a restart that verifies every checksum (the whole file
#          read once, spread over the ranks), timed by trident, against three cold `dd` reads
#          of the checkpoint; then each rank's own read of its slices (warm), and the wall
#          time from the mpirun launch to the first resumed step's line.
# Every figure is the median of its repetitions: the disks of shared VMs vary by 2x between
# runs. Dropping the page cache needs root (echo 3 > /proc/sys/vm/drop_caches); without it the
# read figures come from memory, and the output says so.
set -euo pipefail
deck=${1:-inputs/gpt2-124m.ini}
shift || true
ranks_list=("$@")
[ ${#ranks_list[@]} -eq 0 ] && ranks_list=(1 2 4)
trident=${TRIDENT:-build/bin/trident}
work=${WORK:-$(mktemp -d -p "${TMPDIR:-/var/tmp}")}
mkdir -p "$work"
flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
small=(--train.seq_len=64 --train.micro_batch=1 --train.eval_batches=0 --log.every=1 --run.save_final=false
       --log.peak_tflops=1 --checkpoint.keep=1
       --data.path="$work/tokens.h5" --data.generate=synthetic --data.synthetic_tokens=400000)
cold="cold"
drop_caches() {
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || cold="WARM (cannot drop the page cache)"
}
seconds() { date +%s.%N; }
calc() { awk "BEGIN { print $* }"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "disk: $(df -h "$work" | awk 'NR == 2 {print $1, $2}') at $work; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
for n in "${ranks_list[@]}"; do
  run="$work/r$n"
  rm -rf "$run"
  mpirun "${flags[@]}" -np "$n" "$trident" train "$deck" --parallel.dp="$n" --train.global_batch="$n" \
    --train.steps=5 --checkpoint.every=1 --run.dir="$run" "${small[@]}" > "$run.write.log" 2>&1 \
    || { echo "== $n rank(s): training failed"; tail -5 "$run.write.log"; continue; }
  file=$(ls "$run"/checkpoints/step-*.h5)
  bytes=$(stat -c %s "$file")
  write_all=$(grep '^checkpoint:' "$run.write.log" | sed 's/.* written in \([0-9.]*\) s .*/\1/' | sort -g | tr '\n' ' ')
  write_s=$(echo "$write_all" | tr ' ' '\n' | grep . | median)

  blocks=$(( (bytes + 16777215) / 16777216 ))
  raw_write=$(for i in 1 2 3 4 5; do
    t0=$(seconds); dd if=/dev/zero of="$run/dd.bin" bs=16M count="$blocks" conv=fsync status=none; t1=$(seconds)
    rm -f "$run/dd.bin"; calc "$blocks * 16777216 / ($t1 - $t0) / 1e6"; done | median)
  raw_read=$(for i in 1 2 3; do
    drop_caches; t0=$(seconds); dd if="$file" of=/dev/null bs=16M status=none; t1=$(seconds)
    calc "$bytes / ($t1 - $t0) / 1e6"; done | median)

  for i in 1 2; do
    drop_caches
    start=$(seconds)
    mpirun "${flags[@]}" -np "$n" "$trident" train "$deck" --parallel.dp="$n" --train.global_batch="$n" \
      --train.steps=6 --checkpoint.every=0 --run.dir="$run" "${small[@]}" 2>&1 \
      | while IFS= read -r line; do echo "$(seconds) $line"; done > "$run.read$i.log"
    first_step=$(awk '$2 == "step" && $3 ~ /^6\// {print $1; exit}' "$run.read$i.log")
    echo "$(grep -m1 'verified' "$run.read$i.log" | sed 's/.* in \([0-9.]*\) s$/\1/') \
$(grep -m1 'resuming from' "$run.read$i.log" | sed 's/.*read in \([0-9.]*\) s.*/\1/') $(calc "$first_step - $start")"
  done > "$run.read.txt"
  verify_s=$(awk '{print $1}' "$run.read.txt" | median)
  load_s=$(awk '{print $2}' "$run.read.txt" | median)
  launch_s=$(awk '{print $3}' "$run.read.txt" | median)
  write_bw=$(calc "$bytes / $write_s / 1e6")
  verify_bw=$(calc "$bytes / $verify_s / 1e6")
  printf "== %d rank(s): checkpoint %.2f GB (medians of 5 writes and 5 dd, 2 restarts and 3 dd)\n" "$n" "$(calc "$bytes / 1e9")"
  printf "  writes (s, sorted): %s\n" "$write_all"
  printf "  write   %6.2f s  %6.0f MB/s   dd conv=fsync      %6.0f MB/s   -> %3.0f%% of raw\n" \
    "$write_s" "$write_bw" "$raw_write" "$(calc "100 * $write_bw / $raw_write")"
  printf "  verify  %6.2f s  %6.0f MB/s   dd read (%s) %6.0f MB/s   -> %3.0f%% of raw\n" \
    "$verify_s" "$verify_bw" "$cold" "$raw_read" "$(calc "100 * $verify_bw / $raw_read")"
  printf "  load    %6.2f s  (each rank reads its parameters and its moments, warm after the verify)\n" "$load_s"
  printf "  launch to first resumed step: %.1f s\n" "$(calc "$launch_s")"
done
