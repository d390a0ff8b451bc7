#!/usr/bin/env bash
# scripts/bench.sh: xgrad against PyTorch on this machine, side by side in one run.
#
#   scripts/bench.sh            training-step table: GPT and Llama configs tiny, small, medium
#                               at 1 and 2 threads, in float32 and under bfloat16 autocast
#                               (bench/gpt_bench.cpp vs bench/pytorch/gpt_bench.py), written to
#                               bench/results/latest.json
#   scripts/bench.sh --ops      op micro-benchmarks (bench/ops_bench.cpp vs
#                               bench/pytorch/ops_bench.py) at 1 and 2 threads; their table
#                               goes to the "ops" section of bench/results/latest.json
#   scripts/bench.sh --quick    a smoke check: few steps, tiny and small only; the JSON goes
#                               to ${TMPDIR:-/tmp}/xgrad-bench-quick.json, not to latest.json
#   scripts/bench.sh --peak     the machine's ceilings only: the FMA and bf16 peaks (bench/fma_peak.cpp)
#                               and the sgemm probe (gpt_bench --sgemm-peak) at 1 and --threads
#                               threads, one JSON line each; writes nothing
#
# Options: --configs tiny,small,medium   --archs gpt,llama   --threads 1,2   --dtypes fp32,bf16
#          --steps N (timed, default 20)
#          --warmup N (default 5)   --no-build (use the existing binaries)
# Environment: XGRAD_BUILD_DIR (build), XGRAD_JOBS (nproc), XGRAD_SKIP_DEPS=1 (do not check
# packages), XGRAD_KEEP_TMP=1 (keep the per-process results), XGRAD_PYTHON (/usr/bin/python3,
# the interpreter Debian's python3-torch installs into), XGRAD_TORCH_CORETYPE (SkylakeX: the
# OPENBLAS_CORETYPE torch's extra modes run with; empty: no extra modes).
#
# How it measures: every measurement is its own process (so each peak RSS is its own), xgrad
# and PyTorch alternate (same config, same thread count, back to back), and the machine's
# ceilings are measured in the same run, at its start and its end (the best counts): the
# float32 FMA peak (build/bench/fma_peak --threads N: independent AVX-512 and AVX2 FMA chains
# per thread, over each thread's CPU time: the core's ceiling however busy the machine is),
# which MFU is relative to (MFU = GFLOP/s / (threads x the 1-thread FMA peak)), and the same
# probe's bfloat16 peak (vdpbf16ps chains, where the CPU has AVX512_BF16), which a bf16 row's
# second MFU is relative to,
# and the 1024^3 sgemm probe through xgrad's GEMM and through OpenBLAS's own threads, printed
# next to it. Every xgrad line records the build's xgrad::simd_level() and gemm_backend().
# Threads: xgrad uses its own pool for every kernel, its own GEMM included (gpt_bench
# --threads N). PyTorch at 1 thread: torch.set_num_threads(1),
# OPENBLAS_NUM_THREADS=1. At 2 threads PyTorch's thread modes are torch 2 / OpenBLAS 1,
# torch 1 / OpenBLAS 2, both 2 with OMP_WAIT_POLICY=PASSIVE. On a CPU with AVX-512 each mode
# also runs with OPENBLAS_CORETYPE=SkylakeX (OpenBLAS's AVX-512 kernels: what a torch user
# gets without a Haswell pin), set in that torch process only, never for xgrad; such a mode
# is a candidate only when its probe's first and last losses equal the same mode's without
# it within 1e-5 (the check is printed). A bf16 row (xgrad under xgrad::autocast) measures
# torch at its best among float32 and torch.autocast("cpu", dtype=torch.bfloat16), each mode
# in both. A short probe of each candidate picks torch's best
# mode, which runs the full measurement and counts in every ratio (--ops: the fastest torch
# run counts per case). Numbers depend on what else runs on the machine: compare ratios, not
# runs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build_dir=${XGRAD_BUILD_DIR:-build}
jobs=${XGRAD_JOBS:-$(nproc)}
py=${XGRAD_PYTHON:-/usr/bin/python3}
mode=train quick=0 build=1
configs="tiny,small,medium" archs="gpt,llama" threads_list="1,2" dtypes="fp32,bf16" steps="" warmup=""
configs_given=0

