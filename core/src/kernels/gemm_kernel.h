// core/src/kernels/gemm_kernel.h (private): xgrad's own GEMM, the kernel floor under blas.cpp.
//
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C        (row-major, any lds)
//   C (m, n) = (alpha * op(A) (m, k) @ op(B) (k, n)) + bias (n)        (with a bias: linear)
//
// Blocked as BLIS/GotoBLAS do, for row-major C: a register-tile micro-kernel computes a
// kMR x kNR block of C; per k it loads kNV vectors of a B sliver (kNR columns), broadcasts
// kMR values of an A tile and issues kMR * kNV FMAs. k runs in panels of kKC, columns in
// panels of kNC (the B panel stays in L2 while an A tile sits in L1). Operands are read in
// place where their layout already suits the kernel, and packed where it does not:
//   B: packed per panel into kNR-wide slivers (a thread packs those its blocks read) when
//     stored (n, k) (trans_b, the linear layer's weight and attention's K: 16 x 16 blocks
//     transposed in registers), when C has many rows to repay the copy, or when B's rows are
//     far apart; else (k, n) row-major slivers are read in place (stride ldb), a partial one
//     packed.
//   A: tiles read in place, (m, k) row-major or stored (k, m) (trans_a, the weight
//     gradient's dY^T), the latter packed into (kc, kMR) per tile when its rows are far apart,
//     for up to kPackATiles row tiles of a thread at once.
//     The last row tile runs a micro-kernel of exactly its rows (no padding rows computed).
//   One row tile against a transposed B (a generated token's linear) packs B sliver by sliver
//     into L1 instead (gemm_one_tile_bt): the weights are read once, nothing is written back.
// Threads split the blocks of C (row tile x sliver), never k; a thread runs all k panels of
// its blocks, so threads meet once per column panel (twice for a large one, whose B the
// threads pack together first, every k panel at once, instead of each packing all of it).
// Beside the weight gradient dW = dY^T X, the GEMM can also sum op(A)'s rows (the bias
// gradient, dY's column sums) from A's packed copy, in double in k order.
//
// Same bits at any thread count, by construction: every element of C is
//   c = beta * c + alpha * (sum over the first kKC k, one FMA chain in k order)
//   c = c + alpha * (sum over the next kKC k, ...)                 ... for each k panel
// computed by the same instructions in every tile, whether its operands were packed or not,
// whatever the tile's row count. A tile of fewer than kNR columns reads a zero-padded B
// sliver; its C block goes through a scratch tile with the same epilogue.
// The panel sizes are constants, so neither the thread count nor a tile's position changes
// any element's order of operations.
//
// SIMD: xsimd::batch<T> of the build's architecture (-march): AVX-512 uses 14 x 2 vector
// accumulators (28 of 32 registers), AVX2/SSE a 6 x 2 tile (12 of 16).
#pragma once
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace xgrad::gemm_kernel {

template <class T, int64_t NV = 2>
struct Tile {
  using V = xsimd::batch<T>;
  static constexpr int64_t kW = static_cast<int64_t>(V::size);  // lanes per vector
  static constexpr int64_t kNV = NV;                            // vectors per row of the tile
  static constexpr int64_t kNR = kNV * kW;                      // tile columns
#if XSIMD_WITH_AVX512F
  static constexpr int64_t kMR = 14;  // tile rows: 28 accumulators + 2 B vectors + 1 broadcast
#else
  static constexpr int64_t kMR = 6;  // 12 accumulators of 16 registers
#endif
  static constexpr int64_t kKC = 256;                           // k panel
  static constexpr int64_t kNC = 3072 / sizeof(T) / kNR * kNR;  // column panel
};

// Packing thresholds, set on the GPT's layer shapes (one thread). A row-major B is packed
// from kPackBRows rows of C, or when its rows lie kPackBLd or more elements apart (a sliver's
// rows would be that far apart in memory, a TLB page or more per few rows); below, the copy
// costs more than it saves (the weight gradient's few rows against a long k). An A stored
// transposed (the weight gradient's dY^T) is packed when its rows are kPackALd or more
// elements apart; nearer, the tiles share its cache lines and read it in place as fast.
inline constexpr int64_t kPackBRows = 512;
inline constexpr int64_t kPackBLd = 384;
inline constexpr int64_t kPackALd = 384;
inline constexpr int64_t kPackALdSums = 192;  // ... or from 192 when its row sums are wanted too
inline constexpr int64_t kPackATiles = 64;    // row tiles per A^T panel (896 rows: 896 KB, in L2)

// A threaded GEMM's column panel of at least this many flops packs B once, split over the
// threads, before its blocks run (below, each thread packs the slivers its blocks read).
inline constexpr double kSharedPackFlops = 1e8;
inline constexpr int64_t kSharedPackMax = int64_t(1) << 22;  // elements (16 MB of float): else per thread

// A 64-byte aligned scratch buffer per thread and slot, grown on demand.
template <class T, int Slot>
T* scratch(int64_t n) {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<T, Free> buf;
  thread_local int64_t cap = 0;
  if (n > cap) {
    const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(T) + 63) / 64 * 64;
    buf.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    if (!buf)
      throw OutOfMemory("gemm: out of memory allocating " + std::to_string(bytes) + " bytes of scratch");
    cap = n;
  }
  return buf.get();
}

