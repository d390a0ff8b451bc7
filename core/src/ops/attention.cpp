// core/src/ops/attention.cpp: scaled_dot_product_attention (F.scaled_dot_product_attention),
// the fused hot path of the GPT's attention, with its backward right below.
//
// It stands for the composed chain nn::MultiHeadAttention used to run
//   scores = q @ k^T;  scores.masked_fill_(causal, -inf);  w = softmax(scores * scale, -1)
//   w = dropout(w, p);  out = w @ v
// and computes it per (batch..., ) matrix with two GEMMs and, between them, a few passes over
// the rows (see "Row passes" below):
// - the scale is the first GEMM's alpha; mask + softmax touch only the columns j <= i of
//   row i (is_causal) and write exact zeros after them;
// - is_causal: rows are split into blocks of `block` rows and every GEMM multiplies only the
//   blocks at or below the diagonal (see "Causal blocks" below);
// - the dropout mask is drawn exactly as dropout() draws it (one Generator::bernoulli call
//   over a contiguous (..., L, S) tensor), then kept as one byte per weight;
// - saved for backward: the softmax output W (..., L, S) and that byte mask, nothing else the
//   composed chain kept (scores, the float noise, the dropped weights);
// - q, k, v are read in place by BLAS whenever their last dim has unit stride (the MHA's
//   view(b, T, H, D).transpose(1, 2) views: row stride H*D); the output is written into a
//   (B, L, H, Ev) buffer and returned as its (B, H, L, Ev) view, so the MHA's
//   transpose(1, 2).contiguous() is free, and the q/k/v gradients come back in their inputs'
//   layout, so the transpose/view backward that follows copies nothing either;
// - the (batch, head) matrices run in xgrad::parallel_for, calling blas::gemm directly.
//
// Adding to it (an attn_mask, say): extend Params and the two per-matrix kernels, keep the
// backward's row formula in sync, add gradcheck rows (tests/core/gradcheck_rows_attention.cpp)
// and an equivalence case against the composed ops (tests/core/test_attention.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#if defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>  // keep_factors' byte test
#endif

#include "blas.h"
#include "kernels.h"
#include "ops/vec_math.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr int64_t kDefaultBlock = 32;  // causal row block; see "Causal blocks"

// Causal blocks. Rows are cut into blocks [r0, r1) of `block` rows on a grid from 0. Row i may
// only see keys j < n(i) = min(i + 1, S); a row block computes the columns [0, ce) with
// ce = min(r0 + block, S), i.e. up to the end of its diagonal block, and everything right of
// ce is never computed, stored or read. Inside [0, ce) the entries n(i) <= j < ce of W, of the
// dropped weights and of dS are written as exact zeros. That is what makes skipping valid:
// every skipped product (q@k^T and dO@v^T right of ce, and in the column-block GEMMs
// dS^T@q and W^T@dO the rows i < c0 of a column block [c0, c1)) only ever multiplies weights
// that are exactly zero in the composed chain (the softmax of -inf, its dropout, and dS =
// W * (...) with W = 0). A column block [c0, c1) reads rows i >= c0, whose row block starts
// at or after c0 and so computed at least up to min(c0 + block, S) = c1.
struct Params {
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;
  int64_t block = kDefaultBlock;  // rows per block (L when not causal: one block)
  bool dropout = false;           // a mask is applied (0 < p <= 1)
  double p = 0.0;                 // dropout probability
  // 1 / (1 - p) computed in T exactly as dropout() rounds it; 0 for p == 1 (all dropped)
  template <class T>
  T keep_scale() const {
    return p < 1.0 ? T(1) / static_cast<T>(1.0 - p) : T(0);
  }
  int64_t row_end(int64_t r0) const { return std::min(r0 + block, L); }
  int64_t col_end(int64_t r0) const { return causal ? std::min(r0 + block, S) : S; }
  int64_t valid(int64_t i) const { return causal ? std::min(i + 1, S) : S; }
};

// C (m, n) = alpha * op(A) @ op(B), beta 0; k == 0 writes zeros (BLAS would scale C's garbage).
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  blas::gemm(ta, tb, m, n, k, alpha, a, std::max<int64_t>(lda, 1), b, std::max<int64_t>(ldb, 1), T(0), c,
             std::max<int64_t>(ldc, 1));
}

