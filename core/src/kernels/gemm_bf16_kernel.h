// core/src/kernels/gemm_bf16_kernel.h (private): the bfloat16 GEMM, bf16 x bf16 -> float32, the
// kernel floor under blas::gemm_bf16.
//
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C     (A, B bfloat16 bits; C float32)
//   C (m, n) = (alpha * op(A) @ op(B)) + bias (n)                  (with a float32 bias: linear)
//
// Three paths; the build (-march) picks one for the ops (kBuildDpbf16): dpbf16 where the CPU
// has AVX512_BF16, but for CPUs that also have AVX512_FP16 (Intel's Sapphire / Emerald Rapids
// class), whose vdpbf16ps retires one instruction every two cycles: 32 flops a cycle, half
// of what their two FMA ports give the float32 GEMM (bench/fma_peak measures both), so
// there, as on CPUs without AVX512_BF16, widened. (AMD's Zen 4 / 5 run vdpbf16ps at the
// FMA's rate: twice its flops.)
//   dpbf16    vdpbf16ps on a kMR x kNR register tile (28 zmm accumulators of 16 floats): per
//             pair of k values it loads two vectors of a B sliver packed as (k pair, column,
//             2) and broadcasts one (k pair) dword of each of kMR rows of a packed A tile.
//   portable  vdpbf16ps's arithmetic in scalar code (dp_pair): the dpbf16 path's twin, the
//             same bits element for element, on any CPU.
//   widened   A and B widened to float32 (exact) and run through the float32 GEMM
//             (gemm_kernel.h): its FMAs in k order, with its own rounding; a block of each at
//             a time (bounded memory), with the bits of widening them whole.
// A bfloat16 C (the ops' result) is produced block by block through a float32 block, each
// element rounded once from the float32 value the path computes (blas::gemm_bf16).
//
// The dpbf16 and portable paths compute every element of C by one chain (so the same bits at
// any thread count, whatever the split, and whatever the tile's position):
//   k runs in panels of kKC (even); in a panel, pairs (k0 + 2p, k0 + 2p + 1), the second
//   half zero past k (an odd k);
//   acc = 0; per pair, acc = dp_pair(acc, ...): two fused multiply-adds, the pair's upper half
//   first, each rounded to nearest even, bfloat16 subnormal inputs read as zero and
//   float32 subnormal results flushed to zero (Intel SDM, VDPBF16PS; MXCSR is not used);
//   then the float32 GEMM's epilogue: first panel c = beta * c + alpha * acc (alpha * acc
//   when beta is 0 or with a bias), later panels c = c + alpha * acc, and after the last one
//   c = c + bias[j] (alpha * acc is acc when alpha is 1).
// A product of two bfloat16 has at most 16 significant bits, so the fused product is exact
// and each step rounds once.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "bf16_kernel.h"
#include "gemm_kernel.h"
#include "xgrad/parallel.h"

namespace xgrad::gemm_bf16_kernel {

inline constexpr int64_t kMR = 14;   // tile rows
inline constexpr int64_t kNR = 32;   // tile columns: two vectors of 16 floats
inline constexpr int64_t kKC = 512;  // k panel (even: a pair never straddles two panels)
inline constexpr int64_t kNC = 384;  // column panel (a packed k panel of it: 384 KB)

// ---------------------------------------------------------------- vdpbf16ps, one lane

// A float32 subnormal read as zero (its sign kept).
inline float daz(float x) {
  return (std::bit_cast<uint32_t>(x) & 0x7f800000u) == 0 ? std::copysign(0.0f, x) : x;
}

// acc + a * b, fused, rounded to nearest even, with subnormal inputs as zero and a result
// that is tiny flushed to a zero of its sign. Tiny is decided after rounding to float32's
// precision with an unbounded exponent (x86's rule): below 2^-126 - 2^-151 in magnitude, the
// midpoint between the largest float32 under 2^-126 at 24 bits and 2^-126 (the midpoint itself
// goes to 2^-126, its even neighbour). std::fma rounds onto the subnormal grid instead, so a
// result at most 2^-126 is decided from the exact sum, s + t (TwoSum in double: the product
// is exact in double, and both values are far from double's range limits).
inline float dp_step(float acc, float a, float b) {
  a = daz(a);
  b = daz(b);
  acc = daz(acc);
  const float r = std::fma(a, b, acc);
  if (!(std::fabs(r) <= 0x1p-126f) || r == 0.0f) return r;  // normal, inf, NaN or an exact zero
  const double p = double(a) * double(b), s = double(acc) + p, bv = s - double(acc);
  const double t = (double(acc) - (s - bv)) + (p - bv);
  const double lim = 0x1p-126 - 0x1p-151, as = std::fabs(s);
  const bool tiny = as < lim || (as == lim && (s > 0 ? t < 0 : t > 0));
  return tiny ? std::copysign(0.0f, float(s)) : r;
}

inline float bf16_f(uint16_t x) { return kernels::bf16_to_float(x); }
inline bool bf16_nan(uint16_t x) { return (x & 0x7fffu) > 0x7f80u; }
inline float quiet(uint16_t x) { return std::bit_cast<float>((uint32_t(x) << 16) | 0x400000u); }
inline float quiet_f(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) | 0x400000u); }