// op(X) element (i, j) of a stored row-major matrix with leading dim ld.
template <class T>
inline const T* at(const T* x, bool trans, int64_t ld, int64_t i, int64_t j) {
  return trans ? x + j * ld + i : x + i * ld + j;
}

#if XSIMD_WITH_AVX512F
// out[l * ldo + i] = in[i * ldi + l] for i, l < 16: a 16 x 16 float block transposed in
// registers (interleave pairs, then quads, then 128-bit lanes twice). GCC 12's intrinsics
// start from _mm512_undefined_ps, which -Wuninitialized reports once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
inline void transpose_16x16(const float* in, int64_t ldi, float* out, int64_t ldo) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * ldi);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  auto lo = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  auto hi = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = lo(t[i], t[i + 2]);
    r[i + 1] = hi(t[i], t[i + 2]);
    r[i + 2] = lo(t[i + 1], t[i + 3]);
    r[i + 3] = hi(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 16
  for (int h = 0; h < 16; h += 8)
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
#pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
#pragma GCC unroll 16
  for (int l = 0; l < 16; ++l) _mm512_storeu_ps(out + l * ldo, r[l]);
}
#pragma GCC diagnostic pop
#endif

// Packs op(B)[k0 .. k0+kc, j0 .. j0+nr) into a (kc, NR) sliver, zero-padded beyond nr.
template <class T, int64_t NR>
void pack_b(const T* b, bool tb, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nr, T* out) {
  if (nr < NR) std::fill(out, out + kc * NR, T(0));
  if (!tb) {       // rows of B are contiguous
    if (nr == NR)  // a copy of constant size: a few vector moves
      for (int64_t k = 0; k < kc; ++k)
        std::memcpy(out + k * NR, at(b, false, ldb, k0 + k, j0), sizeof(T) * NR);
    else
      for (int64_t k = 0; k < kc; ++k)
        std::memcpy(out + k * NR, at(b, false, ldb, k0 + k, j0), sizeof(T) * nr);
  } else {           // B stored (n, k): column j of op(B) is row j of the storage
    int64_t kv = 0;  // k below kv done by whole 16 x 16 blocks (float, AVX-512)
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {
      kv = nr == NR ? kc / 16 * 16 : 0;
      for (int64_t jb = 0; jb < NR && kv > 0; jb += 16)
        for (int64_t kb = 0; kb < kv; kb += 16)
          transpose_16x16(at(b, true, ldb, k0 + kb, j0 + jb), ldb, out + kb * NR + jb, NR);
    }
#endif
    for (int64_t j = 0; j < nr; ++j) {
      const T* src = at(b, true, ldb, k0, j0 + j);
      for (int64_t k = kv; k < kc; ++k) out[k * NR + j] = src[k];
    }
  }
}

