# The README's quickstart on 2 ranks reaches a validation loss within 10% of its synthetic
# source's entropy rate (the loss floor), and its communication report lists the data group
# (dp = 2) but not the pipeline group of one rank (pp = 1), which exchanges nothing.
source "$(dirname "$0")/lib.sh"
mpi 2 train "$TRIDENT_SOURCE_DIR/inputs/quickstart.ini" --run.dir=qs --data.path=qs.h5 > qs.log 2>&1 \
  || { cat qs.log; fail "quickstart run"; finish; }
tail -n 3 qs.log
"$CHECK_METRICS" floor qs/metrics.jsonl qs.h5 0.10 && pass "within 10% of the floor" || fail "loss floor"
report=$(sed -n '/^communication per step/,/^  total/p' qs.log)
echo "$report" | grep -q "^  data .* MB" && ! echo "$report" | grep -q "^  pipeline" \
  && pass "communication report: the data group, no pipeline group of one" || fail "communication report: $report"
finish
