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

#include "random_kernel.h"  // its floating-point loops turn contraction off themselves
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

// reference: mt19937_engine::next_state (kernels::mt19937_twist)
void Generator::twist() {
  uint32_t* s = engine_.state.data();
  engine_.left = kN;
  engine_.next = 0;
  kernels::mt19937_twist<kN, kM>(s);
}

using kernels::mt19937_temper;  // one tempering for the scalar and batch paths

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
    for (int64_t i = 0; i + 16 <= n; i += 16) kernels::normal_fill_16_avx2(out + i, m, s);
    if (n % 16 != 0) {
      float* tail = out + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = uniform_real_float(draw32(), 0.0f, 1.0f);
      kernels::normal_fill_16_avx2(tail, m, s);
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
    for (int64_t i = 0; i + 16 <= n; i += 16) kernels::normal_fill_16(out + i, mean, stdv);
    if (n % 16 != 0) {
      double* tail = out + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = uniform_real_double(draw64(), 0.0, 1.0);
      kernels::normal_fill_16(tail, mean, stdv);
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
// an integer compare (kernels::bernoulli_keep, on batches). The elements read their two draws
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
      kernels::bernoulli_keep(w, 1, threshold, out + i);
      ++i;
      continue;
    }
    kernels::bernoulli_keep(engine_.state.data() + engine_.next, pairs, threshold, out + i);
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
