// core/src/kernels/attention_kernel.h (private): the kernel floor under attention.cpp. One
// (L, S) attention matrix -- one (batch, head) -- forward and backward, on one thread:
//
//   forward:  P = scale * q k^T + M;  W = softmax(P) (causal: keys j <= i);  W' = W * keep / (1 - p)
//             out = W' v
//   (M: the additive attn_mask, if any; a row whose every P is -inf gets W = 0)
//   backward: dW' = dO v^T;  dW = dW' * keep / (1 - p);  dS = W * (dW - rowsum(dW * W)) * scale
//             dq = dS k;  dk = dS^T q;  dv = W'^T dO
//
// The query rows run in blocks of R = min(block, W) rows, one row per lane of a vector of W
// (lanes past a block's last row are padding: zero queries, results never written). Every
// (rows, keys) intermediate of a block is kept transposed, as an (n, W) array whose row j holds
// key j of all the block's rows, n = n(last row) the keys its last row sees (causal: row i
// sees keys j < n(i) = min(i + 1, S)). So the softmax and its backward run down the columns,
// lane-wise, with no horizontal reduction; only the block's diagonal (keys past its first row)
// needs a lane mask; and the products are register tiles (`micro_tile`: per k, NV vectors of a
// B row loaded, MR values of A broadcast). Per block:
//   scores (rows, n) = scale * q_block @ k^T  (`rows_form`, then 16 x 16 transposes into lanes;
//                      head dim < 2 vectors: scores^T = k @ q_block^T straight into lanes)
//   out_block (rows, Ev) = (E'_block @ v) * inv  (`rows_form`, A read from the (n, W) array;
//                      head dim not whole vectors: out^T in lanes, transposed back)
// where E' = exp(scores - max) (dropped) and inv = 1 / its row sums: the softmax's division
// rides on the product tile's store, row by row, instead of a pass over the (n, W) array (W =
// E * inv is only formed when the backward keeps it). The backward (attention_backward.h) runs
// dW' = dO v^T and dq = dS k the same way, with k^T, v^T packed once per matrix. W is kept in
// the lane layout for the backward (every block's (n, W) array, one after the other:
// `Blocks`), and the backward keeps dS^T and W'^T so, then runs dk = dS^T q and dv = W'^T dO by
// tiles of keys over all the blocks that see them.
//
// A masked key (j > i) has W, W', dS exactly zero, so a product that runs over it adds exact
// zeros; every output element is one FMA chain in k order inside one tile on one thread, so the
// results do not depend on how the heads are split over threads.
#pragma once
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#if XSIMD_WITH_AVX512F
#include <immintrin.h>  // KeepLanes' gather
#endif

#include "gemm_kernel.h"  // transpose_16x16
#include "vec_math.h"     // exp_nonpositive