// pack_b for the slivers [s0, s1) of a row-major B's column panel from j0 (nc columns), row by
// row: B's rows are read once each, in order (sliver by sliver would stride through each
// k panel's rows once per sliver, a few cache lines of each row at a time).
template <class T, int64_t NR>
void pack_b_rows(const T* b, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t s0,
                 int64_t s1, T* out) {
  const int64_t sw = std::min(s1, nc / NR);  // whole slivers below sw
  for (int64_t k = 0; k < kc; ++k) {
    const T* row = b + (k0 + k) * ldb + j0;
    for (int64_t s = s0; s < sw; ++s) std::memcpy(out + s * kc * NR + k * NR, row + s * NR, sizeof(T) * NR);
  }
  for (int64_t s = std::max(s0, sw); s < s1; ++s)  // the partial last sliver, zero-padded
    pack_b<T, NR>(b, false, ldb, k0, kc, j0 + s * NR, std::min(NR, nc - s * NR), out + s * kc * NR);
}

// Packs op(A)[i0 .. i0+mr, k0 .. k0+kc) into (kc, kMR): A stored (k, m) (ta) gives a
// contiguous run of mr values per k, one copy each; the kernel reads only rows r < mr.
template <class T>
void pack_a(const T* a, bool ta, int64_t lda, int64_t i0, int64_t mr, int64_t k0, int64_t kc, T* out) {
  constexpr int64_t MR = Tile<T>::kMR;
  if (ta) {
    if (mr == MR)  // a copy of constant size: a few vector moves
      for (int64_t k = 0; k < kc; ++k) std::memcpy(out + k * MR, a + (k0 + k) * lda + i0, sizeof(T) * MR);
    else
      for (int64_t k = 0; k < kc; ++k) std::memcpy(out + k * MR, a + (k0 + k) * lda + i0, sizeof(T) * mr);
    return;
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t r = 0; r < mr; ++r) out[k * MR + r] = a[(i0 + r) * lda + k0 + k];
}

// sums[r] += p[k * kMR + r] in double for r < mr, k < kn in order: the row sums of a packed
// A tile (op(A)'s rows; with AVX-512, 14 floats a k in two registers of 8 and 6 doubles: the
// masked 256-bit loads need AVX512VL).
template <class T>
void add_rows_f64(const T* p, int64_t kn, int64_t mr, double* sums) {
  constexpr int64_t MR = Tile<T>::kMR;
#if XSIMD_WITH_AVX512F && defined(__AVX512VL__)
  if constexpr (std::is_same_v<T, float> && MR == 14) {
    const __mmask8 m0 = static_cast<__mmask8>(mr >= 8 ? 0xff : (1u << mr) - 1),
                   m1 = static_cast<__mmask8>(mr <= 8 ? 0 : (1u << (mr - 8)) - 1);
    __m512d s0 = _mm512_maskz_loadu_pd(m0, sums), s1 = _mm512_maskz_loadu_pd(m1, sums + 8);
    for (int64_t k = 0; k < kn; ++k) {
      s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m0, p + k * MR)));
      s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m1, p + k * MR + 8)));
    }
    _mm512_mask_storeu_pd(sums, m0, s0);
    _mm512_mask_storeu_pd(sums + 8, m1, s1);
    return;
  }
#endif
  for (int64_t k = 0; k < kn; ++k)
    for (int64_t r = 0; r < mr; ++r) sums[r] += static_cast<double>(p[k * MR + r]);
}

// op(A)'s element (r, k) of a tile whose top-left is at a: A stored (m, k), or (k, m) when ta.
template <class T, bool TA>
inline T a_at(const T* a, int64_t lda, int64_t r, int64_t k) {
  return TA ? a[k * lda + r] : a[r * lda + k];
}

