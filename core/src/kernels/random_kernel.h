// core/src/kernels/random_kernel.h (private, the kernel floor): the vector loops of
// xgrad::Generator (core/src/random.cpp), each a port of torch 1.13's CPU code that keeps its
// bits: mt19937's twist and tempering, the bernoulli compare on raw state words, and the
// Box-Muller blocks of normal_ (log/sincos on 8 AVX2 lanes, or their scalar transcription).
//
// The Box-Muller code must round exactly like torch's compiled kernels: its fused sites are
// written as std::fma / _mm256_fmadd_ps, and the compiler may fuse nothing else (fp-contract
// off around them, below).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace xgrad::kernels {

// reference: aten/src/ATen/core/MT19937RNGEngine.h, mt19937_engine::next_state, on the kN
// state words s[]. Written as branch-free loops over xsimd batches of independent words
// (full-width under AVX-512, where the compiler's own vectorisation stops at 256 bits): in
// the first loop every read is ahead of the write; in the second, s[k + kM - kN] was written
// kN - kM words earlier.
// GCC 12 warns that _mm512_srli_epi32's _mm512_undefined_epi32() operand "is used
// uninitialized" (a false positive inside the intrinsic).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
template <int kN, int kM>
inline void mt19937_twist(uint32_t* s) {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
  // s[k] = s[k + kM (mod kN)] ^ (y >> 1) ^ (y odd ? kMatrixA : 0), y = s[k]'s top bit, s[k + 1]'s others
  auto step = [](auto sk, auto sk1, auto skm) {
    using V = decltype(sk);
    const V y = (sk & V(kUpper)) | (sk1 & V(kLower));
    return skm ^ (y >> 1) ^ ((V(0u) - (sk1 & V(1u))) & V(kMatrixA));
  };
  using B = xsimd::batch<uint32_t>;
  constexpr int W = static_cast<int>(B::size);
  int k = 0;
  for (; k + W <= kN - kM; k += W)
    step(B::load_unaligned(s + k), B::load_unaligned(s + k + 1), B::load_unaligned(s + k + kM))
        .store_unaligned(s + k);
  for (; k < kN - kM; ++k) s[k] = step(s[k], s[k + 1], s[k + kM]);
  for (; k + W <= kN - 1; k += W)
    step(B::load_unaligned(s + k), B::load_unaligned(s + k + 1), B::load_unaligned(s + k + kM - kN))
        .store_unaligned(s + k);
  for (; k < kN - 1; ++k) s[k] = step(s[k], s[k + 1], s[k + kM - kN]);
  s[kN - 1] = step(s[kN - 1], s[0], s[kM - 1]);
}
#pragma GCC diagnostic pop

// mt19937's output tempering of a state word (reference: torch's mt19937_engine::operator()),
// of a uint32_t or a batch of them.
template <class V>
inline V mt19937_temper(V y) {
  y ^= (y >> 11);
  y ^= (y << 7) & V(0x9d2c5680u);
  y ^= (y << 15) & V(0xefc60000u);
  y ^= (y >> 18);
  return y;
}