namespace xgrad::attention_kernel {

template <class T>
using V = xsimd::batch<T>;
template <class T>
inline constexpr int64_t kW = static_cast<int64_t>(V<T>::size);  // lanes per vector
#if XSIMD_WITH_AVX512F
inline constexpr int64_t kLaneTile = 16;  // accumulators of a (keys or columns, W) tile, of 32 registers
inline constexpr int64_t kRowAcc = 24;    // accumulators of a rows_form tile
#else
inline constexpr int64_t kLaneTile = 8;  // of 16
inline constexpr int64_t kRowAcc = 12;
#endif
inline constexpr int64_t kDefaultBlock = 16;  // query rows per block (at most W are used)

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
// rows per tile when n rows go in as few tiles of at most mr_max rows as possible, evened out
// (16 rows by 12: 8 + 8, not 12 + 4)
inline int64_t even_tiles(int64_t n, int64_t mr_max) {
  const int64_t tiles = std::max<int64_t>(1, (n + mr_max - 1) / mr_max);
  return (n + tiles - 1) / tiles;
}

// One attention matrix's sizes and options; p == 0: no dropout.
struct Params {
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;
  int64_t block = kDefaultBlock;  // query rows per block (>= 1)
  double p = 0.0;
  bool masked = false;  // an additive mask M is added to the scores (forward_head's mask)
  bool dropout() const { return p > 0.0; }
  int64_t valid(int64_t i) const { return causal ? std::min(i + 1, S) : S; }  // n(i)
};

// The query blocks of a matrix: block b holds rows [b R, b R + rows(b)), sees keys [0, keys(b)),
// and its (keys(b), W) array starts at offset(b) elements of every per-block buffer.
template <class T>
struct Blocks {
  Params P;
  int64_t R;
  explicit Blocks(const Params& p) : P(p), R(std::min(p.block, kW<T>)) {}
  int64_t count() const { return (P.L + R - 1) / R; }
  int64_t rows(int64_t b) const { return std::min(R, P.L - b * R); }
  int64_t keys(int64_t b) const { return P.valid(b * R + rows(b) - 1); }
  int64_t offset(int64_t b) const {
    int64_t off = 0;
    for (int64_t c = 0; c < b; ++c) off += keys(c) * kW<T>;
    return off;
  }
  int64_t total() const { return offset(count()); }  // elements of W's buffer
};

// Bytes a dropout mask needs past its L * S per matrix (KeepLanes reads up to 3 past a row).
template <class T>
int64_t keep_padding(const Params&) {
  return 64;
}

// ---- the register tile. C (MR x NV*W) = alpha * A (MR x kc) @ B (kc x NV*W): A(r, k) at
// a[k * lda + r] when TA (A stored transposed), else a[r * lda + k]; B's row k at b + k * ldb.
// Each element of C is one FMA chain in k order, then the product with alpha, or with ra[r] for
// row r when ra is given (a softmax's 1 / sum, row by row).
template <class T, int64_t MR, int64_t NV, bool TA>
inline void micro_tile(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha, T* c,
                       int64_t ldc, const T* ra = nullptr) {
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
  for (int64_t r = 0; r < MR; ++r) {
    const V<T> s = ra ? V<T>(ra[r]) : va;
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) (acc[r][v] * s).store_unaligned(c + r * ldc + v * W);
  }
}

// micro_tile with exactly mr rows (1 <= mr <= R)
template <class T, int64_t NV, bool TA, int64_t R>
inline void micro_tile_rows(int64_t mr, int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha,
                            T* c, int64_t ldc, const T* ra = nullptr) {
  if constexpr (R > 1) {
    if (mr < R) return micro_tile_rows<T, NV, TA, R - 1>(mr, kc, a, lda, b, ldb, alpha, c, ldc, ra);
  }
  micro_tile<T, R, NV, TA>(kc, a, lda, b, ldb, alpha, c, ldc, ra);
}

// ---- packing and products of a block

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

// lanes l < k of a batch (none for k <= 0)
template <class T>
inline auto lanes_below(int64_t k) {
  static_assert(kW<T> <= 16);
  alignas(64) static constexpr T kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return V<T>::load_aligned(kIota) < V<T>(static_cast<T>(std::min<int64_t>(k, 16)));
}

// The dropout mask of one block as lane masks: bit l of key j's mask is keep[l * S + j], row
// i0 + l's byte. Read from the (L, S) byte mask by gathers (and then optionally saved, two bytes
// a key, for the backward) or from such saved masks.
template <class T>
class KeepLanes {
 public:
  // keep: the block's first row of the mask (row stride S); rows: its rows (lanes past them
  // repeat the last row's bits). Reads up to 3 bytes past the last row's S (keep_padding).
  // save: null, or where the masks of keys 0, 1, ... go (up to 3 past the block's last key).
  KeepLanes(const uint8_t* keep, int64_t S, int64_t rows, uint8_t* save = nullptr)
      : keep_(keep), save_(save), S_(S), rows_(rows) {
#if XSIMD_WITH_AVX512F
    if constexpr (kW<T> == 16) {
      const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
      rowoff_ = _mm512_mullo_epi32(_mm512_min_epi32(lane, _mm512_set1_epi32(static_cast<int>(rows - 1))),
                                   _mm512_set1_epi32(static_cast<int>(S)));
    }
#endif
  }
  // the masks a forward saved (two bytes a key, from the block's key 0)
  static KeepLanes saved(const uint8_t* masks) {
    KeepLanes k(nullptr, 0, 1);
    k.saved_ = masks;
    return k;
  }
  // the masks of keys j .. j + 3
  void get4(int64_t j, uint32_t m[4]) const {
    uint16_t h[4];
    if (saved_) {
      std::memcpy(h, saved_ + 2 * j, sizeof(h));
      for (int t = 0; t < 4; ++t) m[t] = h[t];
      return;
    }
    gather4(j, m);
    if (save_) {
      for (int t = 0; t < 4; ++t) h[t] = static_cast<uint16_t>(m[t]);
      std::memcpy(save_ + 2 * j, h, sizeof(h));
    }
  }
  // keep_scale where the mask m has a lane's bit, else 0 (dropout()'s mask / (1 - p))
  static V<T> factors(uint32_t m, const V<T>& keep_scale) {
#if XSIMD_WITH_AVX512F
    if constexpr (sizeof(V<T>) == 64) {
      using BB = typename V<T>::batch_bool_type;
      return xsimd::select(BB(static_cast<typename BB::register_type>(m)), keep_scale, V<T>(T(0)));
    }
#endif
    alignas(64) T f[kW<T>];
    for (int64_t l = 0; l < kW<T>; ++l) f[l] = (m >> l) & 1 ? T(1) : T(0);
    return V<T>::load_aligned(f) * keep_scale;
  }

