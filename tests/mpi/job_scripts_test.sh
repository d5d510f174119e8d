# The job scripts of jobs/ (docs/running-on-slurm.md), with stand-ins for srun and scontrol:
# - slurm-train.sbatch trains in the deck's run.dir, or in the command line's --run.dir, which
#   it accepts with --run.threads as the user gives them; it requeues a run that was stopped
#   before its end by the time-limit warning or stalled (exit 4), and not a complete one nor one
#   sent SIGTERM (preempted or cancelled), which it outlives until the ranks' checkpoint; a bad
#   deck ends the job before any rank starts;
# - mpirun-until-complete.sh, signalled itself, stops the run with a checkpoint and does not
#   start another attempt; rerun, it completes;
# - mpirun-local.sh runs from any directory.
source "$(dirname "$0")/lib.sh"
tiny_deck deck.ini
sed -i 's/^dir = run$/dir = from_deck/' deck.ini
jobs_dir="$TRIDENT_SOURCE_DIR/jobs"

# A repository as sbatch sees it: the job runs in the submit directory, from a copy of the script.
mkdir -p repo/build/bin fakebin && ln -s "$TRIDENT" repo/build/bin/trident && cp deck.ini repo/
cat > fakebin/srun <<FAKE
#!/usr/bin/env bash
# srun stand-in: one rank per task under mpirun; STOP_AFTER_METRICS=FILE sends SIGUSR1 to the
# ranks once FILE has a line (as Slurm does before the time limit); with PREEMPT=1 it sends
# SIGTERM to the ranks and to the batch script, its parent (as Slurm does on preemption).
echo "srun \$*" >> "$WORK_DIR/srun.calls"
args=(); for a in "\$@"; do case \$a in --cpu-bind=* | --kill-on-bad-exit=*) ;; *) args+=("\$a") ;; esac; done
"$MPIEXEC" --oversubscribe -np "\$SLURM_NTASKS" "\${args[@]}" &
job=\$!
if [ -n "\${STOP_AFTER_METRICS:-}" ]; then
  for _ in \$(seq 300); do [ -s "\$STOP_AFTER_METRICS" ] && break; sleep 0.1; done
  if [ "\${PREEMPT:-0}" = 1 ]; then
    kill -TERM \$PPID
    pkill -TERM -f "^\${args[0]} train deck.ini"
  else
    pkill -USR1 -f "^\${args[0]} train deck.ini"
  fi
fi
wait \$job
FAKE
printf '#!/usr/bin/env bash\necho "scontrol $*" >> "%s/scontrol.calls"\n' "$WORK_DIR" > fakebin/scontrol
chmod +x fakebin/srun fakebin/scontrol
slurm() {  # slurm JOB_ID ARGS...: the batch script as Slurm would run it, from repo/
  (cd repo && env -u TRIDENT PATH="$WORK_DIR/fakebin:$PATH" SLURM_JOB_ID=$1 SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 \
     SLURM_SUBMIT_DIR="$WORK_DIR/repo" bash "$jobs_dir/slurm-train.sbatch" "${@:2}")
}
common="--train.eval_batches=0 --optim.decay_steps=20000"

slurm 11 deck.ini --train.steps=5 $common > deck_dir.log 2>&1; rc=$?
[ $rc -eq 0 ] && [ -e repo/from_deck/complete ] && [ ! -e scontrol.calls ] \
  && pass "sbatch: the deck's run.dir, complete, not requeued" || fail "sbatch, deck's run.dir: rc $rc: $(tail -3 deck_dir.log)"

STOP_AFTER_METRICS=mine/metrics.jsonl slurm 12 deck.ini --run.dir=mine --run.threads=1 --train.steps=20000 --checkpoint.every=0 \
  $common > mine.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^stopped by a signal after step" mine.log && [ ! -e repo/mine/complete ] \
  && grep -q "^scontrol requeue 12$" scontrol.calls && grep -q "^srun .* --run.threads=1 " srun.calls \
  && [ "$(grep -c -- "--run.threads" <(tail -1 srun.calls))" = 1 ] \
  && pass "sbatch: --run.dir and --run.threads taken as given; stopped by SIGUSR1, requeued" \
  || fail "sbatch, own run.dir: rc $rc: $(grep -m2 'error\|stopped' mine.log); $(cat scontrol.calls 2>/dev/null)"
slurm 12 deck.ini --run.dir=mine --run.threads=1 --train.steps=20000 $common > mine2.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^restart: resuming from" mine2.log && [ -e repo/mine/complete ] \
  && [ "$(grep -c requeue scontrol.calls)" = 1 ] && pass "sbatch: the requeued job resumes and completes" \
  || fail "sbatch, requeued: rc $rc: $(tail -2 mine2.log)"