// The register tile of MR rows (kMR for whole tiles, fewer for the last row tile):
// acc = A tile (MR x kc; A(r, k) = a_at) @ B sliver (kc x kNR, row k at b + k * ldb), then
// the epilogue on an MR x kNR block of C (row stride ldc):
//   first k panel: c = beta * c + alpha * acc (just alpha * acc with a bias)
//   later panels:  c = c + alpha * acc
//   last panel, with a bias: then c = c + bias[j], as matmul(...) + bias would
// An element's chain of operations does not depend on MR (nor on NV): one FMA per k, in order.
template <class T, int64_t NV, bool TA, int64_t MR>
inline void micro_kernel(int64_t kc, const T* a, int64_t lda, const T* b, int64_t ldb, T alpha, T beta,
                         const T* bias, bool first, bool last, T* c, int64_t ldc) {
  using V = typename Tile<T, NV>::V;
  constexpr int64_t W = Tile<T, NV>::kW;
  // the k loop is unrolled by 4 (every accumulator's FMAs stay in k order): fewer loop
  // branches per FMA, the most at a small kc such as the tiny model's K = 64
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = V(T(0));
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    V bv[NV];
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) bv[v] = V::load_unaligned(b + v * W);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {
      const V ar(a_at<T, TA>(a, lda, r, k));  // broadcast A(r, k)
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(ar, bv[v], acc[r][v]);
    }
    b += ldb;
  }
  // the epilogue: its case is chosen once per tile, then each case is straight-line code (a
  // test per vector makes GCC reload alpha and spill accumulators); every case computes each
  // element as c = f(c, alpha * acc) [+ bias]
  if (alpha != T(1)) {
    const V va(alpha);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) acc[r][v] = va * acc[r][v];
  }
  V vbias[NV];
#pragma GCC unroll 4
  for (int64_t v = 0; v < NV; ++v) vbias[v] = bias && last ? V::load_unaligned(bias + v * W) : V(T(0));
  // kC: 0 C is not read (BLAS: not when beta is 0; nor with a bias), 1 c + s, 2 beta * c + s
  auto finish = [&](auto kC, auto kBias) {
    const V vb(beta);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) {
        T* p = c + r * ldc + v * W;
        V out;
        if constexpr (kC() == 0) out = acc[r][v];
        else if constexpr (kC() == 1) out = V::load_unaligned(p) + acc[r][v];
        else out = vb * V::load_unaligned(p) + acc[r][v];
        if constexpr (kBias()) out = out + vbias[v];
        out.store_unaligned(p);
      }
  };
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  const bool add_bias = bias && last;
  if (!first) add_bias ? finish(One{}, std::true_type{}) : finish(One{}, std::false_type{});
  else if (beta == T(0) || bias)
    add_bias ? finish(Zero{}, std::true_type{}) : finish(Zero{}, std::false_type{});
  else finish(Two{}, std::false_type{});
}

// micro_kernel with exactly mr rows (1 <= mr <= R): the last row tile computes no padding.
template <class T, int64_t NV, bool TA, int64_t R = Tile<T, NV>::kMR, class... Args>
inline void micro_kernel_rows(int64_t mr, Args... args) {
  if constexpr (R > 1) {
    if (mr < R) return micro_kernel_rows<T, NV, TA, R - 1>(mr, args...);
  }
  micro_kernel<T, NV, TA, R>(args...);
}