// Element offset of every batch entry of t (all dims but the last two), row-major order.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nbd = t.dim() - 2;
  int64_t nb = 1;
  for (int64_t d = 0; d < nbd; ++d) nb *= t.size(d);
  std::vector<int64_t> off(static_cast<std::size_t>(nb));
  Shape idx(static_cast<std::size_t>(nbd), 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < nb; ++i) {
    off[static_cast<std::size_t>(i)] = cur;
    for (int64_t d = nbd - 1; d >= 0; --d) {  // odometer over the batch dims
      cur += t.stride(d);
      if (++idx[d] < t.size(d)) break;
      cur -= t.stride(d) * t.size(d);
      idx[d] = 0;
    }
  }
  return off;
}

// t itself when BLAS can read each of its matrices in place (unit-stride rows that do not
// overlap), else an unrecorded contiguous copy.
Tensor blas_readable(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if ((cols <= 1 || t.stride(-1) == 1) && (rows <= 1 || t.stride(-2) >= cols)) return t.detach();
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

int64_t row_stride(const Tensor& t) {
  return t.size(-2) <= 1 ? std::max<int64_t>(t.size(-1), 1) : t.stride(-2);
}

// An uninitialised tensor of `shape` laid out in memory like a tensor with `strides` when that
// one is a dense permutation of a contiguous tensor with a unit-stride last dim (so the
// gradient of a transpose(1, 2) view comes back contiguous through TransposeBackward0 and
// ViewBackward0), else a contiguous one.
Tensor empty_in_layout(const Shape& shape, const Shape& strides, DType dtype) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<int64_t> perm(static_cast<std::size_t>(nd));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  Shape ps;
  for (int64_t d : perm) ps.push_back(shape[d]);
  const Shape cs = contiguous_strides(ps);
  bool dense = nd > 0 && perm.back() == nd - 1;
  for (int64_t i = 0; dense && i < nd; ++i) dense = ps[i] == 1 || strides[perm[i]] == cs[i];
  if (!dense) return empty(shape, dtype);
  Shape st(static_cast<std::size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) st[perm[i]] = cs[i];
  return make_view(empty(ps, dtype), shape, st, 0);
}

// ---- Row passes. Between a row block's two GEMMs its rows run in groups of up to kPassRows
// rows, each group in passes over all of its rows (forward: max; exp and sum; normalise and
// drop -- backward: drop dW'; rowsum(dW * W); softmax backward) instead of one row's whole chain
// (max -> exp -> sum -> 1/sum -> W) before the next row's: the rows are short (T = 64 or 128 in
// the GPTs, and causal rows stop at the diagonal), so a chain is mostly latency, while a pass's
// rows are independent and the core overlaps them. A row's values between passes (its max,
// 1/sum, rowsum) wait in red[kPassRows]; a group's rows stay in the L1/L2 cache across passes.
// The elementwise passes walk a row's computed columns [0, ce) in whole SIMD batches (ce is a
// multiple of the batch size at the GPTs' T and block), then one entry at a time, and write the
// entries past the row's n visible keys as exact zeros by a select in the same pass: no fills,
// no loops ending at n (another tail length on every row). dropout()'s multiplier of entry j is
// keep[j] * keep_scale, i.e. mask / (1 - p) bit for bit: keep_scale if kept, else 0.
constexpr int64_t kPassRows = 32;

template <class T>
inline T keep_factor(const bool* keep, int64_t j, T keep_scale) {
  return static_cast<T>(reinterpret_cast<const uint8_t*>(keep)[j]) * keep_scale;
}

template <class T>
using Batch = xsimd::batch<T>;

// lanes l < k of a batch (none for k <= 0)
template <class T>
inline auto lanes_below(int64_t k) {
  static_assert(Batch<T>::size <= 16);
  alignas(64) static constexpr T kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return Batch<T>::load_aligned(kIota) < Batch<T>(static_cast<T>(std::min<int64_t>(k, 16)));
}

