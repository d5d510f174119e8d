# Preemption: SIGUSR1 (Slurm's warning) and then SIGTERM shortly after, sent to every rank while
# it trains. Every rank must finish its step, agree, write one checkpoint and exit 0; the second
# signal must not corrupt anything; rerunning the same command must resume and finish with
# losses bit-identical to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
tiny_deck signal_deck.ini
flags="--train.steps=600 --optim.decay_steps=600 --train.eval_batches=0"
mpi 2 train signal_deck.ini $flags --run.dir=straight > straight.log 2>&1 || { tail -5 straight.log; fail "straight run"; finish; }

mpi 2 train signal_deck.ini $flags --run.dir=stopped > stopped.log 2>&1 &
job=$!
for _ in $(seq 100); do [ -s stopped/metrics.jsonl ] && break; sleep 0.1; done
# To the ranks themselves (as Slurm does for srun tasks); mpirun would forward SIGUSR1 but
# (a deck name of its own, so that tests running beside this one are not signalled)
# ends the whole job on SIGTERM.
pkill -USR1 -f "^$TRIDENT train signal_deck.ini" ; sleep 0.05; pkill -TERM -f "^$TRIDENT train signal_deck.ini"
wait $job; rc=$?
[ $rc -eq 0 ] && pass "stopped run exits 0" || { tail -5 stopped.log; fail "stopped run: exit $rc"; }
grep -q "^stopped by a signal after step" stopped.log && pass "$(grep '^stopped by' stopped.log)" \
  || fail "no stop message: $(tail -3 stopped.log)"
[ ! -e stopped/complete ] && pass "not marked complete" || fail "a stopped run was marked complete"

mpi 2 train signal_deck.ini $flags --run.dir=stopped > resumed.log 2>&1 || { tail -5 resumed.log; fail "resumed run"; }
grep -q "^restart: resuming from" resumed.log || fail "the rerun did not resume"
[ -e stopped/complete ] && pass "resumed run completes" || fail "resumed run not complete"
"$CHECK_METRICS" compare straight/metrics.jsonl stopped/metrics.jsonl loss 0 >/dev/null &&
  pass "losses bit-identical to the uninterrupted run" || fail "losses differ after the signal and resume"

# Ctrl-C as srun hands it to the tasks (SIGINT to each rank): the same stop after the step, with a
# checkpoint, exit 0; the rerun resumes to the same losses.
mpi 2 train signal_deck.ini $flags --run.dir=interrupted > interrupted.log 2>&1 &
job=$!
for _ in $(seq 100); do [ -s interrupted/metrics.jsonl ] && break; sleep 0.1; done
pkill -INT -f "^$TRIDENT train signal_deck.ini .*--run.dir=interrupted"
wait $job; rc=$?
[ $rc -eq 0 ] && grep -q "^stopped by a signal after step" interrupted.log && pass "SIGINT to the ranks: stopped with a checkpoint, exit 0" \
  || fail "SIGINT to the ranks: exit $rc: $(tail -3 interrupted.log)"
mpi 2 train signal_deck.ini $flags --run.dir=interrupted > interrupted-resumed.log 2>&1 \
  && "$CHECK_METRICS" compare straight/metrics.jsonl interrupted/metrics.jsonl loss 0 >/dev/null \
  && pass "after SIGINT: resumed, losses bit-identical" || fail "after SIGINT: $(tail -3 interrupted-resumed.log)"
finish