// One C block of mr x nr (at most kMR x kNR): A tile a, A(r, k) at a[k * lda + r] when ta
// (stored transposed, or packed with lda = kMR), else a[r * lda + k]; B sliver b with row
// stride ldb. A block with fewer than kNR columns goes through a scratch tile holding C's
// valid part, with the same epilogue.
template <class T, int64_t NV>
inline void tile(int64_t kc, const T* a, bool ta, int64_t lda, const T* b, int64_t ldb, T alpha, T beta,
                 const T* bias, bool first, bool last, T* c, int64_t ldc, int64_t mr, int64_t nr) {
  constexpr int64_t MR = Tile<T, NV>::kMR, NR = Tile<T, NV>::kNR;
  auto run = [&](T* cc, int64_t ldcc) {
    if (ta) micro_kernel_rows<T, NV, true>(mr, kc, a, lda, b, ldb, alpha, beta, bias, first, last, cc, ldcc);
    else micro_kernel_rows<T, NV, false>(mr, kc, a, lda, b, ldb, alpha, beta, bias, first, last, cc, ldcc);
  };
  if (nr == NR) {
    run(c, ldc);
    return;
  }
  alignas(64) T ct[MR * NR];
  alignas(64) T bt[NR] = {};
  if (!first || (beta != T(0) && !bias))
    for (int64_t r = 0; r < mr; ++r) std::copy(c + r * ldc, c + r * ldc + nr, ct + r * NR);
  if (bias) {  // the sliver's nr values, zero-padded
    std::copy(bias, bias + nr, bt);
    bias = bt;
  }
  run(ct, NR);
  for (int64_t r = 0; r < mr; ++r) std::copy(ct + r * NR, ct + r * NR + nr, c + r * ldc);
}

// One row tile of C (m <= kMR) against a B stored (n, k): the linear layer of a generated
// token (y = x W^T with one row x), a memory-bound product that reads each weight once.
// Packing B's whole panel first (as gemm_nv does, to share it between row tiles) would write
// every weight to a scratch panel and read it back; with one row tile nothing is shared, so
// each sliver is packed into a small scratch (it stays in L1) right before its tile uses it,
// sliver by sliver along k. The tiles, their FMA chains and epilogues are gemm_nv's, so the
// product has the same bits as there (and as the same row inside a bigger product); threads
// split the slivers.
template <class T, int64_t NV>
void gemm_one_tile_bt(int64_t m, int64_t n, int64_t k, T alpha, const T* a, bool ta, int64_t lda, const T* b,
                      int64_t ldb, T beta, const T* bias, T* c, int64_t ldc, bool threaded) {
  using L = Tile<T, NV>;
  constexpr int64_t NR = L::kNR, KC = L::kKC;
  const int64_t nt = (n + NR - 1) / NR;
  auto slivers = [&](int64_t s0, int64_t s1) {
    T* bs = scratch<T, 2>(KC * NR);
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t j0 = s * NR, nr = std::min(NR, n - j0);
      for (int64_t k0 = 0; k0 < k; k0 += KC) {
        const int64_t kc = std::min(KC, k - k0);
        pack_b<T, NR>(b, true, ldb, k0, kc, j0, nr, bs);
        tile<T, NV>(kc, at(a, ta, lda, 0, k0), ta, lda, bs, NR, alpha, beta, bias ? bias + j0 : nullptr,
                    k0 == 0, k0 + kc == k, c + j0, ldc, m, nr);
      }
    }
  };
  if (threaded) parallel_for(0, nt, 1, slivers);
  else slivers(0, nt);
}

// The whole product with a tile NV vectors wide; threaded splits tiles over xgrad's pool
// (never k).
// The row tiles [g0, g1) of an A stored transposed, k panel [k0, k0 + kc), packed (kc, MR)
// per tile into apanel, 16 rows of A^T at a time along their length (tile by tile would read
// a line per row and tile); with sums, a tile whose first block t * nt is in the thread's
// blocks [u0, u1) also adds its rows' sums, from the copy, into sums + (t - g0) * MR.
template <class T, int64_t MR>
void pack_a_tiles(const T* a, int64_t lda, int64_t m, int64_t k0, int64_t kc, int64_t g0, int64_t g1,
                  T* apanel, double* sums, int64_t u0, int64_t u1, int64_t nt) {
  for (int64_t kb = 0; kb < kc; kb += 16)
    for (int64_t t = g0; t < g1; ++t) {
      const int64_t mr = std::min(MR, m - t * MR), kn = std::min<int64_t>(16, kc - kb);
      T* dst = apanel + (t - g0) * kc * MR + kb * MR;
      pack_a(a, true, lda, t * MR, mr, k0 + kb, kn, dst);
      if (sums && u0 <= t * nt && t * nt < u1) add_rows_f64(dst, kn, mr, sums + (t - g0) * MR);
    }
}