// out[i] = (x_i < threshold) for i < n: torch's bernoulli_distribution<double> from the raw
// mt19937 state words w[2i] (the high draw) and w[2i + 1] (the low draw), whose 53-bit
// uniform integer is x_i = (temper(w[2i]) & (2^21 - 1)) << 32 | temper(w[2i + 1]) (random.cpp
// explains the integer compare). A batch tempers 2W words and reads them as W 64-bit lanes,
// each (low draw << 32) | high draw on a little-endian machine: swapping the halves gives x.
template <class T>
inline void bernoulli_keep(const uint32_t* w, int64_t n, uint64_t threshold, T* out) {
  constexpr uint32_t kMask21 = (uint32_t{1} << 21) - 1;
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // bool masks under AVX-512, 16 elements a step: gather the 16 high draws into one register,
  // temper only them and decide x < threshold on their 21 bits (x's top bits); only an element
  // whose 21 bits equal the threshold's (probability 2^-21) needs its low draw.
  if constexpr (std::is_same_v<T, bool>) {
    using B32 = xsimd::batch<uint32_t>;
    const uint32_t t_hi = static_cast<uint32_t>(threshold >> 32), t_lo = static_cast<uint32_t>(threshold);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i limit = _mm512_set1_epi32(static_cast<int>(t_hi));
    for (; i + 16 <= n; i += 16) {
      const __m512i hi =
          _mm512_permutex2var_epi32(_mm512_loadu_si512(w + 2 * i), even, _mm512_loadu_si512(w + 2 * i + 16));
      const __m512i top = mt19937_temper(B32(hi)) & B32(kMask21);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                       _mm_maskz_set1_epi8(_mm512_cmplt_epu32_mask(top, limit), 1));
      for (__mmask16 tie = _mm512_cmpeq_epu32_mask(top, limit); tie != 0; tie &= tie - 1) {
        const int64_t k = i + std::countr_zero(static_cast<unsigned>(tie));
        out[k] = mt19937_temper(w[2 * k + 1]) < t_lo;
      }
    }
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    using B32 = xsimd::batch<uint32_t>;
    using B64 = xsimd::batch<uint64_t>;
    using I64 = xsimd::batch<int64_t>;  // x < 2^53: a signed compare is exact (and AVX2 has one)
    constexpr int64_t W = static_cast<int64_t>(B64::size);
    // kSpread[b]: byte k = bit k of b (8 keep flags as 8 bytes)
    static constexpr auto kSpread = [] {
      std::array<uint64_t, 256> t{};
      for (uint64_t b = 0; b < 256; ++b)
        for (uint64_t k = 0; k < 8; ++k) t[b] |= ((b >> k) & 1) << (8 * k);
      return t;
    }();
    const I64 limit(static_cast<int64_t>(threshold));
    for (; i + W <= n; i += W) {
      const B64 lanes = xsimd::bitwise_cast<B64>(mt19937_temper(B32::load_unaligned(w + 2 * i)));
      const B64 x = ((lanes << 32) | (lanes >> 32)) & B64(uint64_t{kMask21} << 32 | 0xffffffffu);  // a rotate
      const auto below = xsimd::bitwise_cast<I64>(x) < limit;
      uint64_t keep = 0;  // bit k: lane k kept
#if defined(__AVX512F__)
      keep = below.data;  // the compare's mask register
#else
      alignas(64) bool kept[W];
      below.store_aligned(kept);
      for (int64_t k = 0; k < W; ++k) keep |= static_cast<uint64_t>(kept[k]) << k;
#endif
      if constexpr (sizeof(T) == 1) {
        for (int64_t k = 0; k < W; k += 8)
          std::memcpy(out + i + k, &kSpread[(keep >> k) & 255],
                      static_cast<std::size_t>(std::min<int64_t>(8, W)));
      } else {
        for (int64_t k = 0; k < W; ++k) out[i + k] = static_cast<T>((keep >> k) & 1);
      }
    }
  }
  for (; i < n; ++i) {
    const uint64_t x =
        static_cast<uint64_t>(mt19937_temper(w[2 * i]) & kMask21) << 32 | mt19937_temper(w[2 * i + 1]);
    out[i] = static_cast<T>(x < threshold);
  }
}

#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

// ---------------------------------------------------------------------------------------
// Scalar transcriptions of the AVX2 log/sincos that torch's float normal_ uses for n >= 16.
// reference: aten/src/ATen/native/cpu/avx_mathfun.h, log256_ps and sincos256_ps (Cephes
// logf/sinf/cosf by way of Pommier's sse_mathfun). The sites GCC turns into FMAs are
// std::fma below; every other operation rounds on its own, as in the vector code.
constexpr float kMinNormPos = 1.17549435e-38f;  // 0x00800000
constexpr float kSqrtHf = 0.707106781186547524f;
constexpr float kLogP0 = 7.0376836292E-2f, kLogP1 = -1.1514610310E-1f, kLogP2 = 1.1676998740E-1f,
                kLogP3 = -1.2420140846E-1f, kLogP4 = +1.4249322787E-1f, kLogP5 = -1.6668057665E-1f,
                kLogP6 = +2.0000714765E-1f, kLogP7 = -2.4999993993E-1f, kLogP8 = +3.3333331174E-1f;
