# The README's quickstart on 2 ranks reaches a validation loss within 10% of its synthetic
# source's entropy rate (the loss floor).
source "$(dirname "$0")/lib.sh"
mpi 2 train "$TRIDENT_SOURCE_DIR/inputs/quickstart.ini" --run.dir=qs --data.path=qs.h5 > qs.log 2>&1 \
  || { cat qs.log; fail "quickstart run"; finish; }
tail -n 3 qs.log
"$CHECK_METRICS" floor qs/metrics.jsonl qs.h5 0.10 && pass "within 10% of the floor" || fail "loss floor"
finish
