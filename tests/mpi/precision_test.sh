# Mixed precision (train.precision = bf16 | fp16) on the CPU twin, with 16-bit storage over the
# fp32 kernels (kernels/rounded_storage_backend.h: 16-bit activation buffers widened for each
# kernel):
# - the quickstart model trained to its plateau (600 steps: around step 200 the loss falls
#   steeply and a small perturbation shifts the fall by several steps, so an earlier comparison
#   would measure timing, not precision): the bf16 validation loss ends within 2% of fp32 (the
#   issue's bound), and the losses differ from fp32 (the rounding is really applied);
# - fp16 starting at a loss scale of 2^24 overflows: those steps are skipped and logged, the
#   scale backs off, and training still ends within 2% of fp32;
# - restart: bf16 on dp = 2 with ZeRO-1 (master weights sharded) and fp16 (loss-scaler state,
#   growing every 3 clean steps so that the count matters) resume bit-identically; the fp16
#   restart names the loss scale it resumed at;
# - layouts: bf16 on tp = 2 (with and without sequence parallelism) and pp = 2 against one
#   rank within 1e-3 relative; their collectives and sends move the 16-bit activations as they
#   are (tensor sums rounded to bf16 as NCCL's are): half of fp32's tensor and pipeline bytes.
#   fp32 layouts agree to ~1e-6; rounding to 8 significant bits can turn such a difference
#   into one bf16 unit of an activation (2^-8), measured up to 6e-5 on the loss here;
# - gradients reduced in the deck's precision (parallel.grad_reduce = auto): bf16 on dp = 2
#   within 1e-3 of one rank, differing from the fp32 reduction (which matches one rank), at half
#   its data-parallel bytes; the 16-bit wire's buffers hold what the memory estimate counted;
# - fp16 overflowing on pp = 2 and on dp = 2 with ZeRO-1 (fp32 reduction) skips the same steps
#   as one rank; with the fp16 reduction, sums past 65504 overflow too: the scaler backs off
#   further, and training still ends within 2% of one rank;
# - an fp32 checkpoint resumes in bf16 (precision may change on restart).
source "$(dirname "$0")/lib.sh"

last_val_loss() { grep '"val_loss"' "$1" | tail -1 | sed 's/.*"val_loss": \([^,}]*\).*/\1/'; }
# within_percent A B P: |A - B| <= P% of B, both numbers (awk reads "" or null as 0, and two
# missing losses then agreed), B positive.
within_percent() {
  awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { number = "^-?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$"
    if (a !~ number || b !~ number || b + 0 <= 0) exit 1
    d = a - b; if (d < 0) d = -d; exit !(d <= p / 100 * b) }'
}

sed "s#^path = .*#path = $WORK_DIR/quickstart.h5#; s#^dir = .*#dir = run#" \
  "$TRIDENT_SOURCE_DIR/inputs/quickstart.ini" > quick.ini
# The CPU twin's precision (the deck says auto; tests/gpu/training_test.sh runs it on a GPU).
quick="--train.steps=600 --train.eval_every=0 --run.restart=none --run.device=cpu"
for p in fp32 bf16; do
  mpi 1 train quick.ini $quick --train.precision=$p --run.dir=q$p > q$p.log 2>&1 || { tail -5 q$p.log; fail "quickstart $p"; }
done
mpi 1 train quick.ini $quick --train.precision=fp16 --train.loss_scale=16777216 --run.dir=qover > qover.log 2>&1 \
  || { tail -5 qover.log; fail "quickstart fp16 from 2^24"; }
ref=$(last_val_loss qfp32/metrics.jsonl)
[ -n "$ref" ] && awk -v l="$ref" 'BEGIN { exit !(l > 0 && l < 1.5) }' && pass "fp32 quickstart learned (validation loss $ref from ln 17 = 2.83)" \
  || fail "fp32 quickstart validation loss $ref"
for run in qbf16 qover; do
  val=$(last_val_loss $run/metrics.jsonl)
  within_percent "$val" "$ref" 2 && pass "$run: validation loss $val within 2% of fp32 $ref" \
    || fail "$run: validation loss $val not within 2% of fp32 $ref"