// One lane of vdpbf16ps(acc, a pair, b pair) (src1 = a, src2 = b): a NaN input is returned
// quieted, by the SDM's priority (src1 low, src2 low, src1 high, src2 high, then acc); else
// acc += a_hi * b_hi, then acc += a_lo * b_lo.
inline float dp_pair(float acc, uint16_t a_lo, uint16_t a_hi, uint16_t b_lo, uint16_t b_hi) {
  if (bf16_nan(a_lo)) return quiet(a_lo);
  if (bf16_nan(b_lo)) return quiet(b_lo);
  if (bf16_nan(a_hi)) return quiet(a_hi);
  if (bf16_nan(b_hi)) return quiet(b_hi);
  if (std::isnan(acc)) return quiet_f(acc);
  acc = dp_step(acc, bf16_f(a_hi), bf16_f(b_hi));
  return dp_step(acc, bf16_f(a_lo), bf16_f(b_lo));
}

// The epilogue of one element after a k panel (the float32 GEMM's, gemm_kernel.h). Where both
// operands of one of its adds are NaN, which NaN comes out is the compiler's choice (x86
// returns the first operand's, and an add's operands may be swapped): a NaN result is NaN,
// its payload not pinned.
inline float epilogue(float c, float acc, float alpha, float beta, const float* bias, bool first, bool last) {
  const float s = alpha == 1.0f ? acc : alpha * acc;
  float out = !first ? c + s : (beta == 0.0f || bias) ? s : beta * c + s;
  if (bias && last) out = out + *bias;
  return out;
}

// ---------------------------------------------------------------- the portable twin

// op(X) element (i, j) of a stored row-major bf16 matrix, zero past `cols` of op(X)'s j.
inline uint16_t op_at(const uint16_t* x, bool trans, int64_t ld, int64_t i, int64_t j, int64_t cols) {
  if (j >= cols) return 0;
  return trans ? x[j * ld + i] : x[i * ld + j];
}

// The dpbf16 path's arithmetic, element by element (one thread; k > 0).
inline void gemm_portable(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                          int64_t lda, const uint16_t* b, int64_t ldb, float beta, const float* bias,
                          float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k0 = 0; k0 < k; k0 += kKC) {
        const int64_t k1 = std::min(k, k0 + kKC);
        float acc = 0.0f;
        for (int64_t q = k0; q < k1; q += 2)  // B as op(B)^T: (n, k) row j
          acc = dp_pair(acc, op_at(a, ta, lda, i, q, k), op_at(a, ta, lda, i, q + 1, k),
                        op_at(b, !tb, ldb, j, q, k), op_at(b, !tb, ldb, j, q + 1, k));
        float& cij = c[i * ldc + j];
        cij = epilogue(cij, acc, alpha, beta, bias ? bias + j : nullptr, k0 == 0, k1 == k);
      }
}

// ---------------------------------------------------------------- packing (k pairs)

inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | (uint32_t(hi) << 16); }