# Preemption (or scancel): SIGTERM to the tasks and to the script. The script outlives it until
# srun returns (the ranks write their checkpoint) and leaves the requeue to Slurm.
PREEMPT=1 STOP_AFTER_METRICS=preempted/metrics.jsonl slurm 15 deck.ini --run.dir=preempted --train.steps=20000 \
  --checkpoint.every=0 $common > preempted.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^stopped by a signal after step" preempted.log \
  && grep -q "^trident: the job was sent SIGTERM (preempted or cancelled; exit 0): not requeued" preempted.log \
  && ls repo/preempted/checkpoints/step-*.h5 > /dev/null && ! grep -q "requeue 15" scontrol.calls \
  && pass "sbatch: SIGTERM to the script and ranks: it waits for their checkpoint, no requeue of its own" \
  || fail "sbatch, preempted: rc $rc: $(tail -3 preempted.log)"

# A stall (exit 4; the TRIDENT_TEST_STALL hook hangs rank 1 in step 3, after step 2's checkpoint) is
# requeued, srun asked to end every task when one fails.
TRIDENT_TEST_STALL=1:5 slurm 14 deck.ini --run.dir=stalled --train.steps=6 --checkpoint.every=2 --run.stall_timeout=5 \
  $common > stalled.log 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^trident: error on rank .*no progress for .* at step 3: " stalled.log \
  && grep -q "^trident: a rank stalled (exit 4" stalled.log && grep -q "^scontrol requeue 14$" scontrol.calls \
  && [ ! -e repo/stalled/complete ] && grep -q "^srun .*--kill-on-bad-exit=1 " <(tail -1 srun.calls) \
  && pass "sbatch: a stalled run (exit 4) is requeued; srun runs with --kill-on-bad-exit=1" \
  || fail "sbatch, stalled: rc $rc: $(grep -m2 'error\|stalled' stalled.log); $(tail -1 scontrol.calls 2>/dev/null)"

calls_before=$(wc -l < srun.calls)
slurm 13 deck.ini --train.micro_batch=0 > bad.log 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "train.micro_batch" bad.log && [ "$(wc -l < srun.calls)" = "$calls_before" ] \
  && pass "sbatch: a bad deck ends the job before srun (exit 2)" || fail "sbatch, bad deck: rc $rc: $(tail -2 bad.log)"

# mpirun-until-complete.sh, signalled itself, from another directory (the executable found
# beside the script's folder).
mkdir -p repo/jobs elsewhere && cp "$jobs_dir"/*.sh repo/jobs/
(cd elsewhere && env -u TRIDENT bash ../repo/jobs/mpirun-until-complete.sh 2 until ../deck.ini --train.steps=20000 $common \
  > ../until.log 2>&1) &
script=$!
for _ in $(seq 300); do [ -s elsewhere/until/metrics.jsonl ] && break; sleep 0.1; done
# Its own copy of the script only: other tests (diverged, stall) run mpirun-until-complete.sh too.
pkill -USR1 -f "repo/jobs/mpirun-until-complete.sh 2 until"
wait $script; rc=$?
[ $rc -eq 0 ] && grep -q "^stopped by a signal after step" until.log && grep -q "^stopped on request after attempt 1" until.log \
  && [ ! -e elsewhere/until/complete ] && [ "$(ls elsewhere/until/checkpoints/step-*.h5 | wc -l)" = 1 ] \
  && pass "mpirun-until-complete.sh: a signal to it stops the run with a checkpoint, no second attempt" \
  || fail "mpirun-until-complete.sh stop: rc $rc: $(tail -3 until.log)"
(cd elsewhere && env -u TRIDENT bash ../repo/jobs/mpirun-until-complete.sh 2 until ../deck.ini --train.steps=20000 $common \
  > ../until2.log 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^restart: resuming from" until2.log && grep -q "^complete after 1 attempt" until2.log \
  && pass "mpirun-until-complete.sh: rerun resumes and completes" || fail "mpirun-until-complete.sh rerun: rc $rc: $(tail -3 until2.log)"

(cd elsewhere && env -u TRIDENT bash ../repo/jobs/mpirun-local.sh 2 ../deck.ini --train.steps=3 --run.dir=local $common > ../local.log 2>&1); rc=$?
[ $rc -eq 0 ] && [ -e elsewhere/local/complete ] && pass "mpirun-local.sh from another directory" \
  || fail "mpirun-local.sh: rc $rc: $(tail -2 local.log)"
finish
