// random.cpp: xgrad::Generator, a bit-for-bit port of torch 1.13's CPU generator and of the
// CPU kernels that fill a contiguous tensor from it (see xgrad/random.h).
//
// Every function names the torch source it mirrors in a `// reference:` comment. Floating
// point here must round exactly like torch's compiled kernels, which live in
// aten/src/ATen/native/cpu/ and are built with -mavx2 -mfma and GCC's default
// -ffp-contract=fast on the AVX2 dispatch path that torch picks on an AVX2 CPU: GCC fuses
// some `a * b + c` into one FMA there. We spell every fused site as std::fma and forbid the
// compiler from fusing anything else (pragma below), so the result does not depend on our
// own compiler flags (-march=native or not). Which sites GCC fused is not visible in torch's
// source; each std::fma below was settled by comparing long streams with torch's (the
// stress_* fixtures fail if any of them is unfused).
//
// Float normal_ with n >= 16 follows torch's AVX2 kernel (log256_ps/sincos256_ps), which torch
// also runs under its AVX512 dispatch. A torch forced to ATEN_CPU_CAPABILITY=default uses
// std::log/cos/sin there instead and differs from us (and from itself) in the last bit.
#include "xgrad/random.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "ops/vec_math.h"
#include "xgrad/error.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace xgrad {

