// core/src/ops/attention_kernel.h (private): the kernel floor under attention.cpp. One
// (L, S) attention matrix -- one (batch, head) -- forward and backward, on one thread:
//
//   forward:  P = scale * q k^T;  W = softmax(P) (causal: keys j <= i);  W' = W * mask / (1 - p)
//             out = W' v
//   backward: dW' = dO v^T;  dW = dW' * mask / (1 - p);  dS = W * (dW - rowsum(dW * W)) * scale
//             dq = dS k;  dk = dS^T q;  dv = W'^T dO
//
// The six products run on one register tile (`micro_tile`, as gemm_kernel.h's: per k it loads
// kNV vectors of a B row and broadcasts kMR values of A, kMR * kNV FMAs; here with the B
// operands prepared once per head, no k panels, no threads and no per-call set-up, which is
// what the head-sized products of attention spend their time on in a general GEMM). Per head
// (per-thread scratch): k^T and v^T packed as slivers of kNR columns (E x kNR each, contiguous:
// the B of the scores and of dW'); v, k, q, dO rows (the B of out, dq, dk, dv) read in place,
// or packed padded to whole vectors when the head dim is not a multiple of the vector. A is
// read in place: the q and dO rows, and the P / dS / W' rows, also column-wise (dk, dv:
// A = dS^T, W'^T).
//
// Rows run in strips of `block` rows: the scores of the strip, tile by tile; then the row
// passes over the strip (max; exp and sum; normalise and drop -- backward: rowsum(dW * W);
// dS and W'), a pass over all rows of the strip before the next pass, so the short rows'
// latency chains overlap; then the strip's out (dq) rows. dk and dv run last, by tiles of
// columns, over the whole head's dS and W'.
//
// Causal (row i sees keys j < n(i) = min(i + 1, S)): a tile computes only what one of its rows
// sees. A row tile of scores stops at the sliver holding its last row's last key; the out / dq
// tile's k loop stops at n(last row); the dk / dv tile of columns [j0, j0 + mr) starts its k
// loop at row j0 (rows i < j0 see none of its columns). A tile's rows that see fewer keys read
// W', dS as exact zeros there: each row i writes its W, W', dS with zeros on [n(i), ext(i)),
// ext(i) >= i + kMR covering every tile that reads row i. Skipping a product that is exactly
// zero leaves every sum unchanged, and every output element is one FMA chain in k order inside
// one tile of one thread, so the results do not depend on the strip or on how the heads are
// split over threads.
#pragma once
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#if defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>  // keep_factors' byte test
#endif

#include "ops/gemm_kernel.h"  // transpose_16x16
#include "ops/vec_math.h"