// keep_factor of the batch at keep: keep_scale where the mask byte is set, else 0
template <class T>
inline Batch<T> keep_factors(const bool* keep, const Batch<T>& keep_scale) {
  using B = Batch<T>;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (sizeof(B) == 64) {  // AVX-512: the bytes tested straight into a lane mask
    const auto* p = reinterpret_cast<const __m128i*>(keep);
    const __m128i k = B::size == 16 ? _mm_loadu_si128(p) : _mm_loadl_epi64(p);
    const typename B::batch_bool_type set(
        static_cast<typename B::batch_bool_type::register_type>(_mm_test_epi8_mask(k, k)));
    return xsimd::select(set, keep_scale, B(T(0)));
  }
#endif
  alignas(64) T f[B::size];
  for (std::size_t l = 0; l < B::size; ++l) f[l] = keep[l] ? T(1) : T(0);
  return B::load_aligned(f) * keep_scale;
}

// Pads the row's scores with -inf on [n, ne), the entries the softmax has to see as masked,
// with one whole-batch store per batch (when ne is a multiple of the batch size): the max's
// batch loads right after can take their data from those stores, not from a fill's narrower
// ones (that waits until they reach the cache).
template <class T>
void pad_row(T* row, int64_t n, int64_t ne) {
  const T ninf = -std::numeric_limits<T>::infinity();
  using B = Batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  if (ne % W == 0) {
    for (int64_t j = n / W * W; j < ne; j += W)
      xsimd::select(lanes_below<T>(n - j), B::load_unaligned(row + j), B(ninf)).store_unaligned(row + j);
    return;
  }
  std::fill(row + n, row + ne, ninf);
}

// The softmax row after its exps e (row[0, ne)) and their sum's inverse: W = e * inv on
// [0, ne), 0 on [ne, ce), in place; with dropout (wd not null) also the dropped weights
// wd = W * (mask / (1 - p)) on [0, n), 0 on [n, ce).
template <class T>
void normalize_row(T* row, T inv, const bool* keep, T keep_scale, T* wd, int64_t n, int64_t ne, int64_t ce) {
  int64_t j = 0;
  using B = Batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const B vinv(inv), vks(keep_scale), zero(T(0));
  for (; j + W <= ce; j += W) {
    const B x = xsimd::select(lanes_below<T>(ne - j), B::load_unaligned(row + j) * vinv, zero);
    x.store_unaligned(row + j);
    if (wd)
      xsimd::select(lanes_below<T>(n - j), x * keep_factors<T>(keep + j, vks), zero).store_unaligned(wd + j);
  }
  for (; j < ce; ++j) {
    const T x = j < ne ? row[j] * inv : T(0);
    row[j] = x;
    if (wd) wd[j] = j < n ? x * keep_factor(keep, j, keep_scale) : T(0);
  }
}

// Softmax backward of the row w (W), in place over d (dW), given s = rowsum(dW * W):
// dS = W * (dW - s) * scale on [0, n), 0 on [n, ce); when wd is not null also the dropped
// weights dV needs: wd = W * (mask / (1 - p)) on [0, n), 0 on [n, ce). d may be null (wd only).
template <class T>
void backward_row(T* d, const T* w, T s, T scale, const bool* keep, T keep_scale, T* wd, int64_t n,
                  int64_t ce) {
  int64_t j = 0;
  using B = Batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const B vs(s), vscale(scale), vks(keep_scale), zero(T(0));
  for (; j + W <= ce; j += W) {
    const B x = B::load_unaligned(w + j);
    const auto live = lanes_below<T>(n - j);
    if (d) xsimd::select(live, x * (B::load_unaligned(d + j) - vs) * vscale, zero).store_unaligned(d + j);
    if (wd) xsimd::select(live, x * keep_factors<T>(keep + j, vks), zero).store_unaligned(wd + j);
  }
  for (; j < ce; ++j) {
    if (d) d[j] = j < n ? w[j] * (d[j] - s) * scale : T(0);
    if (wd) wd[j] = j < n ? w[j] * keep_factor(keep, j, keep_scale) : T(0);
  }
}

// Starts loading the first row group of the row block [r0, r1) of an (., S) buffer, columns
// [0, ce), into the cache, so that its passes find it there after the GEMM that comes first
// (the weights and masks were written a whole forward pass or bernoulli call ago); the
// hardware prefetcher follows the rows after it.
template <class T>
void prefetch_rows(const T* base, int64_t S, int64_t r0, int64_t r1, int64_t ce) {
  constexpr int64_t kPerLine = 64 / static_cast<int64_t>(sizeof(T));
  for (int64_t i = r0; i < std::min(r1, r0 + kPassRows); ++i)
    for (int64_t j = 0; j < ce; j += kPerLine) __builtin_prefetch(base + i * S + j);
}

