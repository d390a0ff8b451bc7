// core/src/kernels/gemm_bf16_amx.h (private): the bfloat16 GEMM on AMX tiles (tdpbf16ps), and
// its portable twin: a path of blas::gemm_bf16 beside gemm_bf16_kernel.h's.
//
//   C (m, n) = alpha * op(A) @ op(B) + beta * C,  or  (alpha * op(A) @ op(B)) + bias
//
// The kernel is compiled for any x86-64 build (target attributes) and runs where the CPU has
// AMX-BF16 and the kernel grants the tile state (amx_usable(): CPUID, XCR0, then Linux's
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)). A block of C is 32 x 32: four 16 x 16
// float32 tiles (tmm0-3), two A tiles of 16 rows x 32 k (tmm4-5, row-major pairs) and two B
// tiles of 16 k pairs x 16 columns (tmm6-7, the pairs of a column side by side: the same
// packed slivers as the vdpbf16ps path, gemm_bf16_kernel::pack_b).
//
// The arithmetic of an element, which amx_portable computes in scalar code (Intel SDM,
// TDPBF16PS: FP32 FMAs with DAZ and FTZ, round to nearest even, MXCSR not used):
//   k runs in panels of kKC (gemm_bf16_kernel.h), each in steps of 32 (zero past k); per
//   panel acc = 0 (the C tiles zeroed), and per step (one tdpbf16ps) two chains from zero, e
//   over the even k of the step and o over the odd ones (one fused multiply-add each,
//   dp_step), then acc = acc + (e + o) (two adds, also DAZ / FTZ); after the panel the
//   epilogue of gemm_bf16_kernel.h.
// That is the SDM's pseudo-code; the kernel has not run on AMX hardware where this file was
// written, so tests/core/test_gemm_bf16.cpp's AMX tests (kernel against twin, bit for bit, and
// against float64) are the check on a machine that has it.
#pragma once
#include <cstdint>
#include <cstring>

#include "gemm_bf16_kernel.h"
#include "xgrad/parallel.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define XGRAD_AMX_BUILD 1
#else
#define XGRAD_AMX_BUILD 0
#endif

namespace xgrad::gemm_bf16_amx {

namespace K = gemm_bf16_kernel;

inline constexpr int64_t kBM = 32;    // block rows: two tiles of 16
inline constexpr int64_t kBN = 32;    // block columns: two tiles of 16 (one packed sliver)
inline constexpr int64_t kStep = 32;  // k per tdpbf16ps: 16 pairs
static_assert(K::kNR == kBN && K::kKC % kStep == 0,
              "a B sliver is a block's columns; panels are whole steps");

// x + y with DAZ and FTZ, rounded to nearest even: the fused x + y * 1 of dp_step.
inline float add_ftz(float x, float y) { return K::dp_step(x, y, 1.0f); }

// The TDPBF16PS path's arithmetic, element by element (one thread; k > 0).
inline void gemm_portable(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                          int64_t lda, const uint16_t* b, int64_t ldb, float beta, const float* bias,
                          float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k0 = 0; k0 < k; k0 += K::kKC) {
        const int64_t k1 = std::min(k, k0 + K::kKC);
        float acc = 0.0f;
        for (int64_t s = k0; s < k1; s += kStep) {
          float e = 0.0f, o = 0.0f;
          for (int64_t q = s; q < s + kStep; q += 2) {  // zero past k1 (the panel ends a step)
            auto av = [&](int64_t kk) { return kk < k1 ? K::bf16_f(K::op_at(a, ta, lda, i, kk, k)) : 0.0f; };
            auto bv = [&](int64_t kk) { return kk < k1 ? K::bf16_f(K::op_at(b, !tb, ldb, j, kk, k)) : 0.0f; };
            e = K::dp_step(e, av(q), bv(q));
            o = K::dp_step(o, av(q + 1), bv(q + 1));
          }
          acc = add_ftz(acc, add_ftz(e, o));
        }
        float& cij = c[i * ldc + j];
        cij = K::epilogue(cij, acc, alpha, beta, bias ? bias + j : nullptr, k0 == 0, k1 == k);
      }
}

#if XGRAD_AMX_BUILD
inline constexpr bool kBuilt = true;

// Whether this CPU and kernel run AMX-BF16 tiles: CPUID leaf 7 (AMX-TILE, AMX-BF16), the OS
// saving the tile state (XCR0 bits 17, 18), and this process granted it by Linux
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once).
inline bool amx_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    // leaf 7's EDX bits (GCC's cpuid.h names them bit_AMX_BF16 and bit_AMX_TILE, clang's does not)
    constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
    if (!(d & kAmxTile) || !(d & kAmxBf16)) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x60000u) != 0x60000u) return false;  // XTILECFG and XTILEDATA enabled by the OS
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