namespace xgrad::attention_kernel {

template <class T>
using V = xsimd::batch<T>;
template <class T>
inline constexpr int64_t kW = static_cast<int64_t>(V<T>::size);  // lanes per vector
inline constexpr int64_t kNV = 2;                                // vectors per tile row
template <class T>
inline constexpr int64_t kNR = kW<T> + kW<T>;  // tile columns: kNV = 2 vectors
#if XSIMD_WITH_AVX512F
inline constexpr int64_t kMR = 14;  // tile rows: 28 accumulators of 32 registers
#else
inline constexpr int64_t kMR = 6;  // 12 of 16
#endif
inline constexpr int64_t kDefaultBlock = 2 * kMR;  // rows per strip
inline constexpr int64_t kPassRows = 32;           // rows per group of row passes

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// One attention matrix's sizes and options; p == 0: no dropout.
struct Params {
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;
  int64_t block = kDefaultBlock;  // rows per strip (>= 1)
  double p = 0.0;
  bool dropout() const { return p > 0.0; }
  int64_t valid(int64_t i) const { return causal ? std::min(i + 1, S) : S; }  // n(i)
};

// The buffers' geometry in elements of T: Sp = S rounded up to whole slivers (the row stride of
// W and every (L, S) scratch), Ep / Evp the padded widths of the packed rows.
template <class T>
struct Geometry {
  Params P;
  int64_t Sp, Ep, Evp, tile;
  explicit Geometry(const Params& p)
      : P(p),
        Sp(round_up(p.S, kNR<T>)),
        Ep(round_up(p.E, kW<T>)),
        Evp(round_up(p.Ev, kW<T>)),
        tile(std::min(kMR, p.block)) {}
  // columns [0, ext(i)) of row i of W, W', dS are written (zeros from n(i) on)
  int64_t ext(int64_t i) const { return P.causal ? std::min(Sp, round_up(i + kMR, kW<T>)) : Sp; }
  T keep_scale() const { return P.p < 1.0 ? T(1) / static_cast<T>(1.0 - P.p) : T(0); }  // as dropout()
};

// Bytes a dropout mask needs past its L * S per matrix: rows are read in whole vectors up to
// Sp (the entries past S are masked off, but read).
template <class T>
int64_t keep_padding(const Params& p) {
  return Geometry<T>(p).Sp - p.S + 64;
}

// ---- the register tile. C (MR x NV*W) = alpha * A (MR x kc) @ B (kc x NV*W): A(r, k) at
// a[k * lda + r] when TA (A stored transposed), else a[r * lda + k]; B's row k at b + k * ldb.
// Each element of C is one FMA chain in k order, then the product with alpha.
template <class T, int64_t MR, int64_t NV, bool TA>
inline void micro_tile(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha, T* c,
                       int64_t ldc) {
  constexpr int64_t W = kW<T>;
  V<T> acc[MR][NV];
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = V<T>(T(0));
  for (int64_t k = 0; k < kc; ++k) {
    V<T> bv[NV];
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) bv[v] = V<T>::load_unaligned(b + v * W);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {
      const V<T> ar(TA ? a[k * lda + r] : a[r * lda + k]);
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(ar, bv[v], acc[r][v]);
    }
    b += ldb;
  }
  const V<T> va(alpha);
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) (acc[r][v] * va).store_unaligned(c + r * ldc + v * W);
}

// micro_tile with exactly mr rows (1 <= mr <= R)
template <class T, int64_t NV, bool TA, int64_t R = kMR>
inline void micro_tile_rows(int64_t mr, int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha,
                            T* c, int64_t ldc) {
  if constexpr (R > 1) {
    if (mr < R) return micro_tile_rows<T, NV, TA, R - 1>(mr, kc, a, lda, b, ldb, alpha, c, ldc);
  }
  micro_tile<T, R, NV, TA>(kc, a, lda, b, ldb, alpha, c, ldc);
}

// C (mr x n) = alpha * A (mr x kc) @ B (kc x n), mr <= kMR, tile by tile of kNR columns;
// b_at(j0) gives the B rows of columns [j0, j0 + kNR) and their stride (zero-padded past n).
// C's rows have room up to whole vectors when c_padded; else a ragged last tile goes through a
// local one.
template <class T, bool TA, class BAt>
void row_panel(int64_t mr, int64_t n, int64_t kc, const T* a, int64_t lda, BAt b_at, T alpha, T* c,
               int64_t ldc, bool c_padded) {
  constexpr int64_t W = kW<T>, NR = kNR<T>;
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    const auto [b, ldb] = b_at(j0);
    const int64_t nr = std::min(NR, n - j0);
    alignas(64) T tmp[kMR * NR];
    const bool via_tmp = !c_padded && nr % W != 0;
    T* cj = via_tmp ? tmp : c + j0;
    const int64_t ldcj = via_tmp ? NR : ldc;
    if (nr > W) micro_tile_rows<T, 2, TA>(mr, kc, a, lda, b, ldb, alpha, cj, ldcj);
    else micro_tile_rows<T, 1, TA>(mr, kc, a, lda, b, ldb, alpha, cj, ldcj);
    if (via_tmp)
      for (int64_t r = 0; r < mr; ++r) std::copy(tmp + r * NR, tmp + r * NR + nr, c + r * ldc + j0);
  }
}

// ---- packing (per head)