done
for run in qbf16 qover; do
  "$CHECK_METRICS" compare qfp32/metrics.jsonl $run/metrics.jsonl loss 0 > /dev/null \
    && fail "$run: losses identical to fp32 (no rounding applied?)" || pass "$run: losses differ from fp32"
done
grep -q "^precision: bf16 activations" qbf16.log && grep -q "bf16 storage on fp32 kernels" qbf16.log \
  && grep -q "^activation storage: bf16 buffers" qbf16.log \
  && pass "bf16 run says its precision" || fail "bf16 banner"
grep -q '^step [0-9]*: fp16 gradients overflowed at loss scale 1.67772e+07: update skipped, scale now 8.38861e+06' qover.log \
  && grep -q '"loss_scale": 16777216, "skipped": 1' qover/metrics.jsonl \
  && pass "fp16 overflow at 2^24: step skipped, logged, scale halved" || fail "fp16 overflow not reported"
skipped=$(grep -c '"skipped": 1' qover/metrics.jsonl)
[ "$skipped" -ge 1 ] && [ "$skipped" -le 60 ] && pass "fp16: $skipped of 600 steps skipped" || fail "fp16: $skipped steps skipped"

# Restarts, tiny model.
tiny_deck deck.ini
common="--optim.decay_steps=20 --train.eval_batches=0"
for spec in "bf16z:2:--train.precision=bf16 --parallel.dp=2 --parallel.zero=1" \
            "fp16:1:--train.precision=fp16 --train.loss_scale=16777216 --train.loss_scale_window=3"; do
  IFS=: read -r name ranks flags <<< "$spec"
  mpi $ranks train deck.ini --train.steps=20 --run.dir=$name.straight $flags $common > $name.straight.log 2>&1 \
    || { tail -5 $name.straight.log; fail "$name straight"; continue; }
  mpi $ranks train deck.ini --train.steps=10 --checkpoint.every=10 --run.dir=$name.split $flags $common \
    > $name.first.log 2>&1 || { tail -5 $name.first.log; fail "$name first half"; continue; }
  mpi $ranks train deck.ini --train.steps=20 --run.dir=$name.split $flags $common > $name.second.log 2>&1 \
    || { tail -5 $name.second.log; fail "$name second half"; continue; }
  "$CHECK_METRICS" compare $name.straight/metrics.jsonl $name.split/metrics.jsonl loss 0 > /dev/null &&
  "$CHECK_METRICS" compare-params $name.straight/final-params.h5 $name.split/final-params.h5 0 > /dev/null &&
    pass "$name: restart bit-identical (losses, final fp32 parameters)" || fail "$name: restart differs"
done
"$CHECK_METRICS" compare fp16.straight/metrics.jsonl fp16.split/metrics.jsonl loss_scale 0 > /dev/null \
  && pass "fp16: loss scale resumed with its clean-step count" || fail "fp16: loss scale differs after restart"
# The start-up report names train.loss_scale; the restart says which scale it resumed at instead.
grep -q "^restart: fp16 loss scale 4194304 from the checkpoint (0 clean steps), not train.loss_scale = 16777216$" \
  fp16.second.log && pass "fp16: the restart names the checkpoint's loss scale" \
  || fail "fp16: the resumed loss scale is not said: $(grep '^restart' fp16.second.log)"
# The tiny model at 2^24 both overflows and grows again within 20 steps (window 3), so the
# comparison above covers a clean-step count carried across the checkpoint.
grep -q '"skipped": 1' fp16.straight/metrics.jsonl && [ "$(grep -o '"loss_scale": [0-9]*' fp16.straight/metrics.jsonl | sort -u | wc -l)" -ge 3 ] \
  && pass "fp16 tiny run both backs off and grows" || fail "fp16 tiny run: the scale did not move both ways"