// The tile configuration (palette 1): tmm0-3 C (16 rows x 64 bytes), tmm4-5 A (16 rows x 32
// bf16), tmm6-7 B (16 pair rows x 16 columns).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Packs op(A)[i0 .. i0+32, k0 .. k0+kcp) row by row, kcp / 2 pairs a row (zero past kc and
// past mr rows): out[r * (kcp / 2) + p].
inline void pack_a_rows(const uint16_t* a, bool ta, int64_t lda, int64_t i0, int64_t mr, int64_t k0,
                        int64_t kc, int64_t kcp, uint32_t* out) {
  const int64_t kp = kcp / 2;
  std::memset(out, 0, sizeof(uint32_t) * kBM * kp);
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t p = 0; 2 * p < kc; ++p) {
      const uint16_t lo = K::op_at(a + (ta ? i0 : i0 * lda), ta, lda, r, k0 + 2 * p, k0 + kc);
      const uint16_t hi = K::op_at(a + (ta ? i0 : i0 * lda), ta, lda, r, k0 + 2 * p + 1, k0 + kc);
      out[r * kp + p] = K::pair(lo, hi);
    }
}

// One 32 x 32 block of C, k panel of kcp (a multiple of 32, zero-padded): acc (32 x 32 floats)
// = A rows (ap) @ B sliver (bp), tdpbf16ps step by step into tiles zeroed at the panel's start.
// The tiles must be configured (ldtilecfg) by the calling thread.
__attribute__((target("amx-tile,amx-bf16"))) inline void block_panel(int64_t kcp, const uint32_t* ap,
                                                                     const uint32_t* bp, float* acc) {
  const int64_t kp = kcp / 2;
  __asm__ volatile("" ::: "memory");  // the packed operands are written before the tile loads
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < kp; s += kStep / 2) {
    _tile_loadd(4, ap + s, kp * 4);              // rows 0-15, pairs s .. s+15
    _tile_loadd(5, ap + 16 * kp + s, kp * 4);    // rows 16-31
    _tile_loadd(6, bp + s * kBN, kBN * 4);       // pairs s .. s+15, columns 0-15
    _tile_loadd(7, bp + s * kBN + 16, kBN * 4);  // columns 16-31
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, acc, kBN * 4);
  _tile_stored(1, acc + 16, kBN * 4);
  _tile_stored(2, acc + 16 * kBN, kBN * 4);
  _tile_stored(3, acc + 16 * kBN + 16, kBN * 4);
  __asm__ volatile("" ::: "memory");
}

__attribute__((target("amx-tile"))) inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) inline void release_tiles() { _tile_release(); }

// The whole product (k > 0) on AMX tiles; threads split the 32 x 32 blocks of C (never k).
inline void gemm_amx(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                     int64_t lda, const uint16_t* b, int64_t ldb, float beta, const float* bias, float* c,
                     int64_t ldc, bool threaded) {
  const int64_t mt = (m + kBM - 1) / kBM, nt = (n + kBN - 1) / kBN;
  auto blocks = [&](int64_t u0, int64_t u1) {
    configure_tiles();
    alignas(64) float acc[kBM * kBN];
    uint32_t* ap = gemm_kernel::scratch<uint32_t, 2>(kBM * K::kKC / 2);
    uint32_t* bp = gemm_kernel::scratch<uint32_t, 3>(K::kKC / 2 * kBN);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i0 = u / nt * kBM, j0 = u % nt * kBN, mr = std::min(kBM, m - i0),
                    nr = std::min(kBN, n - j0);
      for (int64_t k0 = 0; k0 < k; k0 += K::kKC) {
        const int64_t kc = std::min(K::kKC, k - k0), kcp = (kc + kStep - 1) / kStep * kStep;
        pack_a_rows(a, ta, lda, i0, mr, k0, kc, kcp, ap);
        std::memset(bp, 0, sizeof(uint32_t) * kcp / 2 * kBN);
        K::pack_b(b, tb, ldb, k0, kc, j0, nr, bp);
        block_panel(kcp, ap, bp, acc);
        for (int64_t r = 0; r < mr; ++r)
          for (int64_t j = 0; j < nr; ++j) {
            float& cij = c[(i0 + r) * ldc + j0 + j];
            cij = K::epilogue(cij, acc[r * kBN + j], alpha, beta, bias ? bias + j0 + j : nullptr, k0 == 0,
                              k0 + kc == k);
          }
      }
    }
    release_tiles();
  };
  if (threaded) parallel_for(0, mt * nt, 1, blocks);
  else blocks(0, mt * nt);
}
#else
inline constexpr bool kBuilt = false;
inline bool amx_usable() { return false; }
#endif

}  // namespace xgrad::gemm_bf16_amx
