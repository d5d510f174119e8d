# shellcheck shell=bash
# Sourced by the scripts that run on a lent GPU machine (gpu_check.sh, gpu_bench.sh,
# llmc_reference.sh, kernels/run.sh). A command there is killed at its time limit (600 s at
# most), and then only what is already under $OUT comes back. So each stage runs under a cap
# taken from one budget for the whole script (capped), a hang costs that stage and not the
# sitting, and the scripts write their summary into $OUT after every stage (publish_to_out),
# headed by the GPU and the build (gpu_description).
#
#   GPU_BUDGET_S  seconds for the whole script (default 540: the 600 s limit less a margin for
#                 writing the archive of the logs)
budget_total=${GPU_BUDGET_S:-540}
budget_start=$SECONDS

budget_left() { echo $((budget_total - (SECONDS - budget_start))); }

# capped CAP COMMAND [ARGS...]: COMMAND (an executable, not a shell function) under timeout,
# for CAP seconds or what is left of the budget if that is less. Exit status: COMMAND's; 124
# when it ran out of time (SIGKILL 5 s after the SIGTERM if it ignores that); 125, without
# running it, when less than 10 s of the budget are left.
capped() {
  local cap=$1 left
  shift
  left=$(budget_left)
  if ((left < 10)); then
    echo "budget spent (${budget_total} s, GPU_BUDGET_S): skipped $*" >&2
    return 125
  fi
  ((cap > left)) && cap=$left
  timeout -k 5 "$cap" "$@"
  local rc=$?
  ((rc == 124)) && echo "timed out after $cap s: $*" >&2
  return $rc
}

# publish_to_out FILE NAME DIR [EXCLUDE...]: FILE as $OUT/NAME.md and DIR (less the EXCLUDE
# patterns) as $OUT/NAME-logs.tgz; nothing without OUT. Called after every run, so that what
# a kill leaves behind is already there.
publish_to_out() {
  [ -n "${OUT:-}" ] || return 0
  local file=$1 name=$2 dir=$3
  shift 3
  mkdir -p "$OUT"
  cp "$file" "$OUT/$name.md"
  tar czf "$OUT/$name-logs.tgz" "${@/#/--exclude=}" -C "$dir" .
}

# gpu_description [PACK]: the GPU (nvidia-smi: name, driver, memory, top SM clock) and, given a
# pack, the build it holds (build.txt, the first line of `trident --version`, written by
# gpu_pack.sh): the head of every summary, so that each figure names its GPU and its commit.
gpu_description() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  [ $# -eq 0 ] || echo "build: $(cat "$1/build.txt" 2>/dev/null || echo "unknown (a pack without build.txt)")"
}
