#!/usr/bin/env bash
# cmake/WriteBuildInfo.cmake names the commit checked out at build time: the short HEAD, with
# "-dirty" while tracked files differ from it (untracked ones do not count), a new commit after
# a commit, "unknown" outside a git clone, and the header left untouched when nothing changed
# (so that a rebuild at the same commit recompiles nothing).
#   build_info_test.sh SOURCE_DIR WORK_DIR [CMAKE]
set -u
source_dir=$1
work=$2
cmake=${3:-cmake}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
rm -rf "$work" && mkdir -p "$work/repo/cmake" && cd "$work/repo" || exit 1
cp "$source_dir/cmake/build_info.h.in" cmake/
git() { command git -c user.name=test -c user.email=test@example.com -c init.defaultBranch=main "$@"; }
git init -q . && echo one > tracked.txt && git add . && git commit -q -m one || exit 1

header=$work/out/trident/build_info.h
write() {
  "$cmake" -DGIT_EXECUTABLE="$(command -v git)" -DSOURCE_DIR="$1" -DOUTPUT="$header" \
        -DPROJECT_VERSION=9.8.7 -DCMAKE_BUILD_TYPE=Release "-DTRIDENT_BLAS_NAME=Some BLAS (/x y)" \
        -DHDF5_VERSION=1.2.3 -P "$source_dir/cmake/WriteBuildInfo.cmake" || fail "cmake -P failed"
}
commit_in_header() { sed -n 's/.*kGitCommit = "\(.*\)";/\1/p' "$header"; }
expect_commit() {
  local got; got=$(commit_in_header)
  if [ "$got" = "$1" ]; then echo "ok: $2 ($got)"; else fail "$2: header names '$got', expected '$1'"; fi
}

write "$PWD"
expect_commit "$(git rev-parse --short=12 HEAD)" "a clean clone names HEAD"
if ! grep -q 'kVersion = "9.8.7"' "$header" || ! grep -q 'kBlas = "Some BLAS (/x y)"' "$header"; then
  fail "the configure-time fields are not in the header"
fi

before=$(stat -c %Y "$header")
sleep 1.1
write "$PWD"
if [ "$(stat -c %Y "$header")" = "$before" ]; then
  echo "ok: unchanged header left alone"
else
  fail "the header was rewritten at the same commit (every rebuild would recompile its users)"
fi

echo untracked > untracked.txt
write "$PWD"
expect_commit "$(git rev-parse --short=12 HEAD)" "an untracked file is not a change"

echo two > tracked.txt
write "$PWD"
expect_commit "$(git rev-parse --short=12 HEAD)-dirty" "a changed tracked file marks the build dirty"

git commit -q -am two
write "$PWD"
expect_commit "$(git rev-parse --short=12 HEAD)" "a new commit is named at the next build"

mkdir -p "$work/plain/cmake" && cp cmake/build_info.h.in "$work/plain/cmake/"
write "$work/plain"
expect_commit unknown "outside a git clone"

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "PASS"
