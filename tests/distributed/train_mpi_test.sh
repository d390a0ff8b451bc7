#!/usr/bin/env bash
# tests/distributed/train_mpi_test.sh: `mpirun -np N train_lm train` end to end, run by ctest
# (tests/distributed/CMakeLists.txt) as four tests:
#
#   train_mpi_test.sh CASE TRAIN_LM MPIRUN...
#
#   equivalence  1, 2 and 3 processes, dropout 0, global batch 6: the same per-step losses
#                (metrics.csv, relative difference <= 1e-5) and the same checkpoint files
#   resume       2 ranks to step 10, then --resume on 3 ranks to step 20, against 1 process
#                doing the same (the checkpoint does not depend on N)
#   kill         kill -9 of rank 1 mid-run: mpirun ends non-zero within seconds, and the last
#                checkpoint still loads (train_lm generate)
#   bad_launch   more ranks than the global batch, a batch not divisible by N: exit 2 with a
#                clear message, nothing written
#
# MPIRUN is the launcher with the test's own settings (root allowed, loopback TCP, ...).
set -euo pipefail
case_name=$1
train_lm=$2
shift 2
mpirun=("$@")

work=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-train-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "FAIL ($case_name): $*" >&2; exit 1; }

# a small corpus (about 40 KB) that any checkout has: no download needed
for i in $(seq 1 1200); do
  echo "Call me Ishmael $((i * 7 % 13)). The whale swam $((i % 5)) leagues; the sea was grey."
done > corpus.txt

common=(--preset tiny --data corpus.txt --eval-iters 2 --no-progress --drop-rate 0
        --sample-length 0 --threads 1 --batch-size 6 --context-length 32)

run() {  # run NPROC ARGS...: 1 = without mpirun
  local n=$1
  shift
  if [[ $n == 1 ]]; then "$train_lm" train "$@"; else "${mpirun[@]}" -np "$n" "$train_lm" train "$@"; fi
}

# compare_losses A.csv B.csv: step and train_loss columns within a relative 1e-5 (+ the
# 1e-6 the CSV's 6 decimals round to)
compare_losses() {
  awk -F, 'NR == FNR { if (FNR > 1) want[$1] = $2; next }
           FNR > 1 { n++; if (!($1 in want)) { print "step " $1 " missing"; bad = 1; next }
                     d = $2 - want[$1]; if (d < 0) d = -d; a = want[$1] < 0 ? -want[$1] : want[$1];
                     r = d / a; if (r > worst) worst = r;
                     if (d > 1e-5 * a + 1e-6) { print "step " $1 ": " $2 " vs " want[$1]; bad = 1 } }
           END { printf "  %d steps, worst relative loss difference %.3g\n", n, worst; exit bad }' "$1" "$2"
}

case "$case_name" in
  equivalence)
    for n in 1 2 3; do
      run "$n" "${common[@]}" --steps 20 --eval-interval 10 --checkpoint-dir "ck$n" > "log$n" 2>&1 ||
        { cat "log$n"; fail "$n processes failed"; }
    done
    for n in 2 3; do
      echo "1 process vs $n:"
      compare_losses ck1/metrics.csv "ck$n/metrics.csv" || fail "losses differ between 1 and $n processes"
      [[ -f ck$n/step_00000020/model.safetensors ]] || fail "no checkpoint from $n processes"
    done
    # only rank 0 logs: one "done" line
    [[ $(grep -c "done: step 20" log3) == 1 ]] || { cat log3; fail "expected one 'done' line from 3 ranks"; }
    ;;
  resume)
    run 1 "${common[@]}" --steps 10 --eval-interval 5 --checkpoint-dir ref > log_a 2>&1 || { cat log_a; fail "1 process, first part"; }
    run 1 "${common[@]}" --steps 20 --eval-interval 5 --checkpoint-dir ref --resume > log_b 2>&1 || { cat log_b; fail "1 process, resumed"; }
    run 2 "${common[@]}" --steps 10 --eval-interval 5 --checkpoint-dir mix > log_c 2>&1 || { cat log_c; fail "2 ranks, first part"; }
    run 3 "${common[@]}" --steps 20 --eval-interval 5 --checkpoint-dir mix --resume > log_d 2>&1 || { cat log_d; fail "3 ranks, resumed"; }
    grep -q "resumed from" log_d || { cat log_d; fail "the 3-rank run did not resume"; }
    echo "1 process (10 + 10 steps) vs 2 ranks then 3 ranks:"
    compare_losses ref/metrics.csv mix/metrics.csv || fail "a resume on another N trains differently"
    ;;
  kill)
    run 2 "${common[@]}" --steps 100000 --eval-interval 3 --checkpoint-dir ck > log 2>&1 &
    launcher=$!
    for _ in $(seq 1 600); do [[ -e ck/latest ]] && break; sleep 0.1; done
    # this job's processes: the launcher's descendants (other tests may run their own ranks)
    descendants() { local p; for p in $(pgrep -P "$1" || true); do echo "$p"; descendants "$p"; done; }
    stop_job() { kill $(descendants "$launcher") "$launcher" 2>/dev/null || true; }
    [[ -e ck/latest ]] || { cat log; stop_job; fail "no checkpoint after 60 s"; }
    victim=""
    for pid in $(descendants "$launcher"); do
      if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
        victim=$pid
        break
      fi
    done
    [[ -n $victim ]] || { stop_job; fail "rank 1 not found"; }
    start=$(date +%s.%N)
    kill -9 "$victim"
    code=0
    for _ in $(seq 1 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$launcher" 2>/dev/null; then
      stop_job
      fail "mpirun still running 30 s after rank 1 was killed (a hang)"
    fi
    wait "$launcher" || code=$?
    end=$(date +%s.%N)
    echo "  mpirun exited with $code, $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s after kill -9 of rank 1"
    [[ $code != 0 ]] || fail "mpirun exited 0 after a rank was killed"
    "$train_lm" generate --checkpoint ck --prompt "Call" --max-new-tokens 8 --threads 1 > gen.log 2>&1 ||
      { cat gen.log; fail "the last checkpoint does not load"; }
    ;;
  bad_launch)
    code=0
    run 3 "${common[@]}" --batch-size 2 --steps 4 --checkpoint-dir big > log_big 2>&1 || code=$?
    [[ $code == 2 ]] || { cat log_big; fail "3 ranks, batch 2: exit $code, expected 2"; }
    grep -q "must be at least 3 (one row per process)" log_big || { cat log_big; fail "no clear message for N > batch"; }
    [[ ! -e big ]] || fail "3 ranks, batch 2 wrote $work/big"
    code=0
    run 3 "${common[@]}" --batch-size 8 --steps 4 --checkpoint-dir odd > log_odd 2>&1 || code=$?
    [[ $code == 2 ]] || { cat log_odd; fail "3 ranks, batch 8: exit $code, expected 2"; }
    grep -q "must divide evenly among the 3 processes; use a multiple of 3 (e.g. 9)" log_odd ||
      { cat log_odd; fail "no clear message for a batch not divisible by N"; }
    [[ $(grep -c "must divide evenly" log_odd) == 1 ]] || { cat log_odd; fail "the message should be printed once (rank 0)"; }
    ;;
  *) fail "unknown case" ;;
esac
echo "ok: $case_name"