# Layouts against one rank, bf16. The loss alone is nearly blind to a gradient's scale (AdamW
# divides it out: a clip factor of 1/1000 on every step moved the loss by 5e-4), so the
# gradient norms too, within 1e-2 (measured: 2.5e-3 on tp = 2, 7e-4 on dp = 2, both from bf16
# sums in another order); and the final parameters where the layout rounds nothing differently
# (pp = 2 sends the stored bf16 values; dp = 2 with the fp32 reduction): within 1e-5, measured
# 2e-9 and 3e-8. Elsewhere bf16 rounding in another order moves the key bias, whose gradient is
# zero in exact arithmetic (check_metrics compare-params), by tens of percent: not compared.
mpi 1 train deck.ini --train.precision=bf16 --run.dir=one $common > one.log 2>&1 || fail "bf16 one rank"
for spec in "tp2:--parallel.tp=2:" "tp2sp:--parallel.tp=2 --parallel.sequence_parallel=true:" "pp2:--parallel.pp=2:1e-5" \
            "dp2:--parallel.dp=2:" "dp2fp32:--parallel.dp=2 --parallel.grad_reduce=fp32:1e-5"; do
  IFS=: read -r name flags params_tolerance <<< "$spec"
  mpi 2 train deck.ini --train.precision=bf16 --run.dir=$name $flags $common > $name.log 2>&1 \
    || { tail -5 $name.log; fail "bf16 $name"; continue; }
  out=$("$CHECK_METRICS" compare one/metrics.jsonl $name/metrics.jsonl loss 1e-3) \
    && pass "bf16 $name matches one rank: $out" || fail "bf16 $name: $out"
  out=$("$CHECK_METRICS" compare one/metrics.jsonl $name/metrics.jsonl grad_norm 1e-2) \
    && pass "bf16 $name gradient norms: $out" || fail "bf16 $name gradient norms: $out"
  if [ -n "$params_tolerance" ]; then
    out=$("$CHECK_METRICS" compare-params one/final-params.h5 $name/final-params.h5 "$params_tolerance") \
      && pass "bf16 $name final parameters within $params_tolerance" || fail "bf16 $name final parameters: $out"
  fi
done

# 16-bit buffers on every layout, moved as 16 bits: half the pipeline bytes on pp = 2, and half
# the tensor group's (its fp32 vocabulary statistics, 12 bytes per row, aside) on tp = 2.
grep -q "^activation storage: bf16 buffers.*pipeline stages send them as bf16" pp2.log \
  && grep -q "^activation storage: bf16 buffers.*the tensor group moves them as bf16" tp2.log \
  && pass "bf16 activation storage: 16-bit buffers on pp = 2 and tp = 2" || fail "activation storage lines"
mpi 2 train deck.ini --parallel.pp=2 --run.dir=pp2fp32 $common > pp2fp32.log 2>&1 || fail "fp32 pp2"
mpi 2 train deck.ini --parallel.tp=2 --run.dir=tp2fp32 $common > tp2fp32.log 2>&1 || fail "fp32 tp2"
group_mb() { awk -v g="$1" '$1 == g && $3 == "MB" { print $2; exit }' "$2"; }
for spec in "pipeline:pp2" "tensor:tp2"; do
  IFS=: read -r group name <<< "$spec"
  a=$(group_mb $group $name.log) b=$(group_mb $group ${name}fp32.log)
  awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && a < 0.55 * b) }' \
    && pass "$name: bf16 activations move $a MB per step in the $group group against $b MB in fp32" \
    || fail "$name: $group bytes $a MB (bf16) vs $b MB (fp32)"
done

# The bf16 reduction really rounds (the fp32 one gives other losses) and sends half the bytes
# (the data group's payload in the communication report).
"$CHECK_METRICS" compare dp2fp32/metrics.jsonl dp2/metrics.jsonl loss 0 > /dev/null \
  && fail "dp2: bf16 gradient reduction identical to fp32 (not applied?)" || pass "dp2: bf16 gradient reduction differs from fp32"
data_mb() { awk '$1 == "data" && $3 == "MB" { print $2; exit }' "$1"; }
awk -v a="$(data_mb dp2.log)" -v b="$(data_mb dp2fp32.log)" 'BEGIN { exit !(a > 0 && a < 0.55 * b) }' \
  && pass "dp2: bf16 reduction sends $(data_mb dp2.log) MB per step against $(data_mb dp2fp32.log) MB in fp32" \
  || fail "dp2: data-parallel bytes $(data_mb dp2.log) MB (bf16) vs $(data_mb dp2fp32.log) MB (fp32)"