 private:
  void gather4(int64_t j, uint32_t m[4]) const {
#if XSIMD_WITH_AVX512F
    if constexpr (kW<T> == 16) {  // one gather: 4 bytes (keys j .. j + 3) of every row
      const __m512i g = _mm512_i32gather_epi32(rowoff_, keep_ + j, 1);
      for (int t = 0; t < 4; ++t) m[t] = _mm512_test_epi32_mask(g, _mm512_set1_epi32(0xFF << (8 * t)));
      return;
    }
#endif
    for (int t = 0; t < 4; ++t) {
      m[t] = 0;
      for (int64_t l = 0; l < kW<T>; ++l)
        m[t] |= static_cast<uint32_t>(keep_[std::min(l, rows_ - 1) * S_ + j + t] != 0) << l;
    }
  }

  const uint8_t* keep_;
  uint8_t* save_;
  const uint8_t* saved_ = nullptr;
  int64_t S_, rows_;
#if XSIMD_WITH_AVX512F
  __m512i rowoff_ = _mm512_setzero_si512();  // the lanes' row offsets l * S (int32: sdpa refuses
                                             // S > INT32_MAX / 15 with dropout)
#endif
};

// Bytes of the lane masks a forward saves per matrix (Blocks::total() / W keys, 2 bytes each,
// and the last get4's overrun).
template <class T>
int64_t lane_mask_bytes(const Params& p) {
  return 2 * (Blocks<T>(p).total() / kW<T> + 4);
}

// xt (m, W) = the transpose of the rows x (rows <= W rows of m values, row stride ldx): lane l
// of xt's row e is x[l * ldx + e]; lanes past rows are zeros (q's rows, dout's rows, and the
// scores' rows as the block's scores^T)
template <class T>
void pack_lanes(const T* x, int64_t ldx, int64_t rows, int64_t m, T* xt) {
  constexpr int64_t W = kW<T>;
  int64_t e0 = 0;  // columns below e0 done by 16 x 16 blocks
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, float> && W == 16)
    if (rows == W)
      for (; e0 + 16 <= m; e0 += 16) gemm_kernel::transpose_16x16(x + e0, ldx, xt + e0 * W, W);
#endif
  for (int64_t e = e0; e < m; ++e)
    for (int64_t l = 0; l < W; ++l) xt[e * W + l] = l < rows ? x[l * ldx + e] : T(0);
}

// y[l * ldy + e] = yt[e * W + l] for l < rows, e < m: (m, W) lanes back into rows
template <class T>
void unpack_lanes(const T* yt, int64_t rows, int64_t m, T* y, int64_t ldy) {
  constexpr int64_t W = kW<T>;
  int64_t e0 = 0;
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, float> && W == 16)
    if (rows == W)
      for (; e0 + 16 <= m; e0 += 16) gemm_kernel::transpose_16x16(yt + e0 * W, W, y + e0, ldy);
#endif
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t e = e0; e < m; ++e) y[l * ldy + e] = yt[e * W + l];
}

