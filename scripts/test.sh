#!/usr/bin/env bash
# scripts/test.sh: build xgrad and run its tests.
#
#   scripts/test.sh              the normal suite, then the consumer (below) from the same build
#   scripts/test.sh --normal     the normal suite alone: Release build in build/, ctest, then
#                                scripts/check_architecture.sh (docs/architecture.md's layers)
#   scripts/test.sh --consumer   install the library into a temporary prefix, then build and run
#                                tests/consumer (find_package(xgrad) + xgrad::xgrad)
#   scripts/test.sh --sanitize   ASan + UBSan build (Debug, -Og) in build-asan/, no examples/bench
#   scripts/test.sh --all        normal, then consumer, then sanitize
#
# Flags combine (--consumer --sanitize). Dependencies are checked first (scripts/deps.sh).
# A suite stops at its first failing stage; the next suite still runs; the exit status is
# non-zero if any stage failed. A summary with each stage's time is printed at the end.
#
# Environment: XGRAD_JOBS (default: nproc), XGRAD_BUILD_DIR (build), XGRAD_ASAN_BUILD_DIR
# (build-asan), XGRAD_ASAN_BUILD_TYPE (Debug) and XGRAD_ASAN_OPT_FLAGS (-Og -g1; -O1 -g1 with
# clang) for the sanitizer build, XGRAD_ASAN_COMPILER (gcc, the default, or clang: clang-14 with
# libFuzzer's coverage instrumentation, so that the same tree also builds the fuzz targets
# that scripts/fuzz.sh runs; needs scripts/deps.sh --fuzz), XGRAD_TEST_TIMEOUT (seconds per test case, 600), XGRAD_SKIP_DEPS=1 (do not
# check packages), XGRAD_KEEP_TMP=1 (keep the consumer's install prefix and build dir),
# XGRAD_WERROR=ON|OFF (warnings are errors; default ON when CI=true, as CI and the fresh-machine
# check run it, else OFF).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

jobs=${XGRAD_JOBS:-$(nproc)}
build_dir=${XGRAD_BUILD_DIR:-build}
asan_dir=${XGRAD_ASAN_BUILD_DIR:-build-asan}
# The sanitizer build is a Debug build (asserts on) at -Og -g1: ASan+UBSan at -O2 -g compiles
# several times slower, and -O0 does not compile xsimd's AVX-512 code. -g1 keeps the line
# tables that sanitizer reports need.
asan_build_type=${XGRAD_ASAN_BUILD_TYPE:-Debug}
asan_compiler=${XGRAD_ASAN_COMPILER:-gcc}
case "$asan_compiler" in
  gcc) asan_opt_flags=${XGRAD_ASAN_OPT_FLAGS:--Og -g1} ;;
  clang) asan_opt_flags=${XGRAD_ASAN_OPT_FLAGS:--O1 -g1} ;;
  *) echo "test.sh: XGRAD_ASAN_COMPILER must be gcc or clang, got '$asan_compiler'" >&2; exit 2 ;;
esac
test_timeout=${XGRAD_TEST_TIMEOUT:-600}
if [[ "${CI:-}" == true ]]; then werror=${XGRAD_WERROR:-ON}; else werror=${XGRAD_WERROR:-OFF}; fi

run_normal=0 run_consumer=0 run_sanitize=0
for arg in "$@"; do
  case "$arg" in
    --all) run_normal=1 run_consumer=1 run_sanitize=1 ;;
    --consumer) run_consumer=1 ;;
    --sanitize) run_sanitize=1 ;;
    --normal) run_normal=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
# no flag: the normal suite and the consumer, which then installs the library just built
if (( run_normal + run_consumer + run_sanitize == 0 )); then run_normal=1 run_consumer=1; fi

# ---- stage bookkeeping. Each stage runs in a subshell with `set -e`, timed. A stage is
# always called as a plain statement (never in `if`, `&&` or `||`: bash ignores `set -e`
# inside those); after a failure the rest of its suite is skipped.
summary=()
failed=0
suite_ok=1
script_start=$SECONDS

duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# stage <name> <command...>
stage() {
  local name=$1; shift
  if (( ! suite_ok )); then
    summary+=("$(printf '  %-28s skipped' "$name")")
    return 0
  fi
  local start=$SECONDS rc
  printf '\n==> %s\n' "$name"
  set +e
  ( set -euo pipefail; "$@" )
  rc=$?
  set -e
  local took
  took=$(duration $((SECONDS - start)))
  if (( rc == 0 )); then
    printf '==> %s: ok (%s)\n' "$name" "$took"
    summary+=("$(printf '  %-28s ok      %s' "$name" "$took")")
  else
    printf '==> %s: FAILED with status %d (%s)\n' "$name" "$rc" "$took"
    summary+=("$(printf '  %-28s FAILED  %s' "$name" "$took")")
    failed=1
    suite_ok=0
  fi
}