# ZeRO-1 in bf16: the buckets send bf16 gradients to their owners and the all-gather the bf16 compute
# copy of the weights, so the data group moves half of fp32 ZeRO-1's bytes (with an fp32
# all-gather it would be three quarters).
mpi 2 train deck.ini --train.steps=5 --parallel.dp=2 --parallel.zero=1 --run.dir=z32 $common > z32.log 2>&1 \
  || { tail -5 z32.log; fail "fp32 dp2 ZeRO-1"; }
grep -q "ZeRO-1 buckets summed to their owners overlapping backward, then an all-gather of the bf16 weights" \
  bf16z.straight.log \
  && awk -v a="$(data_mb bf16z.straight.log)" -v b="$(data_mb z32.log)" 'BEGIN { exit !(a > 0 && a < 0.55 * b) }' \
  && pass "bf16 ZeRO-1 moves $(data_mb bf16z.straight.log) MB per step against $(data_mb z32.log) MB in fp32" \
  || fail "bf16 ZeRO-1: data-parallel bytes $(data_mb bf16z.straight.log) MB vs $(data_mb z32.log) MB in fp32"

# The 16-bit wire's encoded copies are what the memory table's "comm" column counted: per
# bucket (MPI's reductions are in flight together, under ZeRO-1 too); none for fp32.
reduction_buffers_match "dp2 bf16 buckets" dp2.log nonzero
reduction_buffers_match "dp2 bf16 ZeRO-1" bf16z.straight.log nonzero
reduction_buffers_match "dp2 bf16 ZeRO-1 after a restart" bf16z.second.log nonzero
reduction_buffers_match "dp2 fp32 wire" dp2fp32.log

# fp16 overflows on several ranks: every rank skips the same steps as one rank does (the
# reduction in fp32, so that only the values one rank also has can overflow).
fp16flags="--train.precision=fp16 --train.loss_scale=16777216 --train.loss_scale_window=3"
for spec in "fp16pp2:--parallel.pp=2" "fp16dp2z:--parallel.dp=2 --parallel.zero=1 --parallel.grad_reduce=fp32"; do
  IFS=: read -r name flags <<< "$spec"
  mpi 2 train deck.ini --train.steps=20 --run.dir=$name $fp16flags $flags $common > $name.log 2>&1 \
    || { tail -5 $name.log; fail "$name"; continue; }
  "$CHECK_METRICS" compare fp16.straight/metrics.jsonl $name/metrics.jsonl skipped 0 > /dev/null &&
  "$CHECK_METRICS" compare fp16.straight/metrics.jsonl $name/metrics.jsonl loss_scale 0 > /dev/null &&
  out=$("$CHECK_METRICS" compare fp16.straight/metrics.jsonl $name/metrics.jsonl loss 1e-3) \
    && pass "$name: same skipped steps and loss scales as one rank, $out" || fail "$name: differs from one rank"
done
# The fp16 reduction (the default for fp16) overflows on sums one rank never forms: more
# back-off, the same training.
mpi 2 train deck.ini --train.steps=20 --run.dir=fp16dp2w $fp16flags --parallel.dp=2 --parallel.zero=1 $common \
  > fp16dp2w.log 2>&1 || { tail -5 fp16dp2w.log; fail "fp16dp2w"; }
final_loss() { tail -1 "$1" | sed 's/.*"loss": \([^,}]*\).*/\1/'; }
grep -q '"skipped": 1' fp16dp2w/metrics.jsonl \
  && within_percent "$(final_loss fp16dp2w/metrics.jsonl)" "$(final_loss fp16.straight/metrics.jsonl)" 2 \
  && pass "fp16dp2w: fp16 reduction backs off and ends at $(final_loss fp16dp2w/metrics.jsonl), one rank $(final_loss fp16.straight/metrics.jsonl)" \
  || fail "fp16dp2w: fp16 reduction run"

# An fp32 checkpoint resumed in bf16.
mpi 1 train deck.ini --train.steps=10 --checkpoint.every=10 --run.dir=switch $common > switch.first.log 2>&1 \
  || fail "fp32 first half"
mpi 1 train deck.ini --train.steps=20 --train.precision=bf16 --run.dir=switch $common > switch.second.log 2>&1 \
  && grep -q "after step 10" switch.second.log && pass "fp32 checkpoint resumed in bf16" \
  || { tail -3 switch.second.log; fail "fp32 checkpoint resumed in bf16"; }
finish
