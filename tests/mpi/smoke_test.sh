# The executable itself: --help, --version, check, prepare, an empty deck.
source "$(dirname "$0")/lib.sh"
tiny_deck good.ini

out=$("$TRIDENT" --help) && echo "$out" | grep -q "usage: trident" && pass "--help" || fail "--help: $out"
out=$("$TRIDENT" --version) || fail "--version exit"
for part in "trident " "MPI:" "HDF5:" "BLAS:" "CUDA:"; do
  echo "$out" | grep -q "$part" || fail "--version lacks '$part': $out"
done
out=$("$TRIDENT" check good.ini --ranks 4 2>&1) || fail "check: $out"
echo "$out" | grep -q "data groups: \[0,1,2,3\]" || fail "check: no layout table: $out"
echo "$out" | grep -q "memory per rank" || fail "check: no memory estimate: $out"
echo "$out" | grep -q "parallel.zero = 1, train.recompute = full" || fail "check: no memory alternatives: $out"
echo "$out" | grep -q "^dp = 4" || fail "check: dp not resolved: $out"
[ "$failures" -eq 0 ] && pass "check --ranks 4"

out=$("$TRIDENT" prepare synthetic --output syn.h5 --vocab 16 --tokens 5000 2>&1) || fail "prepare synthetic: $out"
echo "$out" | grep -qi "entropy rate" || fail "prepare synthetic does not print the entropy rate: $out"
printf 'hello world\nsecond line\n' > text.txt
out=$("$TRIDENT" prepare text --output text.h5 text.txt 2>&1) || fail "prepare text: $out"
[ -s text.h5 ] && pass "prepare text" || fail "prepare text wrote nothing"

# Every shipped deck validates (8 ranks; GPT-2 decks need a dataset of their own, so let check
# accept a missing one as "to be generated").
for deck in "$TRIDENT_SOURCE_DIR"/inputs/*.ini; do
  out=$("$TRIDENT" check "$deck" --ranks 8 --data.generate=synthetic --data.path=absent.h5 2>&1) \
    && pass "check $(basename "$deck")" || fail "check $(basename "$deck"): $out"
done

# An empty deck is all defaults: GPT-2 124M on data/tokens.h5, which does not exist here.
: > empty.ini
out=$("$TRIDENT" check empty.ini 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "data.path" && pass "empty deck: defaults, then a clear data error" \
  || fail "empty deck: rc $rc: $out"
finish