// x (n rows of m values, row stride ldx) -> out (n, mp) rows, zero-padded to mp >= m
template <class T>
void pack_rows(const T* x, int64_t ldx, int64_t n, int64_t m, int64_t mp, T* out) {
  constexpr int64_t W = kW<T>;
  const int64_t mv = m / W * W;  // whole vectors
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * ldx;
    T* oi = out + i * mp;
    for (int64_t e = 0; e < mv; e += W) V<T>::load_unaligned(xi + e).store_unaligned(oi + e);
    for (int64_t e = mv; e < m; ++e) oi[e] = xi[e];
    for (int64_t e = m; e < mp; ++e) oi[e] = T(0);
  }
}

// The B operand of rows x (n rows of m values, row stride ldx): x itself when its rows are whole
// vectors, else packed into buf as (n, round_up(m, W)) rows. Returns the rows and their stride.
template <class T>
std::pair<const T*, int64_t> b_rows(const T* x, int64_t ldx, int64_t n, int64_t m, T* buf) {
  if (m % kW<T> == 0) return {x, ldx};
  pack_rows(x, ldx, n, m, round_up(m, kW<T>), buf);
  return {buf, round_up(m, kW<T>)};
}

// x (n rows of m values, row stride ldx) -> x^T as slivers of kNR columns: sliver s holds
// x^T[:, s kNR : (s + 1) kNR] as (m, kNR) rows, zero-padded past n. Whole 16 x 16 float
// blocks go through gemm_kernel::transpose_16x16 (AVX-512), the rest element by element, row by row.
template <class T>
void pack_transposed_slivers(const T* x, int64_t ldx, int64_t n, int64_t m, T* out) {
  constexpr int64_t NR = kNR<T>;
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    T* s = out + j0 * m;
    const int64_t nr = std::min(NR, n - j0);
    int64_t jb = 0, mb = 0;  // rows below jb and columns below mb done by blocks
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {
      jb = nr / 16 * 16;
      mb = m / 16 * 16;
      for (int64_t j = 0; j < jb; j += 16)
        for (int64_t e = 0; e < mb; e += 16)
          gemm_kernel::transpose_16x16(x + (j0 + j) * ldx + e, ldx, s + e * NR + j, NR);
    }
#endif
    for (int64_t j = 0; j < nr; ++j) {
      const T* xj = x + (j0 + j) * ldx;
      for (int64_t e = j < jb ? mb : 0; e < m; ++e) s[e * NR + j] = xj[e];
    }
    for (int64_t e = 0; e < m; ++e) std::fill(s + e * NR + nr, s + (e + 1) * NR, T(0));
  }
}

// ---- row passes

// lanes l < k of a batch (none for k <= 0)
template <class T>
inline auto lanes_below(int64_t k) {
  static_assert(kW<T> <= 16);
  alignas(64) static constexpr T kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return V<T>::load_aligned(kIota) < V<T>(static_cast<T>(std::min<int64_t>(k, 16)));
}

// the largest lane of v
template <class T>
inline T hmax(const V<T>& v) {
#if XSIMD_WITH_AVX512F
  if constexpr (sizeof(V<T>) == 64 && std::is_same_v<T, float>) return _mm512_reduce_max_ps(v);
  if constexpr (sizeof(V<T>) == 64 && std::is_same_v<T, double>) return _mm512_reduce_max_pd(v);
#endif
  alignas(64) T lanes[kW<T>];
  v.store_aligned(lanes);
  T m = lanes[0];
  for (int64_t l = 1; l < kW<T>; ++l) m = std::max(m, lanes[l]);
  return m;
}