// xt (m, n), row stride ldt = the transpose of the rows x (n rows of m values, row stride ldx):
// k^T or v^T, once per matrix
template <class T>
void pack_transposed(const T* x, int64_t ldx, int64_t n, int64_t m, T* xt, int64_t ldt) {
  int64_t jb = 0, eb = 0;  // rows below jb and columns below eb done by 16 x 16 blocks
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, float>) {
    jb = n / 16 * 16;
    eb = m / 16 * 16;
    for (int64_t j = 0; j < jb; j += 16)
      for (int64_t e = 0; e < eb; e += 16)
        gemm_kernel::transpose_16x16(x + j * ldx + e, ldx, xt + e * ldt + j, ldt);
  }
#endif
  for (int64_t j = 0; j < n; ++j)
    for (int64_t e = j < jb ? eb : 0; e < m; ++e) xt[e * ldt + j] = x[j * ldx + e];
  for (int64_t e = 0; e < m; ++e) std::fill(xt + e * ldt + n, xt + (e + 1) * ldt, T(0));
}

// st (n, W) = alpha * xt^T (n, m) @ yt (m, W) for xt (m, n) with row stride ldt: a block's
// scores^T or dW'^T, by tiles of kLaneTile keys
template <class T>
void rows_product(int64_t n, int64_t m, const T* xt, int64_t ldt, const T* yt, T alpha, T* st) {
  for (int64_t j0 = 0; j0 < n; j0 += kLaneTile)
    micro_tile_rows<T, 1, true, kLaneTile>(std::min(kLaneTile, n - j0), m, xt + j0, ldt, yt, kW<T>, alpha,
                                           st + j0 * kW<T>, kW<T>);
}

// y (rows, m) = (a^T (m, kc) @ bt (kc, W))^T for the rows a (kc rows of m values, row stride
// lda) and a (kc, W) array bt: a block's out or dq rows, by tiles of kLaneTile columns through
// ct (kLaneTile, W); with ls (W values), row l of y also times ls[l]
template <class T>
void lanes_product(int64_t m, int64_t kc, const T* a, int64_t lda, const T* bt, T* ct, int64_t rows, T* y,
                   int64_t ldy, const T* ls = nullptr) {
  for (int64_t e0 = 0; e0 < m; e0 += kLaneTile) {
    const int64_t mr = std::min(kLaneTile, m - e0);
    micro_tile_rows<T, 1, true, kLaneTile>(mr, kc, a + e0, lda, bt, kW<T>, T(1), ct, kW<T>);
    if (ls)
      for (int64_t e = 0; e < mr; ++e)
        (V<T>::load_unaligned(ct + e * kW<T>) * V<T>::load_unaligned(ls)).store_unaligned(ct + e * kW<T>);
    unpack_lanes(ct, rows, mr, y + e0, ldy);
  }
}

// C (rows, n) = alpha * A (rows, kc) @ B (kc, n): A(r, k) at a[k * lda + r] when TA, else
// a[r * lda + k]; B's row k at b + k * ldb, read in whole vectors (to n rounded up to W); C's
// row r at c + r * ldc, written in whole vectors. By tiles of NV = 4, 2 or 1 vectors of columns
// (as many as the columns fill) and kRowAcc / NV rows: a block's scores or dW' in rows, its out
// or dq rows. With ra, row r times ra[r] instead of alpha.
template <class T, bool TA>
void rows_form(int64_t rows, int64_t n, int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha,
               T* c, int64_t ldc, const T* ra = nullptr) {
  constexpr int64_t W = kW<T>, R4 = kRowAcc / 4, R2 = kRowAcc / 2, R1 = std::min<int64_t>(kRowAcc, 16);
  for (int64_t j0 = 0; j0 < n;) {
    const int64_t left = (n - j0 + W - 1) / W;  // vectors
    const int64_t nv = left >= 4 ? 4 : left >= 2 ? 2 : 1, mr_max = nv == 4 ? R4 : nv == 2 ? R2 : R1;
    const int64_t step = even_tiles(rows, mr_max);
    for (int64_t r0 = 0; r0 < rows; r0 += step) {
      const int64_t mr = std::min(step, rows - r0);
      const T* ar = a + (TA ? r0 : r0 * lda);
      T* cr = c + r0 * ldc + j0;
      const T* rr = ra ? ra + r0 : nullptr;
      if (nv == 4) micro_tile_rows<T, 4, TA, R4>(mr, kc, ar, lda, b + j0, ldb, alpha, cr, ldc, rr);
      else if (nv == 2) micro_tile_rows<T, 2, TA, R2>(mr, kc, ar, lda, b + j0, ldb, alpha, cr, ldc, rr);
      else micro_tile_rows<T, 1, TA, R1>(mr, kc, ar, lda, b + j0, ldb, alpha, cr, ldc, rr);
    }
    j0 += nv * W;
  }
}