// B's column panel [j0, j0 + nc) packed into dst by all threads at once, every k panel (of KC)
// at once: k panel k0's slivers from dst + k0 * nt * NR, nt = the panel's slivers.
template <class T, int64_t NR, int64_t KC>
void pack_b_shared(const T* b, bool tb, int64_t ldb, int64_t k, int64_t j0, int64_t nc, T* dst_all) {
  const int64_t nt = (nc + NR - 1) / NR, kp = (k + KC - 1) / KC;
  parallel_for(0, kp * nt, 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1;) {
      const int64_t k0 = q / nt * KC, kc = std::min(KC, k - k0), s0 = q % nt,
                    s1 = std::min(nt, s0 + (q1 - q));  // slivers [s0, s1) of this k panel
      T* dst = dst_all + k0 * nt * NR;
      if (!tb) pack_b_rows<T, NR>(b, ldb, k0, kc, j0, nc, s0, s1, dst);
      else
        for (int64_t sl = s0; sl < s1; ++sl)
          pack_b<T, NR>(b, true, ldb, k0, kc, j0 + sl * NR, std::min(NR, nc - sl * NR), dst + sl * kc * NR);
      q += s1 - s0;
    }
  });
}

// The row sums of op(A) that a thread accumulated (in double) for row tiles [g0, g1) into
// a_sums, for the tiles whose first block u0 <= t * nt < u1 is that thread's.
template <class T, int64_t MR>
void store_row_sums(const double* sums, int64_t g0, int64_t g1, int64_t u0, int64_t u1, int64_t nt, int64_t m,
                    T* a_sums) {
  for (int64_t t = g0; t < g1; ++t)
    if (u0 <= t * nt && t * nt < u1)
      for (int64_t r = 0; r < std::min(MR, m - t * MR); ++r) a_sums[t * MR + r] = T(sums[(t - g0) * MR + r]);
}

// With threads, each thread's blocks read (nearly) every sliver of a column panel: rather than
// each packing all of B, the threads first split its packing, every k panel at once, into one
// panel they share (k panel k0's slivers from k0 * nt * kNR), then meet; worth the extra
// meeting from kSharedPackFlops in the panel (the small and medium GPT's GEMMs). Returns that
// panel, or nullptr below the threshold (each thread then packs its own slivers).
template <class T, int64_t NR, int64_t KC>
T* shared_b_panel(const T* b, bool tb, int64_t ldb, int64_t m, int64_t k, int64_t j0, int64_t nc,
                  int64_t nt) {
  if (2.0 * double(m) * double(nc) * double(k) < kSharedPackFlops || k * nt * NR > kSharedPackMax)
    return nullptr;
  T* bshared = scratch<T, 4>(k * nt * NR);
  pack_b_shared<T, NR, KC>(b, tb, ldb, k, j0, nc, bshared);
  return bshared;
}