constexpr float kLogQ1 = -2.12194440e-4f, kLogQ2 = 0.693359375f;

[[maybe_unused]] inline float log256_ps(float x) {
  if (!(x > 0.0f)) return std::numeric_limits<float>::quiet_NaN();  // invalid_mask
  x = x > kMinNormPos ? x : kMinNormPos;                            // _mm256_max_ps
  uint32_t bits = std::bit_cast<uint32_t>(x);
  int32_t imm0 = static_cast<int32_t>(bits >> 23) - 0x7f;
  x = std::bit_cast<float>((bits & ~0x7f800000u) | std::bit_cast<uint32_t>(0.5f));  // [0.5, 1)
  float e = static_cast<float>(imm0);
  e = e + 1.0f;
  // if (x < SQRTHF) { e -= 1; x = x + x - 1; } else { x = x - 1; }
  const bool mask = x < kSqrtHf;
  float tmp = mask ? x : 0.0f;
  x = x - 1.0f;
  e = e - (mask ? 1.0f : 0.0f);
  x = x + tmp;

  const float z = x * x;
  float y = std::fma(kLogP0, x, kLogP1);
  y = std::fma(y, x, kLogP2);
  y = std::fma(y, x, kLogP3);
  y = std::fma(y, x, kLogP4);
  y = std::fma(y, x, kLogP5);
  y = std::fma(y, x, kLogP6);
  y = std::fma(y, x, kLogP7);
  y = std::fma(y, x, kLogP8);
  y = y * x;
  y = std::fma(y, z, e * kLogQ1);  // y*z + e*q1: GCC fuses the first product, y*z
  tmp = z * 0.5f;
  y = y - tmp;
  x = std::fma(e, kLogQ2, x + y);  // (x + y) + e*q2 (e*q2 is exact either way)
  return x;
}

constexpr float kMinusDP1 = -0.78515625f, kMinusDP2 = -2.4187564849853515625e-4f,
                kMinusDP3 = -3.77489497744594108e-8f;
constexpr float kSinP0 = -1.9515295891E-4f, kSinP1 = 8.3321608736E-3f, kSinP2 = -1.6666654611E-1f;
constexpr float kCosP0 = 2.443315711809948E-005f, kCosP1 = -1.388731625493765E-003f,
                kCosP2 = 4.166664568298827E-002f;
constexpr float kFourOverPi = 1.27323954473516f;

[[maybe_unused]] inline void sincos256_ps(float xin, float* s, float* c) {
  const uint32_t xbits = std::bit_cast<uint32_t>(xin);
  uint32_t sign_bit_sin = xbits & 0x80000000u;
  float x = std::bit_cast<float>(xbits & 0x7fffffffu);  // |x|

  float y = x * kFourOverPi;
  int32_t imm2 = static_cast<int32_t>(y);  // _mm256_cvttps_epi32 (truncation)
  imm2 = (imm2 + 1) & ~1;                  // j = (j + 1) & ~1
  y = static_cast<float>(imm2);
  int32_t imm4 = imm2;
  const uint32_t swap_sign_bit_sin = static_cast<uint32_t>(imm2 & 4) << 29;
  const bool poly_mask = (imm2 & 2) == 0;

  // "Extended precision modular arithmetic": x = ((x - y * DP1) - y * DP2) - y * DP3
  x = std::fma(y, kMinusDP1, x);
  x = std::fma(y, kMinusDP2, x);
  x = std::fma(y, kMinusDP3, x);

  imm4 = imm4 - 2;
  const uint32_t sign_bit_cos = static_cast<uint32_t>(~imm4 & 4) << 29;
  sign_bit_sin ^= swap_sign_bit_sin;

  const float z = x * x;
  // cos polynomial, for 0 <= x <= Pi/4
  float yc = std::fma(kCosP0, z, kCosP1);
  yc = std::fma(yc, z, kCosP2);
  yc = yc * z;
  float tmp = z * 0.5f;
  yc = std::fma(yc, z, -tmp);  // yc * z - tmp
  yc = yc + 1.0f;
  // sin polynomial, for Pi/4 <= x <= 0
  float ys = std::fma(kSinP0, z, kSinP1);
  ys = std::fma(ys, z, kSinP2);
  ys = ys * z;
  ys = std::fma(ys, x, x);  // ys * x + x

  // select by poly_mask, literally as the vector code does (and/andnot, sub, add)
  const float ysin2 = poly_mask ? ys : 0.0f;
  const float ysin1 = poly_mask ? 0.0f : yc;
  ys = ys - ysin2;
  yc = yc - ysin1;
  const float sn = ysin1 + ysin2;
  const float cs = yc + ys;
  *s = std::bit_cast<float>(std::bit_cast<uint32_t>(sn) ^ sign_bit_sin);
  *c = std::bit_cast<float>(std::bit_cast<uint32_t>(cs) ^ sign_bit_cos);
}