// dropout()'s multiplier of the batch at keep: keep_scale where the mask byte is set, else 0
// (mask / (1 - p) bit for bit)
template <class T>
inline V<T> keep_factors(const uint8_t* keep, const V<T>& keep_scale) {
  using B = V<T>;
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

// Softmax of the strip's rows [r0, r1) over the scores in w (row i at w + i * Sp, computed on
// [0, n(i))), in place: W on [0, ext(i)), zeros from n(i); with dropout also W' on [0, ext(i))
// at wd + (i - r0) * Sp (keep: the matrix's mask, row stride S).
template <class T>
void softmax_strip(const Geometry<T>& g, T* w, const uint8_t* keep, T* wd, int64_t r0, int64_t r1) {
  constexpr int64_t W = kW<T>;
  const int64_t Sp = g.Sp, S = g.P.S;
  const T ninf = -std::numeric_limits<T>::infinity();
  const V<T> vks(g.keep_scale()), zero(T(0));
  T red[kPassRows];
  for (int64_t i0 = r0; i0 < r1; i0 += kPassRows) {
    const int64_t i1 = std::min(i0 + kPassRows, r1);
    for (int64_t i = i0; i < i1; ++i) {  // red = the row's max over [0, n), -inf padded to whole vectors
      T* row = w + i * Sp;
      const int64_t n = g.P.valid(i), ne = round_up(n, W);
      if (n % W) {
        const int64_t j = ne - W;
        xsimd::select(lanes_below<T>(n - j), V<T>::load_unaligned(row + j), V<T>(ninf))
            .store_unaligned(row + j);
      }
      V<T> mx(ninf);
      for (int64_t j = 0; j < ne; j += W) mx = xsimd::max(mx, V<T>::load_unaligned(row + j));
      red[i - i0] = hmax(mx);
    }
    for (int64_t i = i0; i < i1; ++i) {  // exp(scores - max) in place; red = 1 / sum
      const int64_t n = g.P.valid(i);
      T* row = w + i * Sp;
      if (n > 0) red[i - i0] = T(1) / vec::exp_sub_sum<T>(row, row, round_up(n, W), red[i - i0]);
    }
    for (int64_t i = i0; i < i1; ++i) {  // W = e / sum, W' = W * mask / (1 - p); zeros from n
      T* row = w + i * Sp;
      T* rd = wd ? wd + (i - r0) * Sp : nullptr;
      const uint8_t* kr = keep ? keep + i * S : nullptr;
      const int64_t n = g.P.valid(i), ext = g.ext(i);
      const V<T> inv(red[i - i0]);
      for (int64_t j = 0; j < ext; j += W) {
        const auto live = lanes_below<T>(n - j);
        const V<T> x = xsimd::select(live, V<T>::load_unaligned(row + j) * inv, zero);
        x.store_unaligned(row + j);
        if (rd) xsimd::select(live, x * keep_factors<T>(kr + j, vks), zero).store_unaligned(rd + j);
      }
    }
  }
}

// Softmax backward of the strip's rows [r0, r1), all in (L, Sp) buffers of the matrix: dp holds
// dW' = dO v^T on [0, n(i)) and becomes dS on [0, ext(i)) (null: dq, dk not wanted); with wd
// (dropout, dv wanted) also W' on [0, ext(i)).
template <class T>
void softmax_backward_strip(const Geometry<T>& g, const T* w, const uint8_t* keep, T* dp, T* wd, int64_t r0,
                            int64_t r1) {
  constexpr int64_t W = kW<T>;
  const int64_t Sp = g.Sp, S = g.P.S;
  const V<T> vks(g.keep_scale()), vscale(static_cast<T>(g.P.scale)), zero(T(0));
  T red[kPassRows];
  for (int64_t i0 = r0; i0 < r1; i0 += kPassRows) {
    const int64_t i1 = std::min(i0 + kPassRows, r1);
    if (dp)
      for (int64_t i = i0; i < i1; ++i) {  // red = rowsum(dW * W), dW = dW' * mask / (1 - p)
        const T* wr = w + i * Sp;
        const T* dr = dp + i * Sp;
        const uint8_t* kr = keep ? keep + i * S : nullptr;
        const int64_t n = g.P.valid(i);
        V<T> acc(T(0));
        for (int64_t j = 0; j < n; j += W) {
          V<T> d = V<T>::load_unaligned(dr + j);
          if (kr) d = d * keep_factors<T>(kr + j, vks);
          acc = xsimd::fma(xsimd::select(lanes_below<T>(n - j), d, zero), V<T>::load_unaligned(wr + j), acc);
        }
        red[i - i0] = xsimd::hadd(acc);
      }
    for (int64_t i = i0; i < i1; ++i) {  // dS = W * (dW - rowsum) * scale; W' = W * mask / (1 - p)
      const T* wr = w + i * Sp;
      T* dr = dp ? dp + i * Sp : nullptr;
      T* rd = wd ? wd + i * Sp : nullptr;
      const uint8_t* kr = keep ? keep + i * S : nullptr;
      const int64_t n = g.P.valid(i), ext = g.ext(i);
      const V<T> s(dp ? red[i - i0] : T(0));
      for (int64_t j = 0; j < ext; j += W) {
        const auto live = lanes_below<T>(n - j);
        const V<T> x = V<T>::load_unaligned(wr + j);
        const V<T> kf = kr ? keep_factors<T>(kr + j, vks) : V<T>(T(1));
        if (dr) {
          const V<T> d = V<T>::load_unaligned(dr + j) * kf;
          xsimd::select(live, x * (d - s) * vscale, zero).store_unaligned(dr + j);
        }
        if (rd) xsimd::select(live, x * kf, zero).store_unaligned(rd + j);
      }
    }
  }
}

// ---- one matrix, forward and backward

// Scratch (elements of T) forward_head needs: k^T slivers, padded v rows, a strip of W'.
template <class T>
int64_t forward_scratch(const Params& p) {
  const Geometry<T> g(p);
  return g.Sp * p.E + p.S * g.Evp + (p.dropout() ? std::min(p.block, p.L) * g.Sp : 0);
}

// out (L, Ev) = drop(softmax(q k^T * scale)) @ v for one matrix. w: (L, Sp) receiving W (the
// backward's), keep: the matrix's dropout mask (L, S) bytes, or null; scratch: forward_scratch.
template <class T>
void forward_head(const Params& p, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv,
                  T* out, int64_t ldo, T* w, const uint8_t* keep, T* scratch) {
  const Geometry<T> g(p);
  const int64_t Sp = g.Sp, E = p.E, Ev = p.Ev, Evp = g.Evp;
  T* kt = scratch;         // k^T slivers (E, kNR)
  T* vp = kt + Sp * E;     // v rows (S, Evp)
  T* wd = vp + p.S * Evp;  // the strip's W' (block, Sp) when dropping
  pack_transposed_slivers(k, ldk, p.S, E, kt);
  const auto [vb, ldvb] = b_rows(v, ldv, p.S, Ev, vp);
  auto kt_at = [&](int64_t j0) { return std::pair<const T*, int64_t>(kt + j0 * E, kNR<T>); };
  // (structured bindings are init-captured: clang 14, the fuzz build's compiler, cannot capture them)
  auto vp_at = [vb = vb, ldvb = ldvb](int64_t j0) { return std::pair<const T*, int64_t>(vb + j0, ldvb); };
  const T scale = static_cast<T>(p.scale);
  for (int64_t r0 = 0; r0 < p.L; r0 += p.block) {
    const int64_t r1 = std::min(r0 + p.block, p.L);
    for (int64_t i0 = r0; i0 < r1; i0 += g.tile) {  // P = scale * q k^T, up to each tile's last key
      const int64_t mr = std::min(g.tile, r1 - i0);
      row_panel<T, false>(mr, p.valid(i0 + mr - 1), E, q + i0 * ldq, ldq, kt_at, scale, w + i0 * Sp, Sp,
                          true);
    }
    softmax_strip(g, w, keep, keep ? wd : nullptr, r0, r1);
    for (int64_t i0 = r0; i0 < r1; i0 += g.tile) {  // out = W' v
      const int64_t mr = std::min(g.tile, r1 - i0);
      const T* a = keep ? wd + (i0 - r0) * Sp : w + i0 * Sp;
      row_panel<T, false>(mr, Ev, p.valid(i0 + mr - 1), a, Sp, vp_at, T(1), out + i0 * ldo, ldo, false);
    }
  }
}

// Scratch backward_head needs: v^T slivers, padded k, q, dO rows, dS and W' (L, Sp).
template <class T>
int64_t backward_scratch(const Params& p) {
  const Geometry<T> g(p);
  return g.Sp * p.Ev + p.S * g.Ep + p.L * g.Ep + p.L * g.Evp + 2 * p.L * g.Sp;
}

// The gradients of one matrix (dq, dk, dv null when not wanted; q, k, v null when not needed:
// k for dq, q for dk, v for dq and dk). See the top of the file for the formulas.
template <class T>
void backward_head(const Params& p, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv,
                   const T* dout, int64_t lddo, const T* w, const uint8_t* keep, T* dq, int64_t lddq, T* dk,
                   int64_t lddk, T* dv, int64_t lddv, T* scratch) {
  const Geometry<T> g(p);
  const int64_t L = p.L, S = p.S, Sp = g.Sp, E = p.E, Ev = p.Ev, Ep = g.Ep, Evp = g.Evp;
  const bool want_s = dq || dk, dropped = keep && dv;  // dv needs W' materialised
  T* vt = scratch;                                     // v^T slivers (Ev, kNR)
  T* kp = vt + Sp * Ev;                                // k rows (S, Ep)
  T* qp = kp + S * Ep;                                 // q rows (L, Ep)
  T* dop = qp + L * Ep;                                // dO rows (L, Evp)
  T* ds = dop + L * Evp;                               // dW', then dS (L, Sp)
  T* wd = ds + L * Sp;                                 // W' (L, Sp)
  if (want_s) pack_transposed_slivers(v, ldv, S, Ev, vt);
  const auto [kb, ldkb] = dq ? b_rows(k, ldk, S, E, kp) : std::pair<const T*, int64_t>();
  const auto [qb, ldqb] = dk ? b_rows(q, ldq, L, E, qp) : std::pair<const T*, int64_t>();
  const auto [dob, lddob] = dv ? b_rows(dout, lddo, L, Ev, dop) : std::pair<const T*, int64_t>();
  auto vt_at = [&](int64_t j0) { return std::pair<const T*, int64_t>(vt + j0 * Ev, kNR<T>); };
  auto kp_at = [kb = kb, ldkb = ldkb](int64_t j0) { return std::pair<const T*, int64_t>(kb + j0, ldkb); };
  for (int64_t r0 = 0; r0 < L; r0 += p.block) {
    const int64_t r1 = std::min(r0 + p.block, L);
    if (want_s)
      for (int64_t i0 = r0; i0 < r1; i0 += g.tile) {  // dW' = dO v^T
        const int64_t mr = std::min(g.tile, r1 - i0);
        row_panel<T, false>(mr, p.valid(i0 + mr - 1), Ev, dout + i0 * lddo, lddo, vt_at, T(1), ds + i0 * Sp,
                            Sp, true);
      }
    softmax_backward_strip(g, w, keep, want_s ? ds : nullptr, dropped ? wd : nullptr, r0, r1);
    if (dq)
      for (int64_t i0 = r0; i0 < r1; i0 += g.tile) {  // dq = dS k
        const int64_t mr = std::min(g.tile, r1 - i0);
        row_panel<T, false>(mr, E, p.valid(i0 + mr - 1), ds + i0 * Sp, Sp, kp_at, T(1), dq + i0 * lddq, lddq,
                            false);
      }
  }
  // dk = dS^T q, dv = W'^T dO, by tiles of columns [j0, j0 + mr): rows i < j0 see none of them
  const T* wv = dropped ? wd : w;
  for (int64_t j0 = 0; j0 < S; j0 += g.tile) {
    const int64_t mr = std::min(g.tile, S - j0), i0 = p.causal ? std::min(j0, L) : 0;
    auto qp_at = [qb = qb, ldqb = ldqb, i0](int64_t e0) {
      return std::pair<const T*, int64_t>(qb + i0 * ldqb + e0, ldqb);
    };
    auto dop_at = [dob = dob, lddob = lddob, i0](int64_t e0) {
      return std::pair<const T*, int64_t>(dob + i0 * lddob + e0, lddob);
    };
    if (dk)
      row_panel<T, true>(mr, E, L - i0, ds + i0 * Sp + j0, Sp, qp_at, T(1), dk + j0 * lddk, lddk, false);
    if (dv)
      row_panel<T, true>(mr, Ev, L - i0, wv + i0 * Sp + j0, Sp, dop_at, T(1), dv + j0 * lddv, lddv, false);
  }
}

}  // namespace xgrad::attention_kernel