// Softmax rows [i0, i1) (at most kPassRows) of the scores in w, computed up to column ce, in
// place: exact zeros after each row's P.valid(i) visible keys. The masked tail is padded with
// -inf up to ne, a multiple of 16 (inside the row's storage), so that exp runs on whole SIMD
// batches; exp(-inf) = 0 there, as for the composed chain's masked entries. With dropout (keep
// not null) also the rows' dropped weights in wd.
template <class T>
void softmax_rows(const Params& P, T* w, const bool* keep, T* wd, int64_t i0, int64_t i1, int64_t ce) {
  const int64_t S = P.S;
  const T ks = P.keep_scale<T>();
  auto padded = [&](int64_t n) { return std::min((n + 15) / 16 * 16, S); };
  T red[kPassRows];
  for (int64_t i = i0; i < i1; ++i) {  // red = the row's max
    T* row = w + i * S;
    const int64_t n = P.valid(i), ne = padded(n);
    pad_row(row, n, ne);
    red[i - i0] = vec::max(row, ne);
  }
  for (int64_t i = i0; i < i1; ++i) {  // e = exp(scores - max) in place; red = 1 / sum(e)
    T* row = w + i * S;
    const int64_t n = P.valid(i);
    if (n > 0) red[i - i0] = T(1) / vec::exp_sub_sum<T>(row, row, padded(n), red[i - i0]);
  }
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t n = P.valid(i);
    normalize_row(w + i * S, red[i - i0], keep ? keep + i * S : nullptr, ks, keep ? wd + i * S : nullptr, n,
                  padded(n), ce);
  }
}

// ---- forward of one (L, S) attention matrix: out (L, Ev) = drop(softmax(q k^T * scale)) @ v.
// w: (L, S) buffer (ld S) receiving the softmax output; keep: dropout()'s (L, S) byte mask for
// this matrix (null without dropout); wd: (L, S) scratch for the dropped weights.
template <class T>
void forward_matrix(const Params& P, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v,
                    int64_t ldv, T* out, int64_t ldo, T* w, const bool* keep, T* wd) {
  const int64_t S = P.S;
  const T scale = static_cast<T>(P.scale);
  for (int64_t r0 = 0; r0 < P.L; r0 += P.block) {
    const int64_t r1 = P.row_end(r0), ce = P.col_end(r0);
    if (keep) prefetch_rows(keep, S, r0, r1, ce);
    // scores (r1 - r0, ce) = scale * q[r0:r1] @ k[0:ce]^T
    gemm<T>(false, true, r1 - r0, ce, P.E, scale, q + r0 * ldq, ldq, k, ldk, w + r0 * S, S);
    for (int64_t i0 = r0; i0 < r1; i0 += kPassRows)
      softmax_rows(P, w, keep, wd, i0, std::min(i0 + kPassRows, r1), ce);
    // out[r0:r1] = W'[r0:r1, 0:ce] @ v[0:ce]   (W' = dropped weights when training)
    const T* a = P.dropout ? wd : w;
    gemm<T>(false, false, r1 - r0, P.Ev, ce, T(1), a + r0 * S, S, v, ldv, out + r0 * ldo, ldo);
  }
}

// Softmax backward of rows [i0, i1) (at most kPassRows), computed up to column ce, in place
// over dp (dW' in, dS out; null when dq and dk are not wanted); with dropout and wd not null
// also the rows' dropped weights W' in wd, for dV. See backward_matrix for the formulas.
template <class T>
void backward_rows(const Params& P, const T* w, const bool* keep, T* dp, T* wd, int64_t i0, int64_t i1,
                   int64_t ce) {
  const int64_t S = P.S;
  const T scale = static_cast<T>(P.scale), ks = P.keep_scale<T>();
  T red[kPassRows];
  if (dp) {
    if (keep)                            // dW = dW' * (mask / (1 - p))
      for (int64_t i = i0; i < i1; ++i)  // on all of [0, ce): backward_row zeroes [n, ce)
        vec::mul_keep_mask(dp + i * S, keep + i * S, ks, dp + i * S, ce);
    for (int64_t i = i0; i < i1; ++i)  // red = rowsum(dW * W)
      red[i - i0] = vec::dot(dp + i * S, w + i * S, P.valid(i));
  }
  for (int64_t i = i0; i < i1; ++i)
    backward_row(dp ? dp + i * S : nullptr, w + i * S, dp ? red[i - i0] : T(0), scale,
                 keep ? keep + i * S : nullptr, ks, wd ? wd + i * S : nullptr, P.valid(i), ce);
}

