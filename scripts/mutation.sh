#!/usr/bin/env bash
# scripts/mutation.sh: measure how strong the test suite is (issue #17). Each mutant below is a
# small deliberate bug in a backward closure or a fused kernel (a term scaled by 1.01, a
# dropped term, a wrong sign, the wrong saved tensor, an off-by-one, a missing contig()). One
# at a time: the mutant is applied to the source, the library and tests are rebuilt
# incrementally in their own build dir, and the suite runs until its first failure. A mutant
# is "killed" when a test fails (or crashes, or times out), "survived" when the whole suite
# passes. The script prints one line per mutant, then the score and the survivors.
#
#   scripts/mutation.sh                  # every mutant (30-60 min on two cores)
#   scripts/mutation.sh --only sm-dout-contig,ln-dout-contig   # some of them
#   scripts/mutation.sh --from 20        # mutants 20.. of the table (1-based)
#   scripts/mutation.sh --list           # the table
#   scripts/mutation.sh --check          # only check that every mutant applies (no build)
#   scripts/mutation.sh --build-dir DIR  # default: build-mutation/ in the tree
#   scripts/mutation.sh --keep-going     # run the whole suite on every mutant (slower)
#
# Not part of CI. Run it when a backward or kernel changes; a survivor is either an
# equivalent mutant (say why next to it below) or a missing test (write it).
#
# The source tree is modified while a mutant is built and restored right after, and on exit
# (Ctrl-C included) by the trap. A restored file gets a fresh mtime so the next build
# recompiles it. Run it on a tree whose mutated files you are not editing.
#
# Adding a mutant: one line in the table, `id|file|from|to`: `from` must occur exactly once in
# the file (the script refuses the mutant otherwise); `\n` in from/to stands for a newline.
set -u -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-mutation"
ONLY=""
FROM=1
MODE=run
FAIL_FAST=1
TIMEOUT=900  # seconds per test binary: a mutant that loops forever counts as killed

while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY="$2"; shift 2 ;;
    --from) FROM="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --list) MODE=list; shift ;;
    --check) MODE=check; shift ;;
    --keep-going) FAIL_FAST=0; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "mutation.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# ---------------------------------------------------------------- the mutants
