#!/usr/bin/env bash
# scripts/fuzz.sh: build the libFuzzer targets of fuzz/ under ASan + UBSan (clang 14) and run
# each for a fixed time on its seed corpus; fails on a crash, a sanitizer report, a leak, an
# uncaught exception or a timeout.
#
#   scripts/fuzz.sh [SECONDS]        each target runs SECONDS (default 60); 4 targets, so the
#                                    whole run is about 4 x SECONDS plus the build
#   scripts/fuzz.sh --seeds          regenerate the safetensors seeds (a tiny train_lm run)
#   scripts/fuzz.sh --only NAME ...  run one target (fuzz_safetensors, fuzz_tokenizer,
#                                    fuzz_cli, fuzz_shapes)
#   scripts/fuzz.sh --seed N ...     libFuzzer's random seed (default: libFuzzer picks one and
#                                    the summary prints it); .ci/run derives it from the commit
#   scripts/fuzz.sh --runs N ...     stop each target after N inputs instead of SECONDS
#
# A run is not bit-reproducible even with --seed (the coverage an input reaches can depend on
# allocation addresses, e.g. a SIMD loop's alignment head), so a failing target prints each
# crash input in base64: an input found by CI is replayed, and kept as a regression seed in
# fuzz/corpus/<target>/, from the log alone (base64 -d > fuzz/corpus/<target>/regression_...).
#
# Needs clang-14 and libclang-rt-14-dev (scripts/deps.sh --fuzz). The build goes to
# build-fuzz/ (XGRAD_FUZZ_BUILD_DIR; a directory already configured with XGRAD_FUZZ=ON and
# XGRAD_SANITIZE=ON, such as the clang sanitizer suite's, is built as it stands), the growing corpora to build-fuzz/corpus/<target>/ (the
# committed seeds in fuzz/corpus/<target>/ are read, never written), crash inputs to
# build-fuzz/artifacts/. At the end a table gives, per target, the runs, executions per second,
# the coverage (libFuzzer's cov: edges, ft: features) and the corpus size.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${XGRAD_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${XGRAD_JOBS:-$(nproc)}
seconds=60
seeds_only=0
only=""
seed=""
runs=""
while (( $# )); do
  case "$1" in
    --seeds) seeds_only=1 ;;
    --only) only=$2; shift ;;
    --seed|--runs)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: $1 needs a whole number, got '${2:-}'" >&2; exit 2; }
      if [[ $1 == --seed ]]; then seed=$2; else runs=$2; fi
      shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *[!0-9]*|"") echo "fuzz.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    *) seconds=$1 ;;
  esac
  shift
done
targets=(fuzz_safetensors fuzz_tokenizer fuzz_cli fuzz_shapes)
[[ -n "$only" ]] && targets=("$only")