// op(A)[i0 .. i0+mr, k0 .. k0+kc) as (kc / 2 rounded up, kMR) pairs: out[p * kMR + r] holds
// op(A)(i0 + r, k0 + 2p) and, above it, (i0 + r, k0 + 2p + 1) or zero past kc.
inline void pack_a(const uint16_t* a, bool ta, int64_t lda, int64_t i0, int64_t mr, int64_t k0, int64_t kc,
                   uint32_t* out) {
  const int64_t kp = kc / 2, odd = kc % 2;  // whole pairs, and a last half pair
  if (!ta) {                                // a row of op(A) is contiguous: pairs are dwords
    for (int64_t r = 0; r < mr; ++r) {
      const uint16_t* row = a + (i0 + r) * lda + k0;
      for (int64_t p = 0; p < kp; ++p) {
        uint32_t v;
        std::memcpy(&v, row + 2 * p, sizeof v);
        out[p * kMR + r] = v;
      }
      if (odd) out[kp * kMR + r] = row[2 * kp];
    }
    return;
  }
  for (int64_t p = 0; p < kp + odd; ++p) {  // A stored (k, m): two rows of the storage per pair
    const uint16_t* lo = a + (k0 + 2 * p) * lda + i0;
    const uint16_t* hi = 2 * p + 1 < kc ? lo + lda : nullptr;
    for (int64_t r = 0; r < mr; ++r) out[p * kMR + r] = pair(lo[r], hi ? hi[r] : 0);
  }
}

// op(B)[k0 .. k0+kc, j0 .. j0+nr) as (kc / 2 rounded up, kNR) pairs, zero past kc and nr:
// out[p * kNR + j] holds op(B)(k0 + 2p, j0 + j) and, above it, (k0 + 2p + 1, j0 + j).
inline void pack_b(const uint16_t* b, bool tb, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nr,
                   uint32_t* out) {
  const int64_t kp = (kc + 1) / 2;
  if (nr < kNR)
    for (int64_t p = 0; p < kp; ++p) std::fill(out + p * kNR + nr, out + (p + 1) * kNR, 0u);
  if (tb) {  // B stored (n, k): column j of op(B) is a contiguous row of the storage
    for (int64_t j = 0; j < nr; ++j) {
      const uint16_t* col = b + (j0 + j) * ldb + k0;
      for (int64_t p = 0; p < kc / 2; ++p) {
        uint32_t v;
        std::memcpy(&v, col + 2 * p, sizeof v);
        out[p * kNR + j] = v;
      }
      if (kc % 2) out[(kp - 1) * kNR + j] = col[kc - 1];
    }
    return;
  }
  for (int64_t p = 0; p < kp; ++p) {  // B stored (k, n): two rows per pair, interleaved
    const uint16_t* lo = b + (k0 + 2 * p) * ldb + j0;
    const uint16_t* hi = 2 * p + 1 < kc ? lo + ldb : nullptr;
    for (int64_t j = 0; j < nr; ++j) out[p * kNR + j] = pair(lo[j], hi ? hi[j] : 0);
  }
}

// ---------------------------------------------------------------- dpbf16 (AVX512_BF16)

#if XGRAD_BF16_AVX512
inline constexpr bool kHasDpbf16 = true;

// The register tile of MR rows: acc (MR x kNR) = A tile (kp pairs, packed) @ B sliver (kp
// pairs, packed), one vdpbf16ps per row, vector and pair, then the epilogue on C (row
// stride ldc), vector by vector as epilogue() does it element by element.
template <int64_t MR>
inline void micro_kernel(int64_t kp, const uint32_t* ap, const uint32_t* bp, float alpha, float beta,
                         const float* bias, bool first, bool last, float* c, int64_t ldc) {
  __m512 acc[MR][2];
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));  // A(r, pair p)
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
    ap += kMR;
    bp += kNR;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const bool add_bias = bias && last, read_c = !first || (beta != 0.0f && !bias);
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int64_t v = 0; v < 2; ++v) {
      float* pc = c + r * ldc + v * 16;
      __m512 out = alpha == 1.0f ? acc[r][v] : _mm512_mul_ps(va, acc[r][v]);
      if (read_c)
        out = first ? _mm512_add_ps(_mm512_mul_ps(vb, _mm512_loadu_ps(pc)), out)
                    : _mm512_add_ps(_mm512_loadu_ps(pc), out);
      if (add_bias) out = _mm512_add_ps(out, _mm512_loadu_ps(bias + v * 16));
      _mm512_storeu_ps(pc, out);
    }
}