print_summary() {
  printf '\n==> summary (%d jobs)\n' "$jobs"
  printf '%s\n' "${summary[@]}"
  printf '  %-28s         %s\n' "total" "$(duration $((SECONDS - script_start)))"
}

tmp_dir=""
cleanup() {
  if [[ -n "$tmp_dir" && -d "$tmp_dir" ]]; then
    if [[ "${XGRAD_KEEP_TMP:-0}" == 1 ]]; then
      echo "test.sh: kept $tmp_dir"
    else
      rm -rf "$tmp_dir"
    fi
  fi
}
trap cleanup EXIT

# ---- stages
configure_main() {
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DXGRAD_WERROR="$werror"
}
build_main() { cmake --build "$build_dir" --parallel "$jobs"; }
# the layer table of docs/architecture.md against the CMake files, and the check's own test
check_architecture() {
  "$root/scripts/check_architecture.sh"
  local out
  out=$("$root/scripts/check_architecture.sh" --self-test 2>&1) || { echo "$out"; return 1; }
}
configure_and_build_library() {
  configure_main
  cmake --build "$build_dir" --parallel "$jobs" --target xgrad_libs
}
ctest_in() {
  ctest --test-dir "$1" --output-on-failure --no-tests=error --parallel "$jobs" \
    --timeout "$test_timeout"
}

install_library() {
  cmake --install "$build_dir" --prefix "$tmp_dir/prefix"
}
configure_consumer() {
  cmake -S "$root/tests/consumer" -B "$tmp_dir/consumer-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$tmp_dir/prefix"
}
build_consumer() { cmake --build "$tmp_dir/consumer-build" --parallel "$jobs"; }
run_consumer_bin() {
  "$tmp_dir/consumer-build/xgrad_consumer"
  # built when the installed xgrad has xgrad::distributed (MPI)
  if [[ -x "$tmp_dir/consumer-build/xgrad_consumer_distributed" ]]; then
    "$tmp_dir/consumer-build/xgrad_consumer_distributed"
  fi
}

configure_asan() {
  local type_upper compiler=()
  type_upper=$(tr '[:lower:]' '[:upper:]' <<<"$asan_build_type")
  # clang: the fuzz targets (XGRAD_FUZZ) build in this tree, sharing its library objects
  if [[ $asan_compiler == clang ]]; then
    compiler=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DXGRAD_FUZZ=ON)
  fi
  cmake -S "$root" -B "$asan_dir" -DCMAKE_BUILD_TYPE="$asan_build_type" "${compiler[@]}" \
    "-DCMAKE_CXX_FLAGS_${type_upper}=$asan_opt_flags" -DXGRAD_SANITIZE=ON \
    -DXGRAD_BUILD_EXAMPLES=OFF -DXGRAD_BUILD_BENCH=OFF -DXGRAD_WERROR="$werror"
}
build_asan() { cmake --build "$asan_dir" --parallel "$jobs"; }

# ---- suites
deps_flags=()
if (( run_sanitize )) && [[ $asan_compiler == clang ]]; then deps_flags=(--fuzz); fi
stage "deps" "$root/scripts/deps.sh" "${deps_flags[@]}"
if (( failed )); then print_summary; exit 1; fi

if (( run_normal )); then
  suite_ok=1
  stage "normal: configure" configure_main
  stage "normal: build" build_main
  stage "normal: ctest" ctest_in "$build_dir"
  stage "normal: architecture" check_architecture
fi

if (( run_consumer )); then
  suite_ok=1
  tmp_dir=$(mktemp -d "${TMPDIR:-/tmp}/xgrad-consumer.XXXXXX")
  stage "consumer: build library" configure_and_build_library
  stage "consumer: install" install_library
  stage "consumer: configure" configure_consumer
  stage "consumer: build" build_consumer
  stage "consumer: run" run_consumer_bin
fi

if (( run_sanitize )); then
  suite_ok=1
  # The sanitizers read these at run time (tests, and gtest discovery at build time).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  stage "sanitize: configure" configure_asan
  stage "sanitize: build" build_asan
  stage "sanitize: ctest" ctest_in "$asan_dir"
fi

print_summary
if (( failed )); then
  echo "test.sh: FAILED"
  exit 1
fi
echo "test.sh: all passed"