// With a_sums, also a_sums[i] = the sum over k of op(A)(i, k) when A is packed transposed
// (returns true; else false and a_sums is not written).
template <class T, int64_t NV>
bool gemm_nv(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
             int64_t ldb, T beta, const T* bias, T* c, int64_t ldc, bool threaded, T* a_sums) {
  using L = Tile<T, NV>;
  constexpr int64_t MR = L::kMR, NR = L::kNR, KC = L::kKC, NC = L::kNC;
  if (tb && m <= MR) {
    gemm_one_tile_bt<T, NV>(m, n, k, alpha, a, ta, lda, b, ldb, beta, bias, c, ldc, threaded);
    return false;
  }
  const int64_t mt = (m + MR - 1) / MR;
  const bool pack_at = ta && (lda >= kPackALd || (a_sums && lda >= kPackALdSums));
  for (int64_t j0 = 0; j0 < n; j0 += NC) {
    const int64_t nc = std::min(NC, n - j0), nt = (nc + NR - 1) / NR;
    // B slivers: packed when B is stored transposed, or when enough row tiles reuse them to
    // repay the copy; else read in place (row stride ldb), but for a partial last sliver,
    // which is always packed (zero-padded)
    const bool pack_all = tb || m >= kPackBRows || ldb >= kPackBLd, pack_edge = !pack_all && nc % NR != 0;
    T* bshared = nullptr;  // B's whole panel, packed by all threads at once (below)
    // an A stored transposed with rows far apart (the weight gradient's dY^T) is packed,
    // (kc, kMR) per tile, for up to kPackATiles row tiles at once (they stay in L2 beside the
    // B slivers): 16 rows of A^T at a time along their length (tile by tile would read a line
    // per row and tile)
    // the blocks u in [u0, u1) of the (row tile, sliver) grid, row tile t = u / nt major (a
    // tile's A stays in L1 across its slivers), every k panel in order: a thread packs the
    // slivers and A tiles its blocks read into its own scratch, so threads meet once per
    // column panel, not twice per k panel
    auto run = [&](int64_t u0, int64_t u1) {
      if (u0 >= u1) return;
      const bool all_s = u1 - u0 >= nt || u0 % nt > (u1 - 1) % nt;
      const int64_t s_lo = all_s ? 0 : u0 % nt, s_hi = all_s ? nt : (u1 - 1) % nt + 1;
      const int64_t t_lo = u0 / nt, t_hi = (u1 - 1) / nt + 1,
                    groups = pack_at ? (t_hi - t_lo + kPackATiles - 1) / kPackATiles : 1;
      const int64_t tg = (t_hi - t_lo + groups - 1) / groups;  // row tiles per group, balanced
      for (int64_t g0 = t_lo; g0 < t_hi; g0 += tg) {           // row tiles [g0, g1), blocks [v0, v1)
        const int64_t g1 = std::min(t_hi, g0 + tg), v0 = std::max(u0, g0 * nt), v1 = std::min(u1, g1 * nt);
        // op(A)'s row sums (a_sums) for the group's tiles whose first block is this thread's, in
        // double, k in order (the bias gradient's sums as a separate pass would add them)
        double* sums = pack_at && a_sums && j0 == 0 ? scratch<double, 3>((g1 - g0) * MR) : nullptr;
        if (sums) std::fill(sums, sums + (g1 - g0) * MR, 0.0);
        for (int64_t k0 = 0; k0 < k; k0 += KC) {
          const int64_t kc = std::min(KC, k - k0);
          const bool first = k0 == 0, last = k0 + kc == k;
          T* bpanel = bshared                 ? bshared + k0 * nt * NR
                      : pack_all || pack_edge ? scratch<T, 0>(nt * kc * NR)
                                              : nullptr;
          if (!bshared && pack_all && !tb)  // B's rows in order, each cut into the slivers
            pack_b_rows<T, NR>(b, ldb, k0, kc, j0, nc, s_lo, s_hi, bpanel);
          else
            for (int64_t s = pack_all ? s_lo : nt - 1; !bshared && bpanel && s < s_hi; ++s)
              pack_b<T, NR>(b, tb, ldb, k0, kc, j0 + s * NR, std::min(NR, nc - s * NR), bpanel + s * kc * NR);
          T* apanel = pack_at ? scratch<T, 1>((g1 - g0) * kc * MR) : nullptr;
          if (apanel) pack_a_tiles<T, MR>(a, lda, m, k0, kc, g0, g1, apanel, sums, u0, u1, nt);
          const T* at0 = nullptr;
          for (int64_t u = v0; u < v1; ++u) {
            const int64_t t = u / nt, s = u % nt;
            const int64_t i0 = t * MR, mr = std::min(MR, m - i0), jj = j0 + s * NR;
            if (u == v0 || s == 0)  // a new row tile
              at0 = pack_at ? apanel + (t - g0) * kc * MR : at(a, ta, lda, i0, k0);
            const bool packed = pack_all || (pack_edge && s == nt - 1);
            tile<T, NV>(kc, at0, ta, pack_at ? MR : lda,
                        packed ? bpanel + s * kc * NR : at(b, false, ldb, k0, jj), packed ? NR : ldb, alpha,
                        beta, bias ? bias + jj : nullptr, first, last, c + i0 * ldc + jj, ldc, mr,
                        std::min(NR, n - jj));
          }
        }
        if (sums) store_row_sums<T, MR>(sums, g0, g1, u0, u1, nt, m, a_sums);
      }
    };
    // threads split the grid's blocks evenly (a tile's slivers may go to two threads): with
    // few row tiles (the weight gradient's) whole tiles would leave a thread idle
    if (threaded) {
      if (pack_all) bshared = shared_b_panel<T, NR, KC>(b, tb, ldb, m, k, j0, nc, nt);
      parallel_for(0, mt * nt, 1, run);
    } else {
      run(0, mt * nt);
    }
  }
  return pack_at;
}