// micro_kernel with exactly mr rows (1 <= mr <= R): the last row tile computes no padding.
template <int64_t R = kMR, class... Args>
inline void micro_kernel_rows(int64_t mr, Args... args) {
  if constexpr (R > 1) {
    if (mr < R) return micro_kernel_rows<R - 1>(mr, args...);
  }
  micro_kernel<R>(args...);
}

// One C block of mr x nr (at most kMR x kNR); fewer than kNR columns go through a scratch
// tile holding C's valid part (and the bias's), with the same epilogue.
inline void tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, float alpha, float beta,
                 const float* bias, bool first, bool last, float* c, int64_t ldc, int64_t mr, int64_t nr) {
  if (nr == kNR) {
    micro_kernel_rows(mr, kp, ap, bp, alpha, beta, bias, first, last, c, ldc);
    return;
  }
  alignas(64) float ct[kMR * kNR];
  alignas(64) float bt[kNR] = {};
  if (!first || (beta != 0.0f && !bias))
    for (int64_t r = 0; r < mr; ++r) std::copy(c + r * ldc, c + r * ldc + nr, ct + r * kNR);
  if (bias) {
    std::copy(bias, bias + nr, bt);
    bias = bt;
  }
  micro_kernel_rows(mr, kp, ap, bp, alpha, beta, bias, first, last, ct, kNR);
  for (int64_t r = 0; r < mr; ++r) std::copy(ct + r * kNR, ct + r * kNR + nr, c + r * ldc);
}

// The whole product (k > 0). Per column panel and k panel, B's slivers are packed once into a
// panel the threads share, then the threads split the blocks (row tile x sliver) of C, row
// tile major, each packing the A tiles its blocks read. Threads never split k.
inline void gemm_dpbf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                        int64_t lda, const uint16_t* b, int64_t ldb, float beta, const float* bias, float* c,
                        int64_t ldc, bool threaded) {
  const int64_t mt = (m + kMR - 1) / kMR;
  for (int64_t j0 = 0; j0 < n; j0 += kNC) {
    const int64_t nc = std::min(kNC, n - j0), nt = (nc + kNR - 1) / kNR;
    for (int64_t k0 = 0; k0 < k; k0 += kKC) {
      const int64_t kc = std::min(kKC, k - k0), kp = (kc + 1) / 2;
      const bool first = k0 == 0, last = k0 + kc == k;
      uint32_t* bpanel = gemm_kernel::scratch<uint32_t, 0>(nt * kp * kNR);
      auto pack = [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s)
          pack_b(b, tb, ldb, k0, kc, j0 + s * kNR, std::min(kNR, nc - s * kNR), bpanel + s * kp * kNR);
      };
      auto blocks = [&](int64_t u0, int64_t u1) {
        uint32_t* ap = gemm_kernel::scratch<uint32_t, 1>(kp * kMR);
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t t = u / nt, s = u % nt, i0 = t * kMR, mr = std::min(kMR, m - i0), j = j0 + s * kNR;
          if (u == u0 || s == 0) pack_a(a, ta, lda, i0, mr, k0, kc, ap);  // a new row tile
          tile(kp, ap, bpanel + s * kp * kNR, alpha, beta, bias ? bias + j : nullptr, first, last,
               c + i0 * ldc + j, ldc, mr, std::min(kNR, n - j));
        }
      };
      if (threaded) {
        parallel_for(0, nt, 1, pack);
        parallel_for(0, mt * nt, 1, blocks);
      } else {
        pack(0, nt);
        blocks(0, mt * nt);
      }
    }
  }
}
#else
inline constexpr bool kHasDpbf16 = false;
#endif

#if XGRAD_BF16_AVX512 && !defined(__AVX512FP16__)
inline constexpr bool kBuildDpbf16 = true;  // the ops' path: dpbf16 (else widened)
#else
inline constexpr bool kBuildDpbf16 = false;
#endif

// ---------------------------------------------------------------- widened

