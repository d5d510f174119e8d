#!/usr/bin/env bash
# Packs Trident's GPU programs for a lent GPU machine into ONE compressed archive that fits the
# device's 64 MiB limit on what travels (../shared/docs/gpu-machines.md; the unpacked folder of
# ../shared/tools/device-pack is ~95 MB, mostly OpenBLAS and the other host libraries, which the
# GPU machine may lack), optionally with the same programs of a second build beside them, to
# compare two versions in one sitting (the libraries are shared, so the second costs ~7 MiB).
#
#   here:   bash perf/gpu_pack.sh [BUILD_DIR [OTHER_NAME OTHER_BUILD_DIR]]
#           (BUILD_DIR: build; both built with -DTRIDENT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real:
#           machine code for H100/H200 only, without the PTX that plain 90 adds for later GPUs,
#           which the lent machines never need: the sitting's pack of 7 playground programs is
#           49 MiB instead of 67, 2026-11-24; 52 MiB with the overlapped wgmma kernels, 59 with
#           the two-warpgroup ones at de49f71: with the working tree's 3, 62 of the 64 MiB)
#           -> .gpu/pack.tgz  (git-ignored; carry ".gpu")
#   there:  tar xzf .gpu/pack.tgz -C /tmp && bash perf/gpu_check.sh /tmp/devpack
#           and, for the second build, the same scripts with /tmp/devpack-OTHER_NAME
#
# PACK_PLAYGROUND=PATTERN packs only the playground programs whose name matches the extended
# regular expression (as perf/kernels/run.sh's PLAYGROUND): each one carries the whole kernel
# library (~2.4 MiB compressed with 90-real: 32 MiB with none, 49 with 7), so all of them no
# longer fit beside the rest (64 MiB with the 13 of 2026-11-24). PACK_PLAYGROUND=none packs none.
#
# The second pack holds only its programs and an env.sh that sources the first one's (same
# libraries: both builds link the same system packages) and puts its own bin/ first on PATH.
set -euo pipefail
build=${1:-build}
other_name=${2:-}
other_build=${3:-}
tool=${DEVICE_PACK:-../shared/tools/device-pack}
programs=(trident trident_gpu_tests check_metrics)
[ -x "$tool" ] || { echo "gpu_pack.sh: $tool not found (set DEVICE_PACK)" >&2; exit 2; }
for p in "${programs[@]}"; do
  [ -x "$build/bin/$p" ] || { echo "gpu_pack.sh: $build/bin/$p missing: build with -DTRIDENT_CUDA=ON first" >&2; exit 2; }
done
# playgrounds DIR: the playground programs of DIR/bin that PACK_PLAYGROUND selects.
playgrounds() {
  local exe pattern=${PACK_PLAYGROUND:-}
  for exe in "$1"/bin/playground_*; do
    [ -x "$exe" ] || continue
    [[ -z "$pattern" || "$(basename "$exe")" =~ $pattern ]] && echo "$exe"
  done
  return 0
}
mapfile -t selected < <(playgrounds "$build")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$tool" "$stage/devpack" "${programs[@]/#/$build/bin/}" "${selected[@]}" > /dev/null
# build.txt: the first line of `trident --version` (version, commit, build type), which the
# scripts there print beside the GPU's name, so that every figure names the commit it ran.
"$build/bin/trident" --version | sed -n 1p > "$stage/devpack/build.txt"
if [ -n "$other_name" ]; then
  [[ "$other_name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "gpu_pack.sh: OTHER_NAME must be letters, digits, _ or -" >&2; exit 2; }
  mkdir -p "$stage/devpack-$other_name/bin"
  for p in "${programs[@]}"; do cp "$other_build/bin/$p" "$stage/devpack-$other_name/bin/"; done
  mapfile -t other_selected < <(playgrounds "$other_build")
  [ ${#other_selected[@]} -eq 0 ] || cp "${other_selected[@]}" "$stage/devpack-$other_name/bin/"
  "$other_build/bin/trident" --version | sed -n 1p > "$stage/devpack-$other_name/build.txt"
  cat > "$stage/devpack-$other_name/env.sh" <<'ENV'
# source me on the GPU machine: the first pack's libraries and runtime, this pack's programs
second=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # not "here": the first env.sh sets that
# shellcheck disable=SC1091
source "$second/../devpack/env.sh"
export PATH="$second/bin:$PATH"
ENV
fi
mkdir -p .gpu
tar czf .gpu/pack.tgz -C "$stage" .
size=$(du -m .gpu/pack.tgz | cut -f1)
echo "gpu_pack.sh: .gpu/pack.tgz, $size MiB with ${#selected[@]} playground programs (carry \".gpu\"; the working tree and every carry: 64 MiB in all)"
if [ "$size" -gt 60 ]; then
  echo "gpu_pack.sh: $size MiB leaves too little room under the 64 MiB a run may carry: choose the playground" \
    "programs with PACK_PLAYGROUND=PATTERN (or none), and build with -DCMAKE_CUDA_ARCHITECTURES=90-real" >&2
  exit 1
fi
