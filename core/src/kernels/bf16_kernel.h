// core/src/kernels/bf16_kernel.h (private): bfloat16 <-> float32, one scalar rule and its loops.
//
// A bfloat16 is the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits), held
// here as its uint16_t bit pattern. Widening is exact (the bits shifted up). Narrowing rounds
// to nearest, ties to even, on the 16 bits dropped, like c10::BFloat16's
// round_to_nearest_even (torch 1.13, c10/util/BFloat16.h):
//   - subnormals round like any other value (no flush to zero),
//   - a value that rounds past the largest finite bfloat16 becomes +-inf,
//   - every NaN becomes the quiet NaN 0x7fc0, whatever its sign and payload.
// (torch's own AVX2 / AVX-512 loop writes 0xffff for a NaN of a contiguous tensor instead; its
// scalar path, taken for strided tensors and under ATEN_CPU_CAPABILITY=default, writes 0x7fc0.
// Both are NaN; xgrad always writes 0x7fc0.)
//
// float_to_bf16_n runs the rule over an array: on a CPU compiled for AVX512_BF16 with
// vcvtneps2bf16, whose rounding is the same except that it treats subnormal inputs as zero and
// keeps NaN payloads, so those lanes are patched with the scalar rule's bits;
// float_to_bf16_n_portable is the scalar rule in a plain loop, its twin everywhere.
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>

#include "xgrad/dtype.h"

#if defined(__AVX512BF16__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#include <immintrin.h>
#define XGRAD_BF16_AVX512 1
#else
#define XGRAD_BF16_AVX512 0
#endif

namespace xgrad::kernels {

// float32 -> bfloat16 bits, rounding to nearest even; NaN -> 0x7fc0.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  // adding 0x7fff (+1 when the kept part is odd) carries into bit 16 exactly when the dropped
  // half is above one half, or exactly one half with an odd kept part; a carry out of the
  // mantissa bumps the exponent, and out of the largest finite value gives the infinity
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// bfloat16 bits -> float32 (exact).
inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// One stored bfloat16 element widened to float32, and a float32 rounded into one.
inline float widen(bf16 x) { return bf16_to_float(x.bits); }
inline bf16 to_bf16(float f) { return bf16{float_to_bf16(f)}; }

inline void float_to_bf16_n_portable(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]);
}

inline void bf16_to_float_n(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(x[i]);
}

#if XGRAD_BF16_AVX512
// 16 floats -> 16 bfloat16 bits with vcvtneps2bf16; subnormal lanes (the instruction flushes
// them to zero) and NaN lanes take the scalar rule, computed on the whole vector with integer
// ops.
inline __m256i float_to_bf16_x16(__m512 v) {
  const __m256i fast = std::bit_cast<__m256i>(_mm512_cvtneps_pbh(v));
  const __m512i u = _mm512_castps_si512(v);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __mmask16 tiny =
      _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(abs, abs), abs, _mm512_set1_epi32(0x00800000));
  if ((nan | tiny) == 0) return fast;
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
  r = _mm512_srli_epi32(r, 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
  const __m256i slow = _mm512_cvtepi32_epi16(r);
  return _mm256_mask_mov_epi16(fast, static_cast<__mmask16>(nan | tiny), slow);
}
#endif

inline void float_to_bf16_n(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
#if XGRAD_BF16_AVX512
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), float_to_bf16_x16(_mm512_loadu_ps(x + i)));
  if (i < n) {  // the tail through a masked load and store
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(out + i, m, float_to_bf16_x16(_mm512_maskz_loadu_ps(m, x + i)));
    return;
  }
#endif
  float_to_bf16_n_portable(x + i, out + i, n - i);
}

// y = body(x) over n bfloat16 elements through float32 blocks on the stack: each block is
// widened, body(i, xf, yf, m) computes elements [i, i + m) in float32 (SIMD), and the result
// is rounded once, so no float32 tensor is allocated. body must be elementwise (the blocks are
// independent); i lets it read a companion array (dropout's mask) at the same positions.
inline constexpr int64_t kBf16Block = 512;

template <class Body>
void map_bf16_blocks(const bf16* x, bf16* y, int64_t n, Body&& body) {
  alignas(64) float xf[kBf16Block];
  alignas(64) float yf[kBf16Block];
  for (int64_t i = 0; i < n; i += kBf16Block) {
    const int64_t m = std::min(kBf16Block, n - i);
    bf16_to_float_n(&x[i].bits, xf, m);
    body(i, static_cast<const float*>(xf), static_cast<float*>(yf), m);
    float_to_bf16_n(yf, &y[i].bits, m);
  }
}

// The same for two bfloat16 inputs: body(af, bf, yf, m).
template <class Body>
void map2_bf16_blocks(const bf16* a, const bf16* b, bf16* y, int64_t n, Body&& body) {
  alignas(64) float af[kBf16Block];
  alignas(64) float bf[kBf16Block];
  alignas(64) float yf[kBf16Block];
  for (int64_t i = 0; i < n; i += kBf16Block) {
    const int64_t m = std::min(kBf16Block, n - i);
    bf16_to_float_n(&a[i].bits, af, m);
    bf16_to_float_n(&b[i].bits, bf, m);
    body(static_cast<const float*>(af), static_cast<const float*>(bf), static_cast<float*>(yf), m);
    float_to_bf16_n(yf, &y[i].bits, m);
  }
}

}  // namespace xgrad::kernels