namespace {

// ---------------------------------------------------------------------------------------
// uniform_real: the raw bits -> [from, to) transform.
// reference: aten/src/ATen/core/TransformationHelper.h, transformation::uniform_real
//   x = (val & MASK) * DIVISOR; return x * (to - from) + from;   (fused on the AVX2 path)
// MASK keeps digits(T) bits: 24 of a 32-bit draw for float, 53 of a 64-bit draw for double.
inline float uniform_real_float(uint32_t val, float from, float to) {
  float x = static_cast<float>(val & ((1u << 24) - 1)) * (1.0f / static_cast<float>(1u << 24));
  return std::fma(x, to - from, from);
}
inline double uniform_real_double(uint64_t val, double from, double to) {
  double x =
      static_cast<double>(val & ((uint64_t{1} << 53) - 1)) * (1.0 / static_cast<double>(uint64_t{1} << 53));
  return std::fma(x, to - from, from);
}

// Two consecutive 32-bit draws as torch's random64(): the first one is the high word.
inline uint64_t join64(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

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
// intrinsics of avx_mathfun.h with the fused sites written as _mm256_fmadd_ps. Four times
// faster than the scalar code, and bit-identical to it.
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
void normal_fill_16_avx2(float* data, float mean, float stdv) {
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
void normal_fill_16(double* data, double mean, double stdv) {
  for (int j = 0; j < 8; ++j) {
    const double u1 = 1 - data[j];
    const double u2 = data[j + 8];
    const double radius = std::sqrt(-2 * std::log(u1));
    const double theta = 2.0 * 3.14159265358979323846 * u2;
    data[j] = std::fma(radius * std::cos(theta), stdv, mean);  // radius * cos * std + mean
    data[j + 8] = std::fma(radius * std::sin(theta), stdv, mean);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The engine.
// reference: aten/src/ATen/core/MT19937RNGEngine.h, mt19937_engine

Generator::Generator(uint64_t seed) { seed_engine(seed); }

Generator::Generator(const Generator& other) {
  std::lock_guard<std::mutex> lock(other.mutex_);
  engine_ = other.engine_;
  next_double_normal_ = other.next_double_normal_;
  next_float_normal_ = other.next_float_normal_;
}

Generator& Generator::operator=(const Generator& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mutex_, other.mutex_);
  engine_ = other.engine_;
  next_double_normal_ = other.next_double_normal_;
  next_float_normal_ = other.next_float_normal_;
  return *this;
}

// reference: mt19937_engine::init_with_uint32; CPUGeneratorImpl::set_current_seed also
// drops the cached normal samples.
void Generator::seed_engine(uint64_t seed) {
  engine_.seed = seed;
  engine_.seeded = true;
  engine_.state[0] = static_cast<uint32_t>(seed & 0xffffffffu);
  for (int j = 1; j < kN; ++j) {
    const uint32_t prev = engine_.state[j - 1];
    engine_.state[j] = 1812433253u * (prev ^ (prev >> 30)) + static_cast<uint32_t>(j);
  }
  engine_.left = 1;
  engine_.next = 0;
  next_double_normal_.reset();
  next_float_normal_.reset();
}

// reference: mt19937_engine::next_state. Written as branch-free loops over xsimd batches of
// independent words (full-width under AVX-512, where the compiler's own vectorisation stops
// at 256 bits): in the first loop every read is ahead of the write; in the second,
// s[k + kM - kN] was written kN - kM = 227 words earlier.
// GCC 12 warns that _mm512_srli_epi32's _mm512_undefined_epi32() operand "is used
// uninitialized" (a false positive inside the intrinsic, as in optim/src/adam.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
void Generator::twist() {
  constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
  uint32_t* s = engine_.state.data();
  engine_.left = kN;
  engine_.next = 0;
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

using vec::mt19937_temper;  // ops/vec_math.h: one tempering for the scalar and batch paths

// n consecutive draw32() results (or, !kTempered, the state words they temper), a whole block
// of state at a time. draw32() keeps state[next .. next + left - 2] (left - 1 words) before
// its next twist; after a twist it returns state[0] with left = kN, which is what
// left = kN + 1, next = 0 gives here.
template <bool kTempered>
void Generator::draw_block(uint32_t* out, int64_t n) {
  while (n > 0) {
    if (engine_.left == 1) {
      twist();
      engine_.left = kN + 1;
    }
    const int64_t take = std::min<int64_t>(n, engine_.left - 1);
    const uint32_t* s = engine_.state.data() + engine_.next;
    if constexpr (kTempered) {
      for (int64_t i = 0; i < take; ++i) out[i] = mt19937_temper(s[i]);
    } else {
      std::copy(s, s + take, out);
    }
    engine_.next += static_cast<uint32_t>(take);
    engine_.left -= static_cast<int>(take);
    out += take;
    n -= take;
  }
}

// reference: mt19937_engine::operator()
uint32_t Generator::draw32() {
  if (--engine_.left == 0) twist();
  return mt19937_temper(engine_.state[engine_.next++]);
}

// reference: aten/src/ATen/CPUGeneratorImpl.cpp, CPUGeneratorImpl::random64 and
// detail::make64BitsFrom32Bits(hi, lo): the first draw is the high word.
uint64_t Generator::draw64() {
  const uint32_t hi = draw32();
  const uint32_t lo = draw32();
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Calls f(i0, c, words) for the elements [i0, i0 + c) of an n-element fill, with words[] the
// c * kPerElement consecutive draws they take (1 for float, 2 for double / bernoulli): the
// bulk fills are this loop around their element formula. Callers hold mutex_.
template <int kPerElement, bool kTempered, class F>
void Generator::for_draw_blocks(int64_t n, F&& f) {
  constexpr int64_t kChunk = kBlockDraws / kPerElement;
  uint32_t words[kBlockDraws];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t c = std::min<int64_t>(kChunk, n - i0);
    draw_block<kTempered>(words, kPerElement * c);
    f(i0, c, static_cast<const uint32_t*>(words));
  }
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_engine(seed);
}

uint64_t Generator::initial_seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_.seed;
}

uint32_t Generator::random() {
  std::lock_guard<std::mutex> lock(mutex_);
  return draw32();
}

uint64_t Generator::random64() {
  std::lock_guard<std::mutex> lock(mutex_);
  return draw64();
}

// reference: aten/src/ATen/core/DistributionsHelper.h, normal_distribution<double>:
// Box-Muller on two 53-bit uniforms; returns r*cos and caches r*sin for the next call.
// torch 1.13 takes log(1 - u2); later versions switched to log1p(-u2), which rounds
// differently.
double Generator::normal_sample() {
  if (next_double_normal_) {
    const double cached = *next_double_normal_;
    next_double_normal_.reset();
    return cached;
  }
  const double u1 = uniform_real_double(draw64(), 0.0, 1.0);
  const double u2 = uniform_real_double(draw64(), 0.0, 1.0);
  const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * 3.14159265358979323846 * u1;
  next_double_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

// ---------------------------------------------------------------------------------------
// The fills. Each locks mutex_ once and then draws with the unlocked draw32/draw64.

namespace {
void check_fill(const char* op, const void* out, int64_t n) {
  if (n < 0) fail(op, "negative element count ", n);
  if (n > 0 && out == nullptr) fail(op, "null output buffer for ", n, " elements");
}

template <class T>
void check_uniform_range(double from, double to) {
  constexpr double lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  if (!(from >= lo && from <= hi) || !(to >= lo && to <= hi))
    fail("uniform_", "from=", from, " and to=", to, " must be finite values of the dtype");
  if (!(from <= to))
    fail("uniform_", "expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (!(to - from <= hi)) fail("uniform_", "expects to-from <= dtype max, but found to-from=", to - from);
}
}  // namespace

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, uniform_kernel (one 32-bit
// draw per float, serially in memory order) and aten/src/ATen/native/DistributionTemplates.h,
// uniform_impl_ (the range checks).
void Generator::uniform(float* out, int64_t n, double from, double to) {
  check_fill("uniform_", out, n);
  check_uniform_range<float>(from, to);
  const float f = static_cast<float>(from), t = static_cast<float>(to);
  std::lock_guard<std::mutex> lock(mutex_);
  for_draw_blocks<1>(n, [&](int64_t i0, int64_t c, const uint32_t* w) {
    for (int64_t i = 0; i < c; ++i) out[i0 + i] = uniform_real_float(w[i], f, t);
  });
}

// Same kernel for double: one 64-bit draw (two mt19937 words) per element.
void Generator::uniform(double* out, int64_t n, double from, double to) {
  check_fill("uniform_", out, n);
  check_uniform_range<double>(from, to);
  std::lock_guard<std::mutex> lock(mutex_);
  for_draw_blocks<2>(n, [&](int64_t i0, int64_t c, const uint32_t* w) {
    for (int64_t i = 0; i < c; ++i)
      out[i0 + i] = uniform_real_double(join64(w[2 * i], w[2 * i + 1]), from, to);
  });
}

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, normal_kernel:
//   n >= 16 (contiguous): normal_fill_AVX2 -- n uniforms, Box-Muller on each block of 16
//     (pairs j, j+8); if n % 16 != 0 the last 16 elements are redrawn (16 fresh uniforms)
//     and recomputed, overlapping the previous block. The generator's cache is untouched.
//   n < 16: normal_distribution<double> per element (uses and refills the cache), cast.
void Generator::normal(float* out, int64_t n, double mean, double stdv) {
  check_fill("normal_", out, n);
  if (!(stdv >= 0.0)) fail("normal_", "expects std >= 0.0, but found std ", stdv);
  std::lock_guard<std::mutex> lock(mutex_);
  if (n >= 16) {
    const float m = static_cast<float>(mean), s = static_cast<float>(stdv);
    for_draw_blocks<1>(n, [&](int64_t i0, int64_t c, const uint32_t* w) {
      for (int64_t i = 0; i < c; ++i) out[i0 + i] = uniform_real_float(w[i], 0.0f, 1.0f);
    });
    for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16_avx2(out + i, m, s);
    if (n % 16 != 0) {
      float* tail = out + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = uniform_real_float(draw32(), 0.0f, 1.0f);
      normal_fill_16_avx2(tail, m, s);
    }
  } else {
    // transformation::normal: val * std + mean, in double
    for (int64_t i = 0; i < n; ++i) {
      out[i] = static_cast<float>(std::fma(normal_sample(), stdv, mean));
    }
  }
}

// Same kernel for double: normal_fill<double> for n >= 16, otherwise as above.
void Generator::normal(double* out, int64_t n, double mean, double stdv) {
  check_fill("normal_", out, n);
  if (!(stdv >= 0.0)) fail("normal_", "expects std >= 0.0, but found std ", stdv);
  std::lock_guard<std::mutex> lock(mutex_);
  if (n >= 16) {
    for_draw_blocks<2>(n, [&](int64_t i0, int64_t c, const uint32_t* w) {
      for (int64_t i = 0; i < c; ++i)
        out[i0 + i] = uniform_real_double(join64(w[2 * i], w[2 * i + 1]), 0.0, 1.0);
    });
    for (int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(out + i, mean, stdv);
    if (n % 16 != 0) {
      double* tail = out + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = uniform_real_double(draw64(), 0.0, 1.0);
      normal_fill_16(tail, mean, stdv);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::fma(normal_sample(), stdv, mean);
  }
}

// reference: aten/src/ATen/native/cpu/DistributionKernels.cpp, bernoulli_scalar_kernel
// (the !AT_MKL_ENABLED() branch, which is what Debian's MKL-less torch runs) ->
// DistributionTemplates.h, bernoulli_kernel(self, double p): per element
// bernoulli_distribution<double>, i.e. one 53-bit uniform u (two draws, see draw64) and the
// value (u < p). u = x * 2^-53 exactly for the 53-bit integer x, so u < p is x < ceil(p * 2^53):
// an integer compare (vec::bernoulli_keep, on batches). The elements read their two draws
// straight from the state words between twists; an element whose pair straddles a twist
// takes its two words through draw_block.
template <class T>
void Generator::bernoulli_fill(T* out, int64_t n, double p) {
  const uint64_t threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));  // <= 2^53
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t i = 0; i < n;) {
    if (engine_.left == 1) {  // as draw_block: the state is used up, twist it
      twist();
      engine_.left = kN + 1;
    }
    // draw32() has left - 1 words before its next twist, from state[next]
    const int64_t pairs = std::min<int64_t>(n - i, (engine_.left - 1) / 2);
    if (pairs == 0) {
      uint32_t w[2];
      draw_block<false>(w, 2);
      vec::bernoulli_keep(w, 1, threshold, out + i);
      ++i;
      continue;
    }
    vec::bernoulli_keep(engine_.state.data() + engine_.next, pairs, threshold, out + i);
    engine_.next += static_cast<uint32_t>(2 * pairs);
    engine_.left -= static_cast<int>(2 * pairs);
    i += pairs;
  }
}

void Generator::bernoulli(float* out, int64_t n, double p) {
  check_fill("bernoulli_", out, n);
  if (!(p >= 0.0 && p <= 1.0)) fail("bernoulli_", "expects p to be in [0, 1], but got p=", p);
  bernoulli_fill(out, n, p);
}

void Generator::bernoulli(double* out, int64_t n, double p) {
  check_fill("bernoulli_", out, n);
  if (!(p >= 0.0 && p <= 1.0)) fail("bernoulli_", "expects p to be in [0, 1], but got p=", p);
  bernoulli_fill(out, n, p);
}

void Generator::bernoulli(bool* out, int64_t n, double p) {
  check_fill("bernoulli_", out, n);
  if (!(p >= 0.0 && p <= 1.0)) fail("bernoulli_", "expects p to be in [0, 1], but got p=", p);
  bernoulli_fill(out, n, p);
}

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, random_from_to_kernel with
// DistributionsHelper.h, uniform_int_from_to_distribution<int64_t>: range = high - low;
// a 64-bit draw when range >= 2^32, else a 32-bit one; value = draw % range + low.
void Generator::random_int(int64_t* out, int64_t n, int64_t low, int64_t high) {
  check_fill("random_", out, n);
  if (!(low < high))
    fail("random_", "expects 'from' to be less than 'to', but got from=", low, " >= to=", high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  std::lock_guard<std::mutex> lock(mutex_);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t v = range >= (uint64_t{1} << 32) ? draw64() : draw32();
    out[i] = static_cast<int64_t>(v % range + static_cast<uint64_t>(low));
  }
}

// ---------------------------------------------------------------------------------------
// State, in torch's byte layout.
// reference: aten/src/ATen/CPUGeneratorImpl.cpp, CPUGeneratorImplStateLegacy /
// CPUGeneratorImplState and get_state / set_state. Offsets (little-endian, x86-64 padding):
//   0 uint64 the_initial_seed | 8 int32 left | 12 int32 seeded | 16 uint64 next
//   24 uint64 state[624] | 5016 double normal_x | 5024 double normal_y (cached double sample)
//   5032 double normal_rho | 5040 int32 normal_is_valid | 5044 pad
//   5048 float next_float_normal_sample | 5052 bool valid | 5053 pad -> 5056
namespace {
constexpr size_t kOffSeed = 0, kOffLeft = 8, kOffSeeded = 12, kOffNext = 16, kOffState = 24,
                 kOffNormalY = 5024, kOffNormalValid = 5040, kOffFloatNormal = 5048, kOffFloatValid = 5052;
template <class T>
void put(std::vector<uint8_t>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}
template <class T>
T get(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}
static_assert(std::endian::native == std::endian::little, "torch's state layout is little-endian");
}  // namespace

std::vector<uint8_t> Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint8_t> b(kStateSize, 0);
  put<uint64_t>(b, kOffSeed, engine_.seed);
  put<int32_t>(b, kOffLeft, engine_.left);
  put<int32_t>(b, kOffSeeded, engine_.seeded ? 1 : 0);
  put<uint64_t>(b, kOffNext, engine_.next);
  for (int k = 0; k < kN; ++k) put<uint64_t>(b, kOffState + 8 * k, engine_.state[k]);
  if (next_double_normal_) {
    put<double>(b, kOffNormalY, *next_double_normal_);
    put<int32_t>(b, kOffNormalValid, 1);
  }
  if (next_float_normal_) {
    put<float>(b, kOffFloatNormal, *next_float_normal_);
    put<uint8_t>(b, kOffFloatValid, 1);
  }
  return b;
}

// torch also accepts the 5048-byte legacy layout; we take only the current one.
void Generator::set_state(const std::vector<uint8_t>& b) {
  if (b.size() != kStateSize)
    fail("set_state", "expected a generator state of ", kStateSize, " bytes, got ", b.size());
  Engine e;
  e.seed = get<uint64_t>(b, kOffSeed);
  e.left = get<int32_t>(b, kOffLeft);
  e.seeded = get<int32_t>(b, kOffSeeded) != 0;
  const uint64_t next = get<uint64_t>(b, kOffNext);
  // reference: mt19937_engine::is_valid, plus next + left <= 625 so that the left - 1 draws
  // before the next twist stay inside state[] (torch would read past it).
  if (!e.seeded || e.left < 1 || e.left > kN || next > static_cast<uint64_t>(kN) ||
      next + static_cast<uint64_t>(e.left) > static_cast<uint64_t>(kN) + 1)
    fail("set_state", "invalid mt19937 state (seeded=", e.seeded, ", left=", e.left, ", next=", next, ")");
  e.next = static_cast<uint32_t>(next);
  for (int k = 0; k < kN; ++k) {
    e.state[k] = static_cast<uint32_t>(get<uint64_t>(b, kOffState + 8 * k));
  }
  std::optional<double> dn;
  if (get<int32_t>(b, kOffNormalValid) != 0) dn = get<double>(b, kOffNormalY);
  std::optional<float> fn;
  if (get<uint8_t>(b, kOffFloatValid) != 0) fn = get<float>(b, kOffFloatNormal);

  std::lock_guard<std::mutex> lock(mutex_);
  engine_ = e;
  next_double_normal_ = dn;
  next_float_normal_ = fn;
}

// ---------------------------------------------------------------------------------------

Generator& default_generator() {
  static Generator gen;  // initialised once, thread-safely (C++11 magic statics)
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace xgrad