# id | file (from the tree's root) | from | to
#
# Known equivalent mutants (they survive, and no test can kill them):
#   sdpa-tail-live-bound: the backward's scalar tail also computes dS at column j == n (the
#     first key the row does not see). The forward stored exact zeros there (W[i, j] = 0 for
#     j >= n), so w[j] * (d[j] - s) * scale is 0 (or -0, which adds the same) whatever the
#     finite d[j]: the same dS, the same gradients.
MUTANTS=$(cat <<'EOF'
sm-dout-contig|core/src/ops/activation.cpp|    const Tensor dy = contig(dout);\n    Tensor dx = empty(yv.shape(), yv.dtype());\n    kernels::dispatch_float(yv.dtype(), "softmax_backward"|    const Tensor dy = dout;\n    Tensor dx = empty(yv.shape(), yv.dtype());\n    kernels::dispatch_float(yv.dtype(), "softmax_backward"
sm-scale-sum|core/src/ops/activation.cpp|dxr[i] = yr[i] * (dyr[i] - s);|dxr[i] = yr[i] * (dyr[i] - s * T(1.01));
lsm-sign|core/src/ops/activation.cpp|return d - vec::vexp(v) * s;|return d + vec::vexp(v) * s;
sm-inner-drop-term|core/src/ops/activation.cpp|dxc[j] = yc[j] * (dyc[j] - s[j]);|dxc[j] = yc[j] * dyc[j];
sm-inner-off-by-one|core/src/ops/activation.cpp|    for (int64_t c = 0; c < C; ++c) {\n      const T* yc = y + base + c * inner;\n      const T* dyc = dy + base + c * inner;\n      if constexpr|    for (int64_t c = 0; c < C - 1; ++c) {\n      const T* yc = y + base + c * inner;\n      const T* dyc = dy + base + c * inner;\n      if constexpr
lsm-inner-wrong-saved|core/src/ops/activation.cpp|for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j];|for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j] * yc[j];
relu-dout-contig|core/src/ops/activation.cpp|    const Tensor dy = contig(dout);\n    Tensor dx = empty(yv.shape(), yv.dtype());\n    kernels::dispatch_float(yv.dtype(), "relu_backward"|    const Tensor dy = dout;\n    Tensor dx = empty(yv.shape(), yv.dtype());\n    kernels::dispatch_float(yv.dtype(), "relu_backward"
sigmoid-drop-term|core/src/ops/activation.cpp|px[i] = pd[i] * (T(1) - py[i]) * py[i];|px[i] = pd[i] * (T(1) - py[i]);
gelu-tanh-scale|core/src/ops/activation.cpp|const auto left_derivative = T(0.5) * right;|const auto left_derivative = T(0.505) * right;
gelu-dout-contig|core/src/ops/activation.cpp|    const Tensor dy = contig(dout);\n    Tensor dx = empty(gc.shape(), gc.dtype());|    const Tensor dy = dout;\n    Tensor dx = empty(gc.shape(), gc.dtype());
sdpa-dout-as-laid-out|core/src/ops/attention.cpp|const Tensor dout = blas_readable(grad);|const Tensor dout = grad.detach();
sdpa-readable-any-row-stride|core/src/ops/attention.cpp|(rows <= 1 \|\| t.stride(-2) >= cols)|(rows <= 1 \|\| t.stride(-2) >= 0)
sdpa-readable-any-col-stride|core/src/ops/attention.cpp|(cols <= 1 \|\| t.stride(-1) == 1)|(cols <= 1 \|\| t.stride(-1) >= 1)
sdpa-dv-scale|core/src/ops/attention.cpp|gemm<T>(true, false, c1 - c0, P.Ev, L - i0, T(1), wv + i0 * S + c0|gemm<T>(true, false, c1 - c0, P.Ev, L - i0, T(1.01), wv + i0 * S + c0
sdpa-dq-sign|core/src/ops/attention.cpp|gemm<T>(false, false, r1 - r0, P.E, ce, T(1), dp + r0 * S, S, k, ldk|gemm<T>(false, false, r1 - r0, P.E, ce, T(-1), dp + r0 * S, S, k, ldk
sdpa-rowsum-off-by-one|core/src/ops/attention.cpp|red[i - i0] = vec::dot(dp + i * S, w + i * S, P.valid(i));|red[i - i0] = vec::dot(dp + i * S, w + i * S, P.valid(i) - 1);
sdpa-causal-col-start|core/src/ops/attention.cpp|const int64_t i0 = P.causal ? std::min(c0, L) : 0;|const int64_t i0 = P.causal ? std::min(c0 + 1, L) : 0;
sdpa-dv-wrong-saved|core/src/ops/attention.cpp|const T* wv = dropped ? wd : w;|const T* wv = w;
ln-dout-contig|core/src/ops/nn_functional.cpp|    const Tensor dy = contig(dout);\n    const bool want_x|    const Tensor dy = dout;\n    const bool want_x
ln-dx-drop-term|core/src/ops/nn_functional.cpp|dxr[i] = rs * (g[i] - g_mean - xhat[i] * gx_mean);|dxr[i] = rs * (g[i] - g_mean);
ln-dw-scale|core/src/ops/nn_functional.cpp|pdw[i] += dr[i] * xhat[i];|pdw[i] += dr[i] * xhat[i] * T(1.01);
ln-gmean-wrong-saved|core/src/ops/nn_functional.cpp|const T g_mean = vec::sum(g.data(), N) * invN;|const T g_mean = vec::sum(dr, N) * invN;
ln-block-partials-off-by-one|core/src/ops/nn_functional.cpp|      for (int64_t b = 0; b < blocks; ++b) {\n        if (pdw)|      for (int64_t b = 0; b < blocks - 1; ++b) {\n        if (pdw)
emb-dout-contig|core/src/ops/nn_functional.cpp|    const Tensor dy = contig(dout);\n    Tensor dw = zeros({V, D}, dy.dtype());|    const Tensor dy = dout;\n    Tensor dw = zeros({V, D}, dy.dtype());
dropout-dout-contig|core/src/ops/nn_functional.cpp|    const Tensor dy = contig(dout);\n    Tensor dx = empty(mask.shape(), dy.dtype());|    const Tensor dy = dout;\n    Tensor dx = empty(mask.shape(), dy.dtype());
ce-scale|core/src/ops/nn_functional.cpp|const T gscale = static_cast<T>(dout.item() / static_cast<double>(count));|const T gscale = static_cast<T>(1.01 * dout.item() / static_cast<double>(count));
mse-db-sign|core/src/ops/nn_functional.cpp|for (int64_t i = 0, m = da.numel(); i < m; ++i) pb[i] = -pd[i];|for (int64_t i = 0, m = da.numel(); i < m; ++i) pb[i] = pd[i];
sub-db-sign|core/src/ops/elementwise.cpp|if (grads.wants(1)) grads.add(1, neg(sum_to(dout, sb)));|if (grads.wants(1)) grads.add(1, sum_to(dout, sb));
mul-wrong-saved|core/src/ops/elementwise.cpp|if (grads.wants(0)) grads.add(0, sum_to(mul(dout, bs.get()), sa));|if (grads.wants(0)) grads.add(0, sum_to(mul(dout, as.get()), sa));
div-db-scale|core/src/ops/elementwise.cpp|return -g * x / (y * y); }),|return -g * x / (y * y) * decltype(y)(1.01); }),
tanh-drop-term|core/src/ops/elementwise.cpp|return g * (decltype(y)(1) - y * y); }));|return g * decltype(y)(1); }));
where-swap|core/src/ops/elementwise.cpp|grads.add(1, sum_to(select_where(cs.get(), zero, dout, dout.shape()), sb));|grads.add(1, sum_to(select_where(cs.get(), dout, zero, dout.shape()), sb));
mean-off-by-one|core/src/ops/reduce.cpp|keepdim_view(div(dout, static_cast<double>(n)), in_shape, mask)|keepdim_view(div(dout, static_cast<double>(n + 1)), in_shape, mask)
var-scale|core/src/ops/reduce.cpp|grads.add(0, mul(centered, mul(dout.reshape(keep), 2.0 / denom)));|grads.add(0, mul(centered, mul(dout.reshape(keep), 2.02 / denom)));
maxdim-dout-contig|core/src/ops/reduce.cpp|  const Tensor g = dout.contiguous();\n  const Tensor ix = indices.contiguous();|  const Tensor g = dout;\n  const Tensor ix = indices.contiguous();
linear-bias-dout-contig|core/src/ops/linalg.cpp|Tensor d = dout.is_contiguous() ? dout : dense_copy(dout);|Tensor d = dout;
index-select-dout-contig|core/src/ops/shape.cpp|    const Tensor g = dout.contiguous();\n    kernels::dispatch_float(dout.dtype(), "index_select"|    const Tensor g = dout;\n    kernels::dispatch_float(dout.dtype(), "index_select"
cat-wrong-offset|core/src/ops/shape.cpp|grads.add(i, dout.narrow(d, at, sizes[i]));|grads.add(i, dout.narrow(d, 0, sizes[i]));
triu-no-zero|core/src/ops/shape.cpp|    kernels::copy_into(da, dout);\n    zero_outside_triangle(da, diagonal, upper);|    kernels::copy_into(da, dout);
permute-backward-forward-perm|core/src/ops/views.cpp|grads.add(0, dout.permute(inverse));|grads.add(0, dout.permute(inverse).permute(inverse).permute(inverse));
sdpa-tail-live-bound|core/src/ops/attention.cpp|if (d) d[j] = j < n ? w[j] * (d[j] - s) * scale : T(0);|if (d) d[j] = j <= n ? w[j] * (d[j] - s) * scale : T(0);
sdpa-simd-drop-scale|core/src/ops/attention.cpp|xsimd::select(live, x * (B::load_unaligned(d + j) - vs) * vscale, zero)|xsimd::select(live, x * (B::load_unaligned(d + j) - vs), zero)
sdpa-no-dropout-on-dw|core/src/ops/attention.cpp|    if (keep)  // dW = dW' * (mask / (1 - p))|    if (false)  // dW = dW' * (mask / (1 - p))
lsm-sum-off-by-one|core/src/ops/activation.cpp|const T s = vec::sum(dyr, C);|const T s = vec::sum(dyr, C - 1);
relu-at-zero|core/src/ops/activation.cpp|px[i] = py[i] > T(0) ? pd[i] : T(0);|px[i] = py[i] >= T(0) ? pd[i] : T(0);
gelu-erf-sign|core/src/ops/activation.cpp|return std::make_pair(v * T(0.5) * one_plus_erf, cdf + v * pdf);|return std::make_pair(v * T(0.5) * one_plus_erf, cdf - v * pdf);
ln-xhat-no-rstd|core/src/ops/nn_functional.cpp|for (int64_t i = 0; i < N; ++i) xhat[i] = (xr[i] - m) * rs;|for (int64_t i = 0; i < N; ++i) xhat[i] = (xr[i] - m);
dropout-backward-scale|core/src/ops/nn_functional.cpp|      const T scale = T(1) / static_cast<T>(1.0 - p);\n|      const T scale = T(1.01) / static_cast<T>(1.0 - p);\n
ce-target-term-scale|core/src/ops/nn_functional.cpp|dr[ptg[r]] -= gscale;|dr[ptg[r]] -= gscale * T(1.01);
emb-repeats-overwrite|core/src/ops/nn_functional.cpp|for (int64_t k = k0; k < k1; ++k) row[k] += src[k];|for (int64_t k = k0; k < k1; ++k) row[k] = src[k];
engine-always-owned|core/src/autograd.cpp|    owned = exclusively_owned(g);|    owned = true;
EOF
)

# ---------------------------------------------------------------- helpers
declare -A BACKUP=()   # file -> its pristine copy
TMP="$(mktemp -d)"
restore_all() {  # restore_all [keep-mtime]: only when nothing was built from the mutant
  local f
  for f in "${!BACKUP[@]}"; do
    cat "${BACKUP[$f]}" > "$ROOT/$f"  # same inode, new mtime: the next build recompiles it
    [ "${1:-}" = keep-mtime ] && touch -r "${BACKUP[$f]}" "$ROOT/$f"
  done
  BACKUP=()
}
cleanup() {
  restore_all
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo; echo "mutation.sh: interrupted; the tree is restored"; exit 130' INT TERM

# apply <file> <from> <to>: replace the one occurrence of from; fails when it is not exactly one
apply() {
  local file="$ROOT/$1"
  if [ -z "${BACKUP[$1]+x}" ]; then
    BACKUP[$1]="$TMP/backup.$(echo "$1" | tr '/' '_')"
    cp -p "$file" "${BACKUP[$1]}"
  fi
  MUT_FROM="$2" MUT_TO="$3" perl -0777 -ne '
    BEGIN { ($f, $t) = ($ENV{MUT_FROM}, $ENV{MUT_TO}); s/\\n/\n/g for $f, $t; s/\\\|/|/g for $f, $t; }
    $n = () = /\Q$f\E/g;
    if ($n != 1) { print STDERR "matched $n times\n"; exit 3; }
    s/\Q$f\E/$t/;
    print;' "$file" >"$TMP/mutated" || return 1
  cat "$TMP/mutated" >"$file"
}

# fields of a table line (the separator is |, \| inside a field is a literal |)
split_line() {
  local line="${1//\\|/$'\x01'}"
  IFS='|' read -r M_ID M_FILE M_FROM M_TO <<<"$line"
  M_FROM="${M_FROM//$'\x01'/\\|}"
  M_TO="${M_TO//$'\x01'/\\|}"
}

TARGETS=(xgrad_core_tests xgrad_nn_tests xgrad_optim_tests xgrad_train_tests)
build() {  # build <targets...>: quiet, returns the build's status
  cmake --build "$BUILD" --parallel 2 --target "$@" >"$TMP/build.log" 2>&1
}
# run_suite: the core binary's gradcheck table first (it kills most mutants quickest), then
# the rest of core, then nn, optim, train. Prints the first failing test, returns 1 on a kill.
run_suite() {
  local bin filter out status failed
  local -a runs=("xgrad_core_tests:*OpGradcheck*" "xgrad_core_tests:-*OpGradcheck*"
                 "xgrad_nn_tests:*" "xgrad_optim_tests:*" "xgrad_train_tests:*")
  local killed=0
  for r in "${runs[@]}"; do
    bin="${r%%:*}"; filter="${r#*:}"
    if [ "$bin" != xgrad_core_tests ] && [ ! -x "$BUILD/tests/$bin.built" ]; then
      build "$bin" || { echo "build of $bin failed"; return 2; }
      touch "$BUILD/tests/$bin.built"
    fi
    out="$TMP/run.log"
    local ff=(); [ "$FAIL_FAST" = 1 ] && ff=(--gtest_fail_fast)
    (cd "$ROOT/tests" && timeout "$TIMEOUT" "$BUILD/tests/$bin" --gtest_filter="$filter" \
        --gtest_brief=1 "${ff[@]}") >"$out" 2>&1
    status=$?
    if [ $status -ne 0 ]; then
      failed=$(grep -m1 -o '\[  FAILED  \] [^ ,]*' "$out" | sed 's/\[  FAILED  \] //')
      [ $status -eq 124 ] && failed="timeout in $bin"
      [ -z "$failed" ] && failed="$bin exited with status $status"
      echo "$failed"
      killed=1
      [ "$FAIL_FAST" = 1 ] && return 1
    fi
  done
  return $killed
}

# ---------------------------------------------------------------- main
mapfile -t LINES <<<"$MUTANTS"
selected=()
for i in "${!LINES[@]}"; do
  split_line "${LINES[$i]}"
  n=$((i + 1))
  if [ -n "$ONLY" ]; then
    [[ ",$ONLY," == *",$M_ID,"* ]] || continue
  elif [ "$n" -lt "$FROM" ]; then
    continue
  fi
  selected+=("$i")
done

if [ "$MODE" = list ]; then
  for i in "${selected[@]}"; do
    split_line "${LINES[$i]}"
    printf '%3d %-32s %s\n      - %s\n      + %s\n' $((i + 1)) "$M_ID" "$M_FILE" "$M_FROM" "$M_TO"
  done
  exit 0
fi

if [ "$MODE" = check ]; then
  bad=0
  for i in "${selected[@]}"; do
    split_line "${LINES[$i]}"
    if apply "$M_FILE" "$M_FROM" "$M_TO" 2>"$TMP/apply.err"; then
      printf '%-32s applies\n' "$M_ID"
    else
      printf '%-32s DOES NOT APPLY: %s\n' "$M_ID" "$(cat "$TMP/apply.err")"; bad=1
    fi
    restore_all keep-mtime
  done
  exit $bad
fi

cd "$ROOT" || exit 2
if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet -- core nn optim; then
  echo "mutation.sh: note: the library sources have uncommitted changes; mutants apply on top"
fi
echo "mutation.sh: ${#selected[@]} mutants, build dir $BUILD"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DXGRAD_BUILD_BENCH=OFF \
    -DXGRAD_BUILD_EXAMPLES=OFF >"$TMP/configure.log" 2>&1 || { cat "$TMP/configure.log"; exit 2; }
fi
rm -f "$BUILD"/tests/*.built
start=$(date +%s)
echo -n "baseline (unmutated) ... "
if ! build xgrad_core_tests; then tail -30 "$TMP/build.log"; exit 2; fi
if first=$(run_suite); then
  echo "passes ($(( $(date +%s) - start )) s)"
else
  echo "FAILS: $first -- fix the suite first"; exit 2
fi

killed=0; survived=0; invalid=0
survivors=()
for i in "${selected[@]}"; do
  split_line "${LINES[$i]}"
  t0=$(date +%s)
  printf '%3d %-32s ' $((i + 1)) "$M_ID"
  if ! apply "$M_FILE" "$M_FROM" "$M_TO" 2>"$TMP/apply.err"; then  # not in a subshell: BACKUP
    echo "NOT APPLIED ($(cat "$TMP/apply.err"))"; invalid=$((invalid + 1)); restore_all; continue
  fi
  rm -f "$BUILD"/tests/*.built
  if ! build xgrad_core_tests; then
    echo "does not compile (not counted)"; invalid=$((invalid + 1)); restore_all; continue
  fi
  if by=$(run_suite); then
    echo "SURVIVED ($(( $(date +%s) - t0 )) s)"
    survived=$((survived + 1)); survivors+=("$M_ID")
  else
    echo "killed by $by ($(( $(date +%s) - t0 )) s)"
    killed=$((killed + 1))
  fi
  restore_all
done
rm -f "$BUILD"/tests/*.built

total=$((killed + survived))
echo
echo "mutation score: $killed / $total killed$([ $total -gt 0 ] && echo " ($(( 100 * killed / total ))%)")," \
     "$invalid not counted, $(( ($(date +%s) - start) / 60 )) min"
[ ${#survivors[@]} -gt 0 ] && echo "survivors: ${survivors[*]}"
exit 0