// The widened path, and a bfloat16 C on any path, work a block at a time: a widened block of
// op(A) or op(B), and the float32 block a bfloat16 C is produced through, each hold at most
// `budget` float32 values (blas::gemm_bf16 passes kBlockElements: 16 MiB; at least kKC so that
// every product has a blocking within it).
inline constexpr int64_t kBlockElements = int64_t(1) << 22;
inline constexpr int64_t kWideKC = gemm_kernel::Tile<float>::kKC;  // the float32 GEMM's k panel

// C in blocks of mb x nb (the last ones ragged), k in chunks of kb: k itself, or a multiple of
// the float32 GEMM's k panel (so a chunk's panels are panels of the whole product).
struct Blocks {
  int64_t mb, nb, kb;
};

// The blocking of an (m, n, k) product within `budget` values per block (C blocks only when
// c_block; widened operand blocks only when widened, which alone may chunk k), chosen among
// splits of m and n into 2^p near-equal parts for the fewest values widened or packed again:
// op(A) is read once per column block (once in all where k is one chunk: its block is kept
// across the column blocks), op(B) once per row block (once where it is a single block), and
// each GEMM call counts as kCallElements values (its threads meet; its panels restart).
inline Blocks blocking(int64_t m, int64_t n, int64_t k, bool c_block, bool widened, int64_t budget) {
  constexpr double kCallElements = 1 << 16;
  if ((!widened || (m * k <= budget && k * n <= budget)) && (!c_block || m * n <= budget)) return {m, n, k};
  Blocks best{1, 1, widened ? std::min(k, budget / kWideKC * kWideKC) : k};  // fits any budget >= kKC
  double best_cost = -1.0;
  for (int64_t qm = 1;; qm *= 2) {
    const int64_t mb = (m + qm - 1) / qm, mblocks = (m + mb - 1) / mb;
    for (int64_t qn = 1;; qn *= 2) {
      const int64_t nb = (n + qn - 1) / qn, nblocks = (n + nb - 1) / nb;
      int64_t kb = k;
      if (widened && (mb * k > budget || k * nb > budget))
        kb = std::min(k, budget / std::max(mb, nb) / kWideKC * kWideKC);
      if (kb > 0 && (!c_block || mb * nb <= budget)) {
        const bool keep_a = widened && kb == k, keep_b = widened && kb == k && nblocks == 1;
        const double cost = double(m * k) * double(keep_a ? 1 : nblocks) +
                            double(k * n) * double(keep_b ? 1 : mblocks) +
                            kCallElements * double(mblocks * nblocks * ((k + kb - 1) / kb));
        if (best_cost < 0 || cost < best_cost) {
          best = {mb, nb, kb};
          best_cost = cost;
        }
      }
      if (nb == 1) break;
    }
    if (mb == 1) break;
  }
  return best;
}

// Each row of a (rows, cols) matrix x (row stride ld) converted element by element into out
// (row stride ldo) by convert_n (kernels::bf16_to_float_n or float_to_bf16_n), rows split
// between threads when threaded.
template <class From, class To, class ConvertN>
inline void convert_rows(const From* x, int64_t rows, int64_t cols, int64_t ld, To* out, int64_t ldo,
                         bool threaded, ConvertN convert_n) {
  auto run = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) convert_n(x + r * ld, out + r * ldo, cols);
  };
  if (threaded) parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), run);
  else run(0, rows);
}

// A bf16 matrix widened to float32 (exact).
inline void widen(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, float* out, int64_t ldo,
                  bool threaded) {
  convert_rows(x, rows, cols, ld, out, ldo, threaded,
               [](const uint16_t* p, float* q, int64_t n) { kernels::bf16_to_float_n(p, q, n); });
}

// A float32 matrix rounded to bf16, each element once, to nearest even (kernels::float_to_bf16).
inline void narrow(const float* x, int64_t rows, int64_t cols, int64_t ld, uint16_t* out, int64_t ldo,
                   bool threaded) {
  convert_rows(x, rows, cols, ld, out, ldo, threaded,
               [](const float* p, uint16_t* q, int64_t n) { kernels::float_to_bf16_n(p, q, n); });
}

// c(i, j) = c(i, j) + bias[j] on a (rows, cols) block: the float32 GEMM's last step with a bias.
inline void add_bias(float* c, int64_t rows, int64_t cols, int64_t ldc, const float* bias) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = c[i * ldc + j] + bias[j];
}