while (( $# )); do
  case "$1" in
    --ops) mode=ops ;;
    --peak) mode=peak ;;
    --quick) quick=1 ;;
    --no-build) build=0 ;;
    --configs) configs=${2:?--configs needs a list}; configs_given=1; shift ;;
    --archs) archs=${2:?--archs needs a list}; shift ;;
    --threads) threads_list=${2:?--threads needs a list}; shift ;;
    --dtypes) dtypes=${2:?--dtypes needs a list}; shift ;;
    --steps) steps=${2:?--steps needs a number}; shift ;;
    --warmup) warmup=${2:?--warmup needs a number}; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

if (( quick )); then
  steps=${steps:-3} warmup=${warmup:-1}
  (( configs_given )) || configs="tiny,small"
  probe_warmup=1 probe_steps=1
  out_json="${TMPDIR:-/tmp}/xgrad-bench-quick.json"
else
  steps=${steps:-20} warmup=${warmup:-5}
  probe_warmup=2 probe_steps=5
  out_json="$root/bench/results/latest.json"
fi
IFS=, read -r -a config_arr <<< "$configs"
IFS=, read -r -a thread_arr <<< "$threads_list"
IFS=, read -r -a arch_arr <<< "$archs"
IFS=, read -r -a dtype_arr <<< "$dtypes"
for dtype in "${dtype_arr[@]}"; do
  if [[ $dtype != fp32 && $dtype != bf16 ]]; then
    echo "bench.sh: --dtypes takes fp32 and bf16, not '$dtype'" >&2
    exit 2
  fi
done
for arch in "${arch_arr[@]}"; do
  if [[ $arch != gpt && $arch != llama ]]; then
    echo "bench.sh: --archs takes gpt and llama, not '$arch'" >&2
    exit 2
  fi
done

start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
log() { printf '[%s] %s\n' "$(elapsed)" "$*" >&2; }

# ---- dependencies and build
"$root/scripts/deps.sh" --torch >&2
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "bench.sh: $py cannot import torch (scripts/deps.sh --torch installs python3-torch)" >&2
  exit 1
fi
targets=(gpt_bench fma_peak)
[[ $mode == ops ]] && targets=(ops_bench)
if (( build )); then
  log "building ${targets[*]} (Release) in $build_dir"
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DXGRAD_BUILD_BENCH=ON >/dev/null
  cmake --build "$build_dir" --parallel "$jobs" --target "${targets[@]}" >&2
fi
for t in "${targets[@]}"; do
  if [[ ! -x "$build_dir/bench/$t" ]]; then
    echo "bench.sh: $build_dir/bench/$t was not built (for ops_bench: apt-get install libbenchmark-dev)" >&2
    exit 1
  fi
done
gpt_bench="$build_dir/bench/gpt_bench"
fma_peak="$build_dir/bench/fma_peak"
report="$root/bench/pytorch/report.py"

