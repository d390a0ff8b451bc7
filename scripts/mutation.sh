#!/usr/bin/env bash
# scripts/mutation.sh: measure how strong the test suite is. Each mutant below is a
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
# Known equivalent mutants (they survive, and no test can kill them): none at present.
MUTANTS=$(cat <<'EOF'
sm-dout-contig|core/src/ops/activation.cpp|kernels::softmax_backward<Log>(yv, contig(dout), dx, g);|kernels::softmax_backward<Log>(yv, dout, dx, g);
sm-scale-sum|core/src/kernels/activation_kernel.h|dxr[i] = yr[i] * (dyr[i] - s);|dxr[i] = yr[i] * (dyr[i] - s * T(1.01));
lsm-sign|core/src/kernels/activation_kernel.h|return d - vec::vexp(v) * s;|return d + vec::vexp(v) * s;
sm-inner-drop-term|core/src/kernels/activation_kernel.h|dxc[j] = yc[j] * (dyc[j] - s[j]);|dxc[j] = yc[j] * dyc[j];
sm-inner-off-by-one|core/src/kernels/activation_kernel.h|    for (int64_t c = 0; c < C; ++c) {\n      const T* yc = y + base + c * inner;\n      const T* dyc = dy + base + c * inner;\n      if constexpr|    for (int64_t c = 0; c < C - 1; ++c) {\n      const T* yc = y + base + c * inner;\n      const T* dyc = dy + base + c * inner;\n      if constexpr
lsm-inner-wrong-saved|core/src/kernels/activation_kernel.h|for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j];|for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j] * yc[j];
relu-dout-contig|core/src/ops/activation.cpp|kernels::relu_backward(yv, contig(dout), dx);|kernels::relu_backward(yv, dout, dx);
sigmoid-drop-term|core/src/kernels/activation_kernel.h|px[i] = pd[i] * (T(1) - py[i]) * py[i];|px[i] = pd[i] * (T(1) - py[i]);
gelu-tanh-scale|core/src/kernels/vec_math.h|const auto left_derivative = T(0.5) * right;|const auto left_derivative = T(0.505) * right;
gelu-dout-contig|core/src/ops/activation.cpp|kernels::gelu_backward(contig(xv), contig(dout), dx, tanh_approx);|kernels::gelu_backward(contig(xv), dout, dx, tanh_approx);
sdpa-dout-as-laid-out|core/src/ops/attention.cpp|const Tensor dout = row_readable(grad);|const Tensor dout = grad.detach();
sdpa-readable-any-col-stride|core/src/ops/attention.cpp|t.size(-1) <= 1 \|\| t.stride(-1) == 1)|t.size(-1) <= 1 \|\| t.stride(-1) >= 1)
sdpa-dq-sign|core/src/kernels/attention_backward.h|rows_form<T, true>(rows, p.E, n, ds + off, W, k, ldk, T(1), dq + i0 * lddq, lddq);|rows_form<T, true>(rows, p.E, n, ds + off, W, k, ldk, T(-1), dq + i0 * lddq, lddq);
sdpa-rowsum-drop-chain|core/src/kernels/attention_backward.h|const V<T> r = (s0 + s1) + (s2 + s3);|const V<T> r = (s0 + s1) + s2;
sdpa-dv-wrong-saved|core/src/kernels/attention_backward.h|keys_product(bl, dropped ? wd : w, dob, lddob, p.Ev, dv, lddv);|keys_product(bl, w, dob, lddob, p.Ev, dv, lddv);
ln-dout-contig|core/src/ops/nn_functional.cpp|contig(dout), mean, rstd, M, N, dx, dw, db);|dout, mean, rstd, M, N, dx, dw, db);
ln-dx-drop-term|core/src/kernels/vec_math.h|(rsb * xsimd::fnma(xhat, gxmb, g_centred)).store_unaligned(dxr + i);|(rsb * g_centred).store_unaligned(dxr + i);
ln-dw-scale|core/src/kernels/vec_math.h|if (dw) dw[i] = xsimd::fma(dr[i], xhat, dw[i]);|if (dw) dw[i] = xsimd::fma(dr[i] * T(1.01), xhat, dw[i]);
ln-gmean-wrong-saved|core/src/kernels/vec_math.h|g_mean[r - g0] = sg * invN;|g_mean[r - g0] = sgx * invN;
ln-block-partials-off-by-one|core/src/kernels/nn_functional_kernel.h|    for (int64_t b = 0; b < blocks; ++b) {\n      if (pdw)|    for (int64_t b = 0; b < blocks - 1; ++b) {\n      if (pdw)
emb-dout-contig|core/src/ops/nn_functional.cpp|kernels::embedding_backward(ids, contig(compute_copy(dout)), dw);|kernels::embedding_backward(ids, compute_copy(dout), dw);
dropout-dout-contig|core/src/ops/nn_functional.cpp|kernels::dropout_backward(contig(dout), mask, p, dx);|kernels::dropout_backward(dout, mask, p, dx);
ce-scale|core/src/kernels/nn_functional_kernel.h|static_cast<T>(dloss.item() / static_cast<double>(count))|static_cast<T>(1.01 * dloss.item() / static_cast<double>(count))
mse-db-sign|core/src/kernels/nn_functional_kernel.h|for (int64_t i = 0; i < n; ++i) pdb[i] = -pd[i];|for (int64_t i = 0; i < n; ++i) pdb[i] = pd[i];
sub-db-sign|core/src/ops/elementwise.cpp|if (grads.wants(1)) grads.add(1, neg(sum_to(dout, sb)));|if (grads.wants(1)) grads.add(1, sum_to(dout, sb));
mul-wrong-saved|core/src/ops/elementwise.cpp|if (grads.wants(0)) grads.add(0, sum_to(mul(dout, bs.get()), sa));|if (grads.wants(0)) grads.add(0, sum_to(mul(dout, as.get()), sa));
div-db-scale|core/src/ops/elementwise.cpp|return -g * x / (y * y); }),|return -g * x / (y * y) * decltype(y)(1.01); }),
tanh-drop-term|core/src/ops/elementwise.cpp|return g * (decltype(y)(1) - y * y); }));|return g * decltype(y)(1); }));
where-swap|core/src/ops/elementwise.cpp|grads.add(1, sum_to(select_where(cs.get(), zero, dout, dout.shape()), sb));|grads.add(1, sum_to(select_where(cs.get(), dout, zero, dout.shape()), sb));
mean-off-by-one|core/src/ops/reduce.cpp|keepdim_view(div(dout, static_cast<double>(n)), in_shape, mask)|keepdim_view(div(dout, static_cast<double>(n + 1)), in_shape, mask)
var-scale|core/src/ops/reduce.cpp|grads.add(0, mul(centered, mul(dout.reshape(keep), 2.0 / denom)));|grads.add(0, mul(centered, mul(dout.reshape(keep), 2.02 / denom)));
maxdim-dout-contig|core/src/ops/reduce.cpp|  const Tensor g = dout.contiguous();\n  const Tensor ix = indices.contiguous();|  const Tensor g = dout;\n  const Tensor ix = indices.contiguous();
linear-bias-dout-contig|core/src/ops/linalg.cpp|Tensor d = dout.is_contiguous() ? dout : dense_copy(dout);|Tensor d = dout;
index-select-dout-contig|core/src/ops/shape.cpp|const Tensor g = compute_copy(dout).contiguous();|const Tensor g = compute_copy(dout);
cat-wrong-offset|core/src/ops/shape.cpp|grads.add(i, dout.narrow(d, at, sizes[i]));|grads.add(i, dout.narrow(d, 0, sizes[i]));
triu-no-zero|core/src/ops/shape.cpp|0 outside, so da is dout inside it\n    grads.add(0,\n              linear_map(name, name, dout, keep_triangle(diagonal, upper), keep_triangle(diagonal, upper)));|0 outside, so da is dout inside it\n    grads.add(0, dout);
permute-backward-forward-perm|core/src/ops/views.cpp|grads.add(0, dout.permute(inverse));|grads.add(0, dout.permute(inverse).permute(inverse).permute(inverse));
sdpa-simd-drop-scale|core/src/kernels/attention_backward.h|(V<T>::load_unaligned(w + j * W) * (V<T>::load_unaligned(ds + j * W) - r) * vscale)|(V<T>::load_unaligned(w + j * W) * (V<T>::load_unaligned(ds + j * W) - r))
sdpa-no-dropout-on-dw|core/src/kernels/attention_backward.h|    if (keep) {\n      d = d * kf;|    if (false) {\n      d = d * kf;
lsm-sum-off-by-one|core/src/kernels/activation_kernel.h|const T s = vec::sum(dyr, C);|const T s = vec::sum(dyr, C - 1);
relu-at-zero|core/src/kernels/activation_kernel.h|px[i] = py[i] > T(0) ? pd[i] : T(0);|px[i] = py[i] >= T(0) ? pd[i] : T(0);
gelu-erf-sign|core/src/kernels/vec_math.h|return cdf + v * pdf;|return cdf - v * pdf;
dropout-backward-scale|core/src/kernels/nn_functional_kernel.h|    const T scale = T(1) / static_cast<T>(1.0 - p);\n    const bool* pm = keep.data_ptr<bool>();\n    const T* pd = dy.data_ptr<T>();|    const T scale = T(1.01) / static_cast<T>(1.0 - p);\n    const bool* pm = keep.data_ptr<bool>();\n    const T* pd = dy.data_ptr<T>();
ce-target-term-scale|core/src/kernels/nn_functional_kernel.h|dr[pt[r]] -= gscale;|dr[pt[r]] -= gscale * T(1.01);
ce-bf16-dloss-rows|core/src/kernels/nn_functional_kernel.h|pt + s0, pl + s0, g, pdl ? pdl + s0 : nullptr,|pt + s0, pl + s0, g, pdl,
emb-repeats-overwrite|core/src/kernels/nn_functional_kernel.h|for (int64_t k = k0; k < k1; ++k) row[k] += src[k];|for (int64_t k = k0; k < k1; ++k) row[k] = src[k];
engine-always-owned|core/src/autograd.cpp|    owned = exclusively_owned(g);|    owned = true;
rope-bf16-backward-untransposed|core/src/kernels/rotary_kernel.h|return rotary::rotate_rows_bf16<true>(|return rotary::rotate_rows_bf16<false>(
rope-bf16-out-at-x-offset|core/src/kernels/rotary_kernel.h|float_to_bf16_n(buf.data() + D, &out[r * D].bits, D);|float_to_bf16_n(buf.data() + D, &out[off].bits, D);
silu-bf16-db-from-da|core/src/kernels/silu_mul_kernel.h|if (pdb) float_to_bf16_n(dbf, &pdb[i].bits, m);|if (pdb) float_to_bf16_n(daf, &pdb[i].bits, m);
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