// row_sums' default reading and storing: a value as double, a double sum as S
template <class T>
struct AsDouble {
  double operator()(T x) const { return static_cast<double>(x); }
};
template <class S>
struct FromDouble {
  S operator()(double acc) const { return static_cast<S>(acc); }
};

// sums[i] = the sum over k of op(A)(i, k), in double, k in order (threads split i).
// value(x) reads an element as double (T's value, or a bfloat16's bits widened), sum(acc)
// stores a double sum as S.
template <class T, class S = T, class Value = AsDouble<T>, class Sum = FromDouble<S>>
void row_sums(bool ta, int64_t m, int64_t k, const T* a, int64_t lda, S* sums, bool threaded,
              Value value = {}, Sum sum = {}) {
  auto rows = [&](int64_t i0, int64_t i1) {
    if (ta) {  // A stored (k, m): a run of rows of op(A) per stored row
      std::vector<double> acc(static_cast<std::size_t>(i1 - i0), 0.0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const T* row = a + kk * lda;
        for (int64_t i = i0; i < i1; ++i) acc[i - i0] += value(row[i]);
      }
      for (int64_t i = i0; i < i1; ++i) sums[i] = sum(acc[i - i0]);
    } else {
      for (int64_t i = i0; i < i1; ++i) {
        double acc = 0.0;
        for (int64_t kk = 0; kk < k; ++kk) acc += value(a[i * lda + kk]);
        sums[i] = sum(acc);
      }
    }
  };
  if (threaded) parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), rows);
  else rows(0, m);
}

// The whole product: a tile one vector wide (kMR x kW) when C has at most kW columns (the
// attention's head-dim outputs), else two vectors wide. An element's FMA chain is the same
// in either tile.
// With a_sums (m values), also a_sums[i] = the sum over k of op(A)(i, k), accumulated in
// double in k order (the linear layer's bias gradient, the column sums of dY, beside its weight
// gradient dY^T X): taken from A's packed copy where the GEMM packs A, else a separate pass.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, const T* bias, T* c, int64_t ldc, bool threaded, T* a_sums = nullptr) {
  if (a_sums && (n == 0 || k == 0)) row_sums(ta, m, k, a, lda, a_sums, false);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C, or the bias
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = bias ? bias[j] : beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const bool summed =
      n <= Tile<T, 1>::kNR
          ? gemm_nv<T, 1>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded, a_sums)
          : gemm_nv<T, 2>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded, a_sums);
  if (a_sums && !summed) row_sums(ta, m, k, a, lda, a_sums, threaded);
}

}  // namespace xgrad::gemm_kernel
