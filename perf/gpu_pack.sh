#!/usr/bin/env bash
# Packs Trident's GPU programs for a lent GPU machine into ONE compressed archive that fits the
# device's 64 MiB limit on what travels (../shared/docs/gpu-machines.md; the unpacked folder of
# ../shared/tools/device-pack is ~95 MB, mostly OpenBLAS and the other host libraries, which the
# GPU machine may lack), optionally with the same programs of a second build beside them, to
# compare two versions in one sitting (the system libraries are shared, so the second costs
# ~5 MiB).
#
#   here:   bash perf/gpu_pack.sh [BUILD_DIR [OTHER_NAME OTHER_BUILD_DIR]]
#           (BUILD_DIR: build; both built with -DTRIDENT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real
#           -DTRIDENT_SHARED_KERNELS=ON: machine code for H100/H200 only, without the PTX that
#           plain 90 adds for later GPUs, which the lent machines never need, and one kernel
#           library for all the programs: 32 MiB with all 13 playground programs at b828ee2)
#           -> .gpu/pack.tgz  (git-ignored; carry ".gpu")
#   there:  tar xzf .gpu/pack.tgz -C /tmp && bash perf/gpu_check.sh /tmp/devpack
#           and, for the second build, the same scripts with /tmp/devpack-OTHER_NAME
#
# PACK_PLAYGROUND=PATTERN packs only the playground programs whose name matches the extended
# regular expression (as perf/kernels/run.sh's PLAYGROUND); PACK_PLAYGROUND=none packs none.
# Build with -DTRIDENT_SHARED_KERNELS=ON: the programs then share one libtrident_kernels.so in
# the pack's lib/. Linked statically, each program carries the whole kernel library (~2.4 MiB
# compressed with 90-real: 59 MiB with 7 playground programs at de49f71, and the 13 no longer
# fit).
#
# The second pack holds only its programs, its own kernel library when it has one, and an env.sh
# that sources the first one's (the same system libraries: both builds link the same packages)
# and puts its own bin/ and lib/ first, so that its programs load its kernels, not the first's.
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
# kernel_library EXE: the path of the shared kernel library EXE loads here, empty when linked in;
# fails, naming it, when EXE needs one that the loader cannot find (a build tree moved).
kernel_library() {
  local found
  found=$(ldd "$1" | awk '$1 == "libtrident_kernels.so" {print $3}')
  if [ "$found" = not ]; then
    echo "gpu_pack.sh: $1 needs libtrident_kernels.so, which the loader cannot find: rebuild that tree" >&2
    return 1
  fi
  echo "$found"
}
mapfile -t selected < <(playgrounds "$build")
kernels=$(kernel_library "$build/bin/trident")
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$tool" "$stage/devpack" "${programs[@]/#/$build/bin/}" "${selected[@]}" > /dev/null
# build.txt: the first line of `trident --version` (version, commit, build type), which the
# scripts there print beside the GPU's name, so that every figure names the commit it ran.
"$build/bin/trident" --version | sed -n 1p > "$stage/devpack/build.txt"
# device-pack copies every library the programs load, the shared kernel library among them.
if [ -n "$kernels" ] && [ ! -f "$stage/devpack/lib/libtrident_kernels.so" ]; then
  echo "gpu_pack.sh: $kernels was not packed" >&2
  exit 1
fi
if [ -n "$other_name" ]; then
  [[ "$other_name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "gpu_pack.sh: OTHER_NAME must be letters, digits, _ or -" >&2; exit 2; }
  mkdir -p "$stage/devpack-$other_name/bin" "$stage/devpack-$other_name/lib"
  for p in "${programs[@]}"; do cp "$other_build/bin/$p" "$stage/devpack-$other_name/bin/"; done
  other_kernels=$(kernel_library "$other_build/bin/trident")
  [ -z "$other_kernels" ] || cp -L "$other_kernels" "$stage/devpack-$other_name/lib/"
  mapfile -t other_selected < <(playgrounds "$other_build")
  [ ${#other_selected[@]} -eq 0 ] || cp "${other_selected[@]}" "$stage/devpack-$other_name/bin/"
  "$other_build/bin/trident" --version | sed -n 1p > "$stage/devpack-$other_name/build.txt"
  cat > "$stage/devpack-$other_name/env.sh" <<'ENV'
# source me on the GPU machine: the first pack's libraries and runtime, this pack's programs
second=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # not "here": the first env.sh sets that
# shellcheck disable=SC1091
source "$second/../devpack/env.sh"
export PATH="$second/bin:$PATH"
export LD_LIBRARY_PATH="$second/lib:$LD_LIBRARY_PATH"
ENV
fi
mkdir -p .gpu
# The packs by name, not ".": the archive's "./" would carry the stage's mode (0700) onto
# /tmp when unpacked there as root, dropping its sticky bit.
tar czf .gpu/pack.tgz -C "$stage" devpack ${other_name:+"devpack-$other_name"}
size=$(du -m .gpu/pack.tgz | cut -f1)
echo "gpu_pack.sh: .gpu/pack.tgz, $size MiB with ${#selected[@]} playground programs (carry \".gpu\"; the working tree and every carry: 64 MiB in all)"
if [ -z "$kernels" ]; then
  echo "gpu_pack.sh: each program carries its own copy of the kernels: build with -DTRIDENT_SHARED_KERNELS=ON" \
    "for one shared copy (about 2.4 MiB less a program)" >&2
fi
if [ "$size" -gt 60 ]; then
  echo "gpu_pack.sh: $size MiB leaves too little room under the 64 MiB a run may carry: choose the playground" \
    "programs with PACK_PLAYGROUND=PATTERN (or none), and build with -DCMAKE_CUDA_ARCHITECTURES=90-real" \
    "-DTRIDENT_SHARED_KERNELS=ON" >&2
  exit 1
fi