#if defined(__AVX2__) && defined(__FMA__)
// The same two functions on 8 lanes, when we are built for AVX2 (XGRAD_NATIVE): the
// intrinsics of avx_mathfun.h with the fused sites written as _mm256_fmadd_ps, bit-identical
// to the scalar code.
inline __m256 log256_ps_v(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 invalid_mask = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OS);
  x = _mm256_max_ps(x, _mm256_set1_ps(kMinNormPos));
  __m256i imm0 = _mm256_srli_epi32(_mm256_castps_si256(x), 23);
  x = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(~0x7f800000)));
  x = _mm256_or_ps(x, _mm256_set1_ps(0.5f));
  imm0 = _mm256_sub_epi32(imm0, _mm256_set1_epi32(0x7f));
  __m256 e = _mm256_add_ps(_mm256_cvtepi32_ps(imm0), one);
  const __m256 mask = _mm256_cmp_ps(x, _mm256_set1_ps(kSqrtHf), _CMP_LT_OS);
  __m256 tmp = _mm256_and_ps(x, mask);
  x = _mm256_sub_ps(x, one);
  e = _mm256_sub_ps(e, _mm256_and_ps(one, mask));
  x = _mm256_add_ps(x, tmp);

  const __m256 z = _mm256_mul_ps(x, x);
  __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(kLogP0), x, _mm256_set1_ps(kLogP1));
  for (float p : {kLogP2, kLogP3, kLogP4, kLogP5, kLogP6, kLogP7, kLogP8})
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(p));
  y = _mm256_mul_ps(y, x);
  y = _mm256_fmadd_ps(y, z, _mm256_mul_ps(e, _mm256_set1_ps(kLogQ1)));
  y = _mm256_sub_ps(y, _mm256_mul_ps(z, _mm256_set1_ps(0.5f)));
  x = _mm256_fmadd_ps(e, _mm256_set1_ps(kLogQ2), _mm256_add_ps(x, y));
  return _mm256_or_ps(x, invalid_mask);
}