// ---- backward of one matrix. In the forward pass out = W' @ v with W' = drop(W) and
// W = softmax(q k^T * scale), so
//   dV = W'^T @ dO;  dW' = dO @ v^T;  dW = drop(dW') (mask and 1/(1-p));
//   dS = W * (dW - rowsum(dW * W)) * scale (softmax backward, then the scale);
//   dQ = dS @ k;  dK = dS^T @ q.
// dp and wd are (L, S) scratch; dq/dk/dv are null when not wanted.
template <class T>
void backward_matrix(const Params& P, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v,
                     int64_t ldv, const T* dout, int64_t lddo, const T* w, const bool* keep, T* dq,
                     int64_t lddq, T* dk, int64_t lddk, T* dv, int64_t lddv, T* dp, T* wd) {
  const int64_t L = P.L, S = P.S;
  const bool want_s = dq || dk;
  const bool dropped = P.dropout && dv;  // dV needs W' materialised
  for (int64_t r0 = 0; r0 < L; r0 += P.block) {
    const int64_t r1 = P.row_end(r0), ce = P.col_end(r0);
    prefetch_rows(w, S, r0, r1, ce);
    if (keep) prefetch_rows(keep, S, r0, r1, ce);
    if (want_s)  // dW'[r0:r1, 0:ce] = dO[r0:r1] @ v[0:ce]^T
      gemm<T>(false, true, r1 - r0, ce, P.Ev, T(1), dout + r0 * lddo, lddo, v, ldv, dp + r0 * S, S);
    if (want_s || dropped)
      for (int64_t i0 = r0; i0 < r1; i0 += kPassRows)
        backward_rows(P, w, keep, want_s ? dp : nullptr, dropped ? wd : nullptr, i0,
                      std::min(i0 + kPassRows, r1), ce);
    if (dq)  // dQ[r0:r1] = dS[r0:r1, 0:ce] @ k[0:ce]
      gemm<T>(false, false, r1 - r0, P.E, ce, T(1), dp + r0 * S, S, k, ldk, dq + r0 * lddq, lddq);
  }
  // Column blocks [c0, c1) of dS and W': only rows i >= c0 are nonzero when causal.
  const int64_t cblock = P.causal ? P.block : std::max<int64_t>(S, 1);
  const T* wv = dropped ? wd : w;
  for (int64_t c0 = 0; c0 < S; c0 += cblock) {
    const int64_t c1 = std::min(c0 + cblock, S);
    const int64_t i0 = P.causal ? std::min(c0, L) : 0;
    if (dk)  // dK[c0:c1] = dS[i0:L, c0:c1]^T @ q[i0:L]
      gemm<T>(true, false, c1 - c0, P.E, L - i0, T(1), dp + i0 * S + c0, S, q + i0 * ldq, ldq, dk + c0 * lddk,
              lddk);
    if (dv)  // dV[c0:c1] = W'[i0:L, c0:c1]^T @ dO[i0:L]
      gemm<T>(true, false, c1 - c0, P.Ev, L - i0, T(1), wv + i0 * S + c0, S, dout + i0 * lddo, lddo,
              dv + c0 * lddv, lddv);
  }
}