for tool in clang-14 clang++-14; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found: run scripts/deps.sh --fuzz" >&2; exit 1; }
done
[[ -n "$(ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ]] ||
  { echo "fuzz.sh: libFuzzer runtime missing: run scripts/deps.sh --fuzz (libclang-rt-14-dev)" >&2; exit 1; }

start=$SECONDS
# A tree already configured for fuzzing under the sanitizers is built as it is: the sanitizer
# suite's clang tree (XGRAD_ASAN_COMPILER=clang scripts/test.sh --sanitize) is one.
if grep -q '^XGRAD_FUZZ:BOOL=ON$' "$build/CMakeCache.txt" 2>/dev/null &&
   grep -q '^XGRAD_SANITIZE:BOOL=ON$' "$build/CMakeCache.txt"; then
  echo "==> reuse $build (configured with XGRAD_FUZZ=ON and XGRAD_SANITIZE=ON)"
else
  echo "==> configure $build (clang++-14, ASan + UBSan, libFuzzer)"
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DXGRAD_SANITIZE=ON -DXGRAD_FUZZ=ON \
    -DXGRAD_BUILD_TESTS=OFF -DXGRAD_BUILD_EXAMPLES=OFF -DXGRAD_BUILD_BENCH=OFF -DXGRAD_INSTALL=OFF >/dev/null
fi
echo "==> build (${jobs} jobs)"
cmake --build "$build" --parallel "$jobs" --target "${targets[@]}" train_lm
echo "==> built in $((SECONDS - start)) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

seed_model=fuzz/corpus/seed_model.safetensors
make_seeds() {
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-fuzz-seeds.XXXXXX")
  for _ in $(seq 20); do printf 'Call me Ishmael. Some years ago, never mind how long.\n'; done >"$tmp/corpus.txt"
  "$build/fuzz/train_lm/train_lm" train --data "$tmp/corpus.txt" --checkpoint-dir "$tmp/ck" \
    --context-length 8 --emb-dim 8 --n-heads 2 --n-layers 1 --drop-rate 0 --batch-size 2 \
    --steps 4 --warmup 0 --eval-interval 2 --eval-iters 1 --sample-length 0 --no-progress >/dev/null
  local d="$tmp/ck/step_00000004" out=fuzz/corpus/fuzz_safetensors
  mkdir -p "$out"
  cp "$d/model.safetensors" "$seed_model"
  { printf '\x00'; cat "$d/model.safetensors"; } >"$out/model_parse"
  { printf '\x00'; cat "$d/train_state.safetensors"; } >"$out/state_parse"
  { printf '\x02'; cat "$d/model.safetensors"; } >"$out/model_load"
  { printf '\x03'; cat "$d/train_state.safetensors"; } >"$out/state_load"
  { printf '\x00'; cat tests/fixtures/safetensors_basic.safetensors; } >"$out/torch_basic"
  rm -rf "$tmp"
  echo "==> seeds written to $out"
}
if (( seeds_only )); then make_seeds; exit 0; fi
[[ -f "$seed_model" ]] || make_seeds
export FUZZ_MODEL_FILE=$root/$seed_model

mkdir -p "$build/artifacts"
status=0
results=()
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work"
  log="$build/$t.log"
  rm -f "$build/artifacts/$t-"*
  budget=(-max_total_time="$seconds") budget_text="$seconds s"
  [[ -n "$runs" ]] && budget=(-runs="$runs") budget_text="$runs runs"
  cmd=("$build/fuzz/$t" "${budget[@]}" ${seed:+-seed="$seed"} -print_final_stats=1 -close_fd_mask=3
       -rss_limit_mb=2048 -timeout=20 -artifact_prefix="$build/artifacts/$t-" "$work" "fuzz/corpus/$t")
  echo "==> $t for $budget_text"
  set +e
  "${cmd[@]}" >"$log" 2>&1
  rc=$?
  set -e
  used_seed=$(grep -oE 'INFO: Seed: [0-9]+' "$log" | head -1 | grep -oE '[0-9]+$' || echo "?")
  done_runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  eps=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
  corp=$(grep -oE 'corp: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo "?")
  if (( rc != 0 )) || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    echo "==> $t FAILED (status $rc); log $log, inputs in $build/artifacts/"
    grep -E 'ERROR|runtime error|SUMMARY|==[0-9]+==' "$log" | head -20
    echo "    reproduce: rm -rf $work; scripts/fuzz.sh --only $t --seed $used_seed ${runs:+--runs }${runs:-$seconds}  (the same start; time and addresses may steer it elsewhere)"
    for a in "$build/artifacts/$t-"*; do
      [[ -f "$a" ]] || continue
      echo "    input $(basename "$a") ($(stat -c %s "$a") bytes), base64:"
      base64 -w 76 "$a" | head -200 | sed 's/^/      /'
      echo "    replay it alone: FUZZ_MODEL_FILE=$root/$seed_model $build/fuzz/$t $a"
    done
    status=1
    results+=("$(printf '%-18s FAILED  runs %-9s exec/s %-6s cov %-6s ft %-6s corpus %-5s seed %s' "$t" "$done_runs" "$eps" "$cov" "$ft" "$corp" "$used_seed")")
  else
    results+=("$(printf '%-18s ok      runs %-9s exec/s %-6s cov %-6s ft %-6s corpus %-5s seed %s' "$t" "$done_runs" "$eps" "$cov" "$ft" "$corp" "$used_seed")")
  fi
done
echo
echo "==> summary ($budget_text per target, total $((SECONDS - start)) s with the build)"
printf '  %s\n' "${results[@]}"
exit "$status"