// The softmax down the columns of a block's scores^T st (n, W) (block's first row i0), but for
// its division: st becomes E = exp(s - max), zeros where a row does not see the key, and inv
// (W values) 1 / the column sums, so that W = E * inv (scale_lanes) and out = (E v) * inv row
// by row; with keep also E' = E * mask / (1 - p) into wd (n, W), out = (E' v) * inv, and then
// with normalize st scaled into W in the same pass.
template <class T>
void softmax_lanes(const Params& p, int64_t i0, int64_t n, T* st, const KeepLanes<T>* keep, T* wd, T* inv,
                   bool normalize) {
  constexpr int64_t W = kW<T>;
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t diag = p.causal ? i0 + 1 : n;  // keys from here on: lanes l < j - i0 masked
  auto score = [&](int64_t j) {                // masked lanes -inf
    const V<T> x = V<T>::load_unaligned(st + j * W);
    return j < diag ? x : xsimd::select(lanes_below<T>(j - i0), V<T>(ninf), x);
  };
  V<T> m0(ninf), m1(ninf), m2(ninf), m3(ninf);  // the max, in four chains
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    m0 = xsimd::max(m0, score(j));
    m1 = xsimd::max(m1, score(j + 1));
    m2 = xsimd::max(m2, score(j + 2));
    m3 = xsimd::max(m3, score(j + 3));
  }
  for (; j < n; ++j) m0 = xsimd::max(m0, score(j));
  const V<T> top = xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3));
  // masked: a row whose every score is -inf gets weights exactly 0 (exp(-inf - 0) = 0, and
  // inv = 0 below), not NaN from -inf - -inf (torch 2.5's _safe_softmax)
  const V<T> mx = p.masked ? xsimd::select(top == V<T>(ninf), V<T>(T(0)), top) : top;
  // e = exp(s - max) stored, zeros where masked. exp_nonpositive (float: exp_clamped's
  // polynomial) gives exactly 0 below -80, so a -inf score weighs exactly 0, and keeps NaN: a
  // NaN score (which the max may skip) makes its row's sum, and so the whole row, NaN, as
  // torch's softmax does. (Masked lanes may be positive: clamped, then zeroed.)
  auto exp_at = [&](int64_t j) {
    V<T> e = vec::exp_nonpositive<T>(V<T>::load_unaligned(st + j * W) - mx);
    if (j >= diag) e = xsimd::select(lanes_below<T>(j - i0), V<T>(T(0)), e);
    e.store_unaligned(st + j * W);
    return e;
  };
  V<T> s0(T(0)), s1(T(0));  // the sum, in two chains
  for (j = 0; j + 2 <= n; j += 2) {
    s0 += exp_at(j);
    s1 += exp_at(j + 1);
  }
  if (j < n) s0 += exp_at(j);
  V<T> vinv = n > 0 ? V<T>(T(1)) / (s0 + s1) : V<T>(T(0));  // no keys: out is zeros, as torch
  if (p.masked) vinv = xsimd::select((s0 + s1) == V<T>(T(0)), V<T>(T(0)), vinv);
  vinv.store_unaligned(inv);
  if (!keep) return;
  const V<T> vks(p.p < 1.0 ? T(1) / static_cast<T>(1.0 - p.p) : T(0));  // as dropout()
  for (int64_t j0 = 0; j0 < n; j0 += 4) {
    uint32_t m[4];
    keep->get4(j0, m);
    for (int64_t j = j0; j < std::min(j0 + 4, n); ++j) {
      const V<T> e = V<T>::load_unaligned(st + j * W);
      (e * KeepLanes<T>::factors(m[j - j0], vks)).store_unaligned(wd + j * W);
      if (normalize) (e * vinv).store_unaligned(st + j * W);
    }
  }
}

// st (n, W) times inv (W values) lane by lane, in place: E into W
template <class T>
void scale_lanes(int64_t n, T* st, const T* inv) {
  const V<T> x = V<T>::load_unaligned(inv);
  for (int64_t j = 0; j < n; ++j) (V<T>::load_unaligned(st + j * kW<T>) * x).store_unaligned(st + j * kW<T>);
}