# torch's extra modes: the same thread modes with OPENBLAS_CORETYPE=$torch_coretype, only
# where they differ from what torch runs anyway and the CPU can run those kernels
torch_coretype=${XGRAD_TORCH_CORETYPE-SkylakeX}
env_coretype=${OPENBLAS_CORETYPE:-}
if [[ -n $torch_coretype ]]; then
  if [[ ${env_coretype,,} == "${torch_coretype,,}" ]]; then  # OpenBLAS ignores the case
    log "OPENBLAS_CORETYPE is $torch_coretype already: no extra torch modes"
    torch_coretype=
  elif [[ $torch_coretype == SkylakeX ]] && ! grep -qw avx512f /proc/cpuinfo; then
    log "no AVX-512 on this CPU: no OPENBLAS_CORETYPE=SkylakeX torch modes"
    torch_coretype=
  fi
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-bench.XXXXXX")
cleanup() {
  if [[ "${XGRAD_KEEP_TMP:-0}" == 1 ]]; then echo "bench.sh: kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
mkdir -p "$tmp/train" "$tmp/sgemm" "$tmp/fma" "$tmp/ops"
cut -d' ' -f1-3 /proc/loadavg > "$tmp/loadavg_start"
failures=0

# run_to FILE META_JSON ENV... -- CMD...: one measurement in its own process; FILE gets the
# metadata line, then the process's JSON line. A failure is reported and counted, not fatal.
run_to() {
  local file=$1 meta=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "$meta" > "$file"
  if ! env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY -u MKL_NUM_THREADS "${envs[@]}" "$@" \
       >> "$file" 2> "$file.err"; then
    echo "bench.sh: FAILED: ${envs[*]} $*" >&2
    sed 's/^/    /' "$file.err" | tail -20 >&2
    failures=$((failures + 1))
    return 1
  fi
  return 0
}

# the last JSON line's tokens_per_s in FILE (0 if none)
tokens_of() {
  "$py" -c 'import json,sys
v=0
for l in open(sys.argv[1]):
    l=l.strip()
    if l.startswith("{"): v=json.loads(l).get("tokens_per_s", v)
print(v)' "$1"
}

# torch_env_for OPENBLAS_THREADS WAIT_POLICY CORETYPE: sets torch_env, the environment of one
# torch process (an empty WAIT_POLICY or CORETYPE is left unset)
torch_env_for() {
  torch_env=(OPENBLAS_NUM_THREADS="$1")
  if [[ -n $2 ]]; then torch_env+=(OMP_WAIT_POLICY="$2"); fi
  if [[ -n $3 ]]; then torch_env+=(OPENBLAS_CORETYPE="$3"); fi
}

# losses_agree BASE_FILE VARIANT_FILE: prints the check; true when the OPENBLAS_CORETYPE
# variant's first and last losses equal its base mode's within 1e-5
losses_agree() {
  "$py" "$report" check-losses "$1" "$2" "$tmp/coretype_checks.jsonl" >&2
}

sgemm_probe() {
  local tag=$1 t
  for t in "${thread_arr[@]}"; do
    run_to "$tmp/sgemm/${tag}_t$t.json" "{}" OPENBLAS_NUM_THREADS="$t" -- \
      "$gpt_bench" --sgemm-peak --threads "$t" || true
  done
}

# the FMA peak at 1 thread (MFU's per-core peak) and at every --threads count
fma_probe() {
  local tag=$1 t
  for t in $(printf '%s\n' 1 "${thread_arr[@]}" | sort -nu); do
    run_to "$tmp/fma/${tag}_t$t.json" "{}" -- "$fma_peak" --threads "$t" || true
  done
}

# ---- --peak: the ceilings only
if [[ $mode == peak ]]; then
  log "FMA peak and sgemm probes"
  fma_probe peak
  sgemm_probe peak
  cat "$tmp"/fma/*.json "$tmp"/sgemm/*.json | grep '^{"impl'
  exit $(( failures > 0 ))
fi

# ---- part A: op micro-benchmarks
if [[ $mode == ops ]]; then
  if (( quick )); then reps=3 min_time=0.02; else reps=5 min_time=0.1; fi
  if [[ -n $torch_coretype ]]; then
    # the same check the training modes pass: a few tiny training steps with both kernel sets
    log "ops: checking torch's losses with OPENBLAS_CORETYPE=$torch_coretype"
    for ct in "" "$torch_coretype"; do
      torch_env_for 1 "" "$ct"
      run_to "$tmp/ops/check${ct:+_$ct}.json" \
        "{\"torch_mode\": \"torch 1 / OpenBLAS 1${ct:+, OPENBLAS_CORETYPE=$ct}\"}" "${torch_env[@]}" -- \
        "$py" "$root/bench/pytorch/gpt_bench.py" --config tiny --threads 1 --warmup 0 --steps 3 ||
        true
    done
    losses_agree "$tmp/ops/check.json" "$tmp/ops/check_$torch_coretype.json" || torch_coretype=
  fi
  for t in "${thread_arr[@]}"; do
    log "ops: xgrad, $t thread(s)"
    run_to "$tmp/ops/xgrad_t$t.log" "" OPENBLAS_NUM_THREADS="$t" -- \
      "$build_dir/bench/ops_bench" --threads="$t" --benchmark_repetitions="$reps" \
      --benchmark_min_time="$min_time" --benchmark_report_aggregates_only=true \
      --benchmark_out="$tmp/ops/xgrad_t$t.json" --benchmark_out_format=json || true
    # torch's runs: OpenMP's spinning threads suffer when the other core is busy, so at
    # t > 1 torch also gets a run with OMP_WAIT_POLICY=PASSIVE; each also with the extra
    # OPENBLAS_CORETYPE; the fastest run counts per case (its JSON says how it ran)
    policies=("")
    if (( t > 1 )); then policies+=(PASSIVE); fi
    for ct in "" ${torch_coretype:+"$torch_coretype"}; do
      for wp in "${policies[@]}"; do
        tag="torch_t$t${wp:+.passive}${ct:+.$ct}"
        log "ops: torch, $t thread(s)${wp:+, OMP_WAIT_POLICY=$wp}${ct:+, OPENBLAS_CORETYPE=$ct}"
        torch_env_for "$t" "$wp" "$ct"
        run_to "$tmp/ops/$tag.log" "" "${torch_env[@]}" -- \
          "$py" "$root/bench/pytorch/ops_bench.py" --threads "$t" --repetitions "$reps" \
          --min-time "$min_time" --json "$tmp/ops/$tag.json" || true
      done
    done
  done
  cut -d' ' -f1-3 /proc/loadavg > "$tmp/loadavg_end"
  echo
  "$py" "$root/bench/pytorch/report.py" ops "$tmp" "$out_json" || failures=$((failures + 1))
  echo
  echo "wrote $out_json (ops section) in $(elapsed)"
  exit $(( failures > 0 ))
fi

# ---- part B: training steps
log "FMA peak and sgemm probes"
fma_probe start
sgemm_probe start

common=(--warmup "$warmup" --steps "$steps")
for config in "${config_arr[@]}"; do
  for arch in "${arch_arr[@]}"; do
    for dtype in "${dtype_arr[@]}"; do
      for t in "${thread_arr[@]}"; do
        base="$tmp/train/${arch}_${config}_${dtype}_t$t" what="$arch $config $dtype"
        meta() {
          printf '{"threads_requested": %s, "row_dtype": "%s", "torch_mode": "%s", "probe": %s}' \
            "$t" "$dtype" "$1" "$2"
        }

        log "$what, $t thread(s): xgrad train"
        run_to "${base}_xgrad_train.json" "$(meta "" false)" OPENBLAS_NUM_THREADS="$t" -- \
          "$gpt_bench" --arch "$arch" --config "$config" --dtype "$dtype" --threads "$t" --mode train \
          "${common[@]}" || true

        # PyTorch's candidate modes: name|torch threads|OpenBLAS threads|OMP_WAIT_POLICY|CORETYPE|dtype
        if (( t == 1 )); then
          modes=("torch 1 / OpenBLAS 1|1|1|||fp32")
        else
          modes=("torch $t / OpenBLAS 1|$t|1|||fp32" "torch 1 / OpenBLAS $t|1|$t|||fp32"
                 "torch $t / OpenBLAS $t, OMP_WAIT_POLICY=PASSIVE|$t|$t|PASSIVE||fp32")
        fi
        if [[ $dtype == bf16 ]]; then  # torch at its best: each mode in float32 and under autocast
          for ((i = 0, n = ${#modes[@]}; i < n; i++)); do
            IFS='|' read -r name tt bt wp ct dt <<< "${modes[i]}"
            modes+=("$name, autocast bf16|$tt|$bt|$wp|$ct|bf16")
          done
        fi
        n_base=${#modes[@]}
        if [[ -n $torch_coretype ]]; then  # mode i + n_base is mode i with OpenBLAS's other kernels
          for ((i = 0; i < n_base; i++)); do
            IFS='|' read -r name tt bt wp ct dt <<< "${modes[i]}"
            modes+=("$name, OPENBLAS_CORETYPE=$torch_coretype|$tt|$bt|$wp|$torch_coretype|$dt")
          done
        fi
        best=${modes[0]}
        pw=$probe_warmup ps=$probe_steps
        if [[ $config == medium ]] && (( ! quick )); then pw=1 ps=3; fi  # its steps take seconds
        if (( ${#modes[@]} > 1 )); then
          best_tok=0
          for ((i = 0; i < ${#modes[@]}; i++)); do
            IFS='|' read -r name tt bt wp ct dt <<< "${modes[i]}"
            log "$what, $t thread(s): torch probe ($name)"
            f="${base}_torch_probe$i.json"
            torch_env_for "$bt" "$wp" "$ct"
            run_to "$f" "$(meta "$name" true)" "${torch_env[@]}" -- \
              "$py" "$root/bench/pytorch/gpt_bench.py" --arch "$arch" --config "$config" --dtype "$dt" \
              --threads "$tt" --mode train --warmup "$pw" --steps "$ps" || continue
            if (( i >= n_base )) && ! losses_agree "${base}_torch_probe$((i - n_base)).json" "$f"; then
              continue  # other kernels, other numbers: not a candidate
            fi
            tok=$(tokens_of "$f")
            if "$py" -c "import sys; sys.exit(0 if $tok > $best_tok else 1)"; then
              best_tok=$tok best=${modes[i]}
            fi
          done
        fi
        IFS='|' read -r name tt bt wp ct dt <<< "$best"
        torch_env_for "$bt" "$wp" "$ct"

        log "$what, $t thread(s): torch train ($name)"
        run_to "${base}_torch_train.json" "$(meta "$name" false)" "${torch_env[@]}" -- \
          "$py" "$root/bench/pytorch/gpt_bench.py" --arch "$arch" --config "$config" --dtype "$dt" \
          --threads "$tt" --mode train "${common[@]}" || true

        log "$what, $t thread(s): xgrad forward"
        run_to "${base}_xgrad_forward.json" "$(meta "" false)" OPENBLAS_NUM_THREADS="$t" -- \
          "$gpt_bench" --arch "$arch" --config "$config" --dtype "$dtype" --threads "$t" --mode forward \
          "${common[@]}" || true

        log "$what, $t thread(s): torch forward ($name)"
        run_to "${base}_torch_forward.json" "$(meta "$name" false)" "${torch_env[@]}" -- \
          "$py" "$root/bench/pytorch/gpt_bench.py" --arch "$arch" --config "$config" --dtype "$dt" \
          --threads "$tt" --mode forward "${common[@]}" || true
      done
    done
  done
done

log "FMA peak and sgemm probes (again; the best of both counts)"
fma_probe end
sgemm_probe end
cut -d' ' -f1-3 /proc/loadavg > "$tmp/loadavg_end"

echo
"$py" "$root/bench/pytorch/report.py" train "$tmp" "$out_json" || failures=$((failures + 1))
echo
echo "wrote $out_json in $(elapsed) (load average at start: $(cat "$tmp/loadavg_start"), end: $(cat "$tmp/loadavg_end"))"
if (( failures )); then
  echo "bench.sh: $failures measurement(s) failed (see above)" >&2
  exit 1
fi