// Scratch for one parallel_for chunk: uninitialised, only the parts a kernel writes are read.
template <class T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::unique_ptr<T[]>(n > 0 ? new T[static_cast<std::size_t>(n)] : nullptr);
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double p) {
  if (!q.defined() || !k.defined() || !v.defined()) fail(kOp, "got an undefined tensor");
  auto shapes = [&] {
    return "query " + shape_str(q.shape()) + ", key " + shape_str(k.shape()) + ", value " +
           shape_str(v.shape());
  };
  if (!is_floating(q.dtype()) || q.dtype() != k.dtype() || q.dtype() != v.dtype())
    fail(kOp, "expected query, key and value of one float dtype (float32 or float64), got ",
         dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()), " (", shapes(),
         ")");
  if (q.dim() < 2 || q.dim() != k.dim() || q.dim() != v.dim())
    fail(kOp,
         "expected query (..., L, E), key (..., S, E) and value (..., S, Ev) with the same "
         "number of dims (at least 2), got ",
         shapes());
  if (q.size(-1) != k.size(-1))
    fail(kOp, "query and key must have the same embedding size E (last dim), got ", shapes());
  if (k.size(-2) != v.size(-2))
    fail(kOp, "key and value must have the same sequence length S (dim -2), got ", shapes());
  for (int64_t d = 0; d < q.dim() - 2; ++d)
    if (q.size(d) != k.size(d) || q.size(d) != v.size(d))
      fail(kOp,
           "query, key and value must have the same batch dims (all but the last two; "
           "xgrad does not broadcast them), got ",
           shapes());
  check_dropout_p(kOp, p);
}