// ---- one matrix, forward (the backward: attention_backward.h)

// Scratch (elements of T) forward_head needs: q_block^T, scores^T, W'^T, an out^T tile, k^T,
// the scores in rows, and with a mask its block in lanes.
template <class T>
int64_t forward_scratch(const Params& p) {
  return (round_up(p.E, 16) + (p.masked ? 4 : 3) * round_up(p.S, 16) + kLaneTile) * kW<T> +
         p.E * round_up(p.S, 16);
}

// st (n, W) += the mask rows m (rows rows of n values, row stride ldm, 0 for a mask broadcast
// over the queries) in lanes, through mt (n, W): scale * q k^T + M
template <class T>
void add_mask_lanes(const T* m, int64_t ldm, int64_t rows, int64_t n, T* mt, T* st) {
  pack_lanes(m, ldm, rows, n, mt);
  for (int64_t j = 0; j < n; ++j)
    (V<T>::load_unaligned(st + j * kW<T>) + V<T>::load_unaligned(mt + j * kW<T>))
        .store_unaligned(st + j * kW<T>);
}

// out (L, Ev) = drop(softmax(q k^T * scale + M)) @ v for one matrix. mask: M's (L, S) rows
// (row stride ldm, may be 0), null when !p.masked; w: null, or Blocks::total() elements
// receiving W (the backward's); keep: the matrix's dropout mask (L, S) bytes, or null; lanes:
// null, or lane_mask_bytes receiving keep as the backward reads it; scratch: forward_scratch.
template <class T>
void forward_head(const Params& p, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv,
                  const T* mask, int64_t ldm, T* out, int64_t ldo, T* w, const uint8_t* keep, uint8_t* lanes,
                  T* scratch) {
  constexpr int64_t W = kW<T>;
  const Blocks<T> bl(p);
  T* qt = scratch;                     // q_block^T (E, W)
  T* st = qt + round_up(p.E, 16) * W;  // scores^T, then W^T (n, W), when w is null
  T* wd = st + round_up(p.S, 16) * W;  // W'^T (n, W) when dropping
  T* ot = wd + round_up(p.S, 16) * W;  // an out^T tile (kLaneTile, W)
  const int64_t Sq = round_up(p.S, 16);
  T* kt = ot + kLaneTile * W;  // k^T (E, Sq)
  T* sr = kt + p.E * Sq;       // the block's scores in rows (W, Sq)
  T* mt = sr + W * Sq;         // the block's mask in lanes (n, W), when masked
  pack_transposed(k, ldk, p.S, p.E, kt, Sq);
  for (int64_t b = 0, off = 0; b < bl.count(); ++b) {
    const int64_t i0 = b * bl.R, rows = bl.rows(b), n = bl.keys(b);
    T* sb = w ? w + off : st;
    if (p.E >= 2 * W) {  // scores^T = scale * k q^T
      rows_form<T, false>(rows, n, p.E, q + i0 * ldq, ldq, kt, Sq, static_cast<T>(p.scale), sr, Sq);
      pack_lanes(sr, Sq, rows, n, sb);
    } else {
      pack_lanes(q + i0 * ldq, ldq, rows, p.E, qt);
      rows_product(n, p.E, kt, Sq, qt, static_cast<T>(p.scale), sb);
    }
    if (mask) add_mask_lanes(mask + i0 * ldm, ldm, rows, n, mt, sb);
    const KeepLanes<T> kl(keep ? keep + i0 * p.S : nullptr, p.S, rows, lanes ? lanes + 2 * off / W : nullptr);
    alignas(64) T inv[kW<T>];
    softmax_lanes(p, i0, n, sb, keep ? &kl : nullptr, wd, inv, w != nullptr);
    if (p.Ev % W == 0)  // out = W' v = (E' v) * inv
      rows_form<T, true>(rows, p.Ev, n, keep ? wd : sb, W, v, ldv, T(1), out + i0 * ldo, ldo, inv);
    else lanes_product(p.Ev, n, v, ldv, keep ? wd : sb, ot, rows, out + i0 * ldo, ldo, inv);
    if (w && !keep) scale_lanes(n, sb, inv);  // W for the backward
    off += n * W;
  }
}

}  // namespace xgrad::attention_kernel