inline void sincos256_ps_v(__m256 x, __m256* s, __m256* c) {
  const __m256 sign_mask = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  __m256 sign_bit_sin = _mm256_and_ps(x, sign_mask);
  x = _mm256_andnot_ps(sign_mask, x);
  __m256 y = _mm256_mul_ps(x, _mm256_set1_ps(kFourOverPi));
  __m256i imm2 = _mm256_cvttps_epi32(y);
  imm2 = _mm256_add_epi32(imm2, _mm256_set1_epi32(1));
  imm2 = _mm256_and_si256(imm2, _mm256_set1_epi32(~1));
  y = _mm256_cvtepi32_ps(imm2);
  __m256i imm4 = imm2;
  const __m256i four = _mm256_set1_epi32(4), two = _mm256_set1_epi32(2);
  const __m256 swap_sign_bit_sin = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(imm2, four), 29));
  const __m256 poly_mask =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(imm2, two), _mm256_setzero_si256()));
  x = _mm256_fmadd_ps(y, _mm256_set1_ps(kMinusDP1), x);
  x = _mm256_fmadd_ps(y, _mm256_set1_ps(kMinusDP2), x);
  x = _mm256_fmadd_ps(y, _mm256_set1_ps(kMinusDP3), x);
  imm4 = _mm256_sub_epi32(imm4, two);
  const __m256 sign_bit_cos = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_andnot_si256(imm4, four), 29));
  sign_bit_sin = _mm256_xor_ps(sign_bit_sin, swap_sign_bit_sin);

  const __m256 z = _mm256_mul_ps(x, x);
  __m256 yc = _mm256_fmadd_ps(_mm256_set1_ps(kCosP0), z, _mm256_set1_ps(kCosP1));
  yc = _mm256_fmadd_ps(yc, z, _mm256_set1_ps(kCosP2));
  yc = _mm256_mul_ps(yc, z);
  const __m256 tmp = _mm256_mul_ps(z, _mm256_set1_ps(0.5f));
  yc = _mm256_fmsub_ps(yc, z, tmp);
  yc = _mm256_add_ps(yc, _mm256_set1_ps(1.0f));
  __m256 ys = _mm256_fmadd_ps(_mm256_set1_ps(kSinP0), z, _mm256_set1_ps(kSinP1));
  ys = _mm256_fmadd_ps(ys, z, _mm256_set1_ps(kSinP2));
  ys = _mm256_mul_ps(ys, z);
  ys = _mm256_fmadd_ps(ys, x, x);

  const __m256 ysin2 = _mm256_and_ps(poly_mask, ys);
  const __m256 ysin1 = _mm256_andnot_ps(poly_mask, yc);
  ys = _mm256_sub_ps(ys, ysin2);
  yc = _mm256_sub_ps(yc, ysin1);
  *s = _mm256_xor_ps(_mm256_add_ps(ysin1, ysin2), sign_bit_sin);
  *c = _mm256_xor_ps(_mm256_add_ps(yc, ys), sign_bit_cos);
}
#endif

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, normal_fill_16_AVX2
// data[0..16) holds uniforms in [0, 1); pairs (j, j + 8) become two normals.
inline void normal_fill_16_avx2(float* data, float mean, float stdv) {
  const float two_pi = static_cast<float>(2.0f * 3.14159265358979323846);
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 u1 = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(data));
  const __m256 u2 = _mm256_loadu_ps(data + 8);
  const __m256 radius = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log256_ps_v(u1)));
  const __m256 theta = _mm256_mul_ps(_mm256_set1_ps(two_pi), u2);
  __m256 sintheta, costheta;
  sincos256_ps_v(theta, &sintheta, &costheta);
  const __m256 std_v = _mm256_set1_ps(stdv), mean_v = _mm256_set1_ps(mean);
  _mm256_storeu_ps(data, _mm256_fmadd_ps(_mm256_mul_ps(radius, costheta), std_v, mean_v));
  _mm256_storeu_ps(data + 8, _mm256_fmadd_ps(_mm256_mul_ps(radius, sintheta), std_v, mean_v));
#else
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * log256_ps(u1));
    const float theta = two_pi * u2;
    float sintheta, costheta;
    sincos256_ps(theta, &sintheta, &costheta);
    const float n1 = radius * costheta;
    const float n2 = radius * sintheta;
    data[j] = std::fma(n1, stdv, mean);  // _mm256_fmadd_ps
    data[j + 8] = std::fma(n2, stdv, mean);
  }
#endif
}

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, normal_fill_16 (the double
// version; glibc's log/cos/sin, the last multiply-add fused).
inline void normal_fill_16(double* data, double mean, double stdv) {
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1 - data[j];
    const double u2 = data[j + 8];
    const double radius = std::sqrt(-2 * std::log(u1));
    const double theta = 2.0 * 3.14159265358979323846 * u2;
    data[j] = std::fma(radius * std::cos(theta), stdv, mean);  // radius * cos * std + mean
    data[j + 8] = std::fma(radius * std::sin(theta), stdv, mean);
  }
}

#if defined(__clang__)
#pragma float_control(pop)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

}  // namespace xgrad::kernels