Tensor sdpa_impl(const Tensor& query, const Tensor& key, const Tensor& value, double dropout_p,
                 bool is_causal, std::optional<double> scale, Generator* gen, int64_t block) {
  check_inputs(query, key, value, dropout_p);
  if (block < 1) fail(kOp, "block size must be positive, got ", block);
  const Tensor q = blas_readable(query), k = blas_readable(key), v = blas_readable(value);
  Params P;
  P.L = q.size(-2);
  P.S = k.size(-2);
  P.E = q.size(-1);
  P.Ev = v.size(-1);
  P.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(P.E)));
  P.causal = is_causal;
  P.block = is_causal ? block : std::max<int64_t>(P.L, 1);
  P.dropout = dropout_p > 0.0;
  P.p = dropout_p;
  const Shape batch(q.shape().begin(), q.shape().end() - 2);
  const int64_t nb = numel_of(batch), LS = P.L * P.S;
  const DType dt = q.dtype();

  // out (batch..., L, Ev), stored (batch[:-1]..., L, batch[-1], Ev) when there are >= 2 batch
  // dims: (B, H, L, Ev) over a (B, L, H, Ev) buffer, as torch's CPU flash attention returns it
  Shape out_shape = batch;
  out_shape.push_back(P.L);
  out_shape.push_back(P.Ev);
  Tensor out;
  if (batch.size() >= 2) {
    Shape buf = out_shape;
    std::swap(buf[buf.size() - 3], buf[buf.size() - 2]);  // (..., H, L, Ev) -> (..., L, H, Ev)
    Shape st = contiguous_strides(buf);
    std::swap(st[st.size() - 3], st[st.size() - 2]);
    out = make_view(empty(buf, dt), out_shape, st, 0);
  } else {
    out = empty(out_shape, dt);
  }
  const bool need_grad = GradMode::is_enabled() && any_requires_grad({query, key, value});
  // dropout()'s draws: bernoulli(1 - p) over a contiguous (..., L, S) tensor, in one call,
  // straight into the byte mask; p == 1 draws nothing (dropout() multiplies by zeros then)
  Shape ws = batch;
  ws.push_back(P.L);
  ws.push_back(P.S);
  Tensor keep = P.dropout ? empty(ws, kBool) : Tensor();  // bytes
  if (P.dropout) {
    if (dropout_p < 1.0)
      (gen ? *gen : default_generator()).bernoulli(keep.data_ptr<bool>(), keep.numel(), 1.0 - dropout_p);
    else std::memset(keep.raw_data_ptr(), 0, static_cast<std::size_t>(keep.numel()));
  }
  Tensor weights = need_grad ? empty(ws, dt) : Tensor();  // W (..., L, S)

  const auto oq = batch_offsets(q), ok = batch_offsets(k), ov = batch_offsets(v), oo = batch_offsets(out);
  const int64_t ldq = row_stride(q), ldk = row_stride(k), ldv = row_stride(v), ldo = row_stride(out);
  kernels::dispatch_float(dt, kOp, [&](auto tag) {
    using T = decltype(tag);
    const T* pq = q.data_ptr<T>();
    const T* pk = k.data_ptr<T>();
    const T* pv = v.data_ptr<T>();
    T* po = out.data_ptr<T>();
    T* pw = weights.defined() ? weights.data_ptr<T>() : nullptr;
    bool* pkeep = keep.defined() ? keep.data_ptr<bool>() : nullptr;
    parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
      auto w_buf = scratch<T>(pw ? 0 : LS);
      auto wd_buf = scratch<T>(P.dropout ? LS : 0);
      for (int64_t b = b0; b < b1; ++b) {
        const std::size_t i = static_cast<std::size_t>(b);
        forward_matrix<T>(P, pq + oq[i], ldq, pk + ok[i], ldk, pv + ov[i], ldv, po + oo[i], ldo,
                          pw ? pw + b * LS : w_buf.get(), pkeep ? pkeep + b * LS : nullptr, wd_buf.get());
      }
    });
  });
  if (!need_grad) return out;

  return record("ScaledDotProductAttentionBackward0", out, {query, key, value},
                [sq = key.requires_grad() ? save(q) : SavedTensor(),
                 sk = query.requires_grad() ? save(k) : SavedTensor(),
                 sv = query.requires_grad() || key.requires_grad() ? save(v) : SavedTensor(), weights, keep,
                 P, nb, dt, shapes = std::array<Shape, 3>{q.shape(), k.shape(), v.shape()},
                 layouts = std::array<Shape, 3>{q.strides(), k.strides(), v.strides()}](const Tensor& grad,
                                                                                        Grads& grads) {
                  // the formulas are backward_matrix's; each gradient is laid out like its input
                  const Tensor dout = blas_readable(grad);
                  Tensor d[3];
                  for (std::size_t i = 0; i < 3; ++i)
                    if (grads.wants(i)) d[i] = empty_in_layout(shapes[i], layouts[i], dt);
                  const Tensor q = sq.defined() ? sq.get() : Tensor();
                  const Tensor k = sk.defined() ? sk.get() : Tensor();
                  const Tensor v = sv.defined() ? sv.get() : Tensor();
                  // per operand: its batch offsets and row stride (empty / 1 when not used)
                  struct Operand {
                    std::vector<int64_t> off;
                    int64_t ld = 1;
                  };
                  auto operand = [](const Tensor& t) {
                    return t.defined() ? Operand{batch_offsets(t), row_stride(t)} : Operand{};
                  };
                  const Operand oq = operand(q), ok = operand(k), ov = operand(v), odo = operand(dout),
                                odq = operand(d[0]), odk = operand(d[1]), odv = operand(d[2]);
                  const int64_t LS = P.L * P.S;
                  kernels::dispatch_float(dt, "scaled_dot_product_attention_backward", [&](auto tag) {
                    using T = decltype(tag);
                    // the matrix of operand t for batch entry b, or null when t is not used
                    auto mat = [](const Tensor& t, const Operand& o, int64_t b) -> T* {
                      return t.defined() ? t.data_ptr<T>() + o.off[static_cast<std::size_t>(b)] : nullptr;
                    };
                    const T* pw = weights.data_ptr<T>();
                    const bool* pkeep = keep.defined() ? keep.data_ptr<bool>() : nullptr;
                    parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
                      auto dp = scratch<T>(d[0].defined() || d[1].defined() ? LS : 0);
                      auto wd = scratch<T>(P.dropout && d[2].defined() ? LS : 0);
                      for (int64_t b = b0; b < b1; ++b)
                        backward_matrix<T>(P, mat(q, oq, b), oq.ld, mat(k, ok, b), ok.ld, mat(v, ov, b),
                                           ov.ld, mat(dout, odo, b), odo.ld, pw + b * LS,
                                           pkeep ? pkeep + b * LS : nullptr, mat(d[0], odq, b), odq.ld,
                                           mat(d[1], odk, b), odk.ld, mat(d[2], odv, b), odv.ld, dp.get(),
                                           wd.get());
                    });
                  });
                  for (std::size_t i = 0; i < 3; ++i)
                    if (d[i].defined()) grads.add(i, d[i]);
                });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    double dropout_p, Flag is_causal, std::optional<double> scale,
                                    Generator* gen) {
  profiler::RecordFunction rec("scaled_dot_product_attention");
  return sdpa_impl(query, key, value, dropout_p, is_causal, scale, gen, kDefaultBlock);
}

namespace detail {
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            double dropout_p, bool is_causal, std::optional<double> scale,
                                            Generator* gen, int64_t block) {
  return sdpa_impl(query, key, value, dropout_p, is_causal, scale, gen, block);
}
}  // namespace detail

}  // namespace xgrad