// op(A) @ op(B) through the float32 GEMM (gemm_kernel.h) on float32 copies of blocks of A and
// B (k > 0), in the calling thread's scratch (slots the float32 GEMM does not use). C is
// float32 (TC = float) or bfloat16 (TC = uint16_t): then each C block is computed in a float32
// block (C's contents widened into it when beta reads them) and rounded once.
//
// The same bits as one float32 GEMM on A and B widened whole (widening is exact), because
// that GEMM computes every element of C by one chain that neither the element's position
// nor the product's m and n change (gemm_kernel.h), so C's blocks can be computed apart; and
// its chain runs k in panels of kKC, c = beta * c + alpha * acc after the first panel (alpha *
// acc with a bias or beta 0), c = c + alpha * acc after each later one, then c = c + bias, so
// chunks of k that are whole panels (kb a multiple of kKC) continue it exactly: the first
// chunk with beta (0 with a bias) and no bias, the later ones with beta 1 (1 * c is c, exact),
// and the bias added after the last chunk.
template <class TC>
inline void gemm_widened(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                         int64_t lda, const uint16_t* b, int64_t ldb, float beta, const float* bias, TC* c,
                         int64_t ldc, bool threaded, int64_t budget) {
  constexpr bool bf16_c = std::is_same_v<TC, uint16_t>;
  const Blocks bl = blocking(m, n, k, bf16_c, true, budget);
  const bool chunked = bl.kb < k, one_column_block = bl.nb == n;
  float* aw = gemm_kernel::scratch<float, 5>(bl.mb * bl.kb);
  float* bw = gemm_kernel::scratch<float, 6>(bl.kb * bl.nb);
  float* cw = bf16_c ? gemm_kernel::scratch<float, 7>(bl.mb * bl.nb) : nullptr;
  for (int64_t i0 = 0; i0 < m; i0 += bl.mb) {
    const int64_t mc = std::min(bl.mb, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += bl.nb) {
      const int64_t nc = std::min(bl.nb, n - j0);
      const float* bias_j = bias ? bias + j0 : nullptr;
      float* cb;  // C's block (i0, j0): C itself, or the float32 block of a bfloat16 C
      int64_t ldcb;
      if constexpr (bf16_c) {
        cb = cw;
        ldcb = nc;
        if (beta != 0.0f && !bias) widen(c + i0 * ldc + j0, mc, nc, ldc, cb, ldcb, threaded);
      } else {
        cb = c + i0 * ldc + j0;
        ldcb = ldc;
      }
      for (int64_t k0 = 0; k0 < k; k0 += bl.kb) {
        const int64_t kc = std::min(bl.kb, k - k0);
        // op(A)'s block (i0, k0) and op(B)'s (k0, j0), stored as A and B are (transposed or
        // not); a block still in scratch from the previous call is not widened again
        const int64_t ldaw = ta ? mc : kc, ldbw = tb ? kc : nc;
        if (chunked || j0 == 0) {
          if (ta) widen(a + k0 * lda + i0, kc, mc, lda, aw, ldaw, threaded);
          else widen(a + i0 * lda + k0, mc, kc, lda, aw, ldaw, threaded);
        }
        if (chunked || !one_column_block || i0 == 0) {
          if (tb) widen(b + j0 * ldb + k0, nc, kc, ldb, bw, ldbw, threaded);
          else widen(b + k0 * ldb + j0, kc, nc, ldb, bw, ldbw, threaded);
        }
        const bool first = k0 == 0, last = k0 + kc == k;
        const float beta_k = !first ? 1.0f : bias ? 0.0f : beta;
        gemm_kernel::gemm<float>(ta, tb, mc, nc, kc, alpha, aw, ldaw, bw, ldbw, beta_k,
                                 first && last ? bias_j : nullptr, cb, ldcb, threaded);
      }
      if (bias && chunked) add_bias(cb, mc, nc, ldcb, bias_j);
      if constexpr (bf16_c) narrow(cb, mc, nc, ldcb, c + i0 * ldc + j0, ldc, threaded);
    }
  }
}

}  // namespace xgrad::gemm_bf16_kernel
