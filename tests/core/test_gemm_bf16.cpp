// tests/core/test_gemm_bf16.cpp: the bfloat16 GEMM (xgrad/bf16_gemm.h; core/src/kernels/
// gemm_bf16_kernel.h, gemm_bf16_amx.h), bf16 x bf16 -> float32, on its paths:
//   - vdpbf16ps (where the build has AVX512_BF16) against its portable twin, bit for bit, on
//     shapes with edge rows, columns and pairs (k odd: the last pair's upper half is zero),
//     k across the k panel (512) and n across the column panel (384), operands stored
//     transposed, alpha / beta / bias, and on operands full of subnormals, infinities, NaNs
//     and products that underflow;
//   - AMX tiles (tdpbf16ps, where the CPU grants them) against their portable twin, the same
//     way (this file's author had no AMX machine: there these tests are the kernel's check);
//   - every path against a float64 triple loop within the float32 rounding bound below;
//   - the same bits at 1, 2 and 3 threads on each threaded path.
// The bound: every step of the chain (one fused multiply-add per k, exact products; two
// roundings per k panel in the epilogue, two for beta * c, one for the bias) rounds once, so
//   |got - ref| <= (k + 2 * panels + 3) * 2^-24 * (|alpha| sum_k |a b| + |beta c0| + |bias|).
//
// Adding a case: a row in kShapes (m, n, k, A stored transposed, B stored transposed).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_shape.h"
#include "thread_count.h"
#include "xgrad/bf16_gemm.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

const Shape3 kShapes[] = {
    {1, 1, 1, false, false},     {1, 1, 2, true, true},        {3, 5, 2, true, true},
    {13, 31, 7, false, true},    {13, 13, 13, true, false},    {31, 33, 31, false, false},
    {33, 31, 33, true, true},    {14, 32, 512, false, false},  {15, 33, 513, true, false},
    {29, 65, 1025, false, true}, {40, 385, 33, false, false},  {1, 400, 31, false, true},
    {2, 769, 300, true, true},   {97, 200, 1031, true, false}, {200, 130, 160, false, true},
};

// A matrix of bfloat16 bits: values of a normal distribution rounded to bfloat16, with
// every fifth a small integer (exact products and sums, where any misplaced pair shows).
std::vector<uint16_t> random_bf16(int64_t count, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const float v = i % 5 == 0 ? float(int(g() % 9) - 4) : nd(g);
    out[i] = static_cast<uint16_t>(
        (std::bit_cast<uint32_t>(v) + 0x7fffu + ((std::bit_cast<uint32_t>(v) >> 16) & 1u)) >> 16);
  }
  return out;
}

double bf16_value(uint16_t x) { return double(std::bit_cast<float>(uint32_t(x) << 16)); }

struct Case {
  Shape3 s;
  float alpha, beta;
  bool bias;
  std::vector<uint16_t> a, b;
  std::vector<float> c0, vbias;
  int64_t lda, ldb, ldc;

  Case(const Shape3& shape, float al, float be, bool with_bias, uint32_t seed)
      : s(shape), alpha(al), beta(be), bias(with_bias) {
    std::mt19937 g(seed);
    // stored with padding past each row, so that a kernel reading ld wrong shows
    lda = (s.ta ? s.m : s.k) + 3;
    ldb = (s.tb ? s.k : s.n) + 5;
    ldc = s.n + 2;
    a = random_bf16((s.ta ? s.k : s.m) * lda, g);
    b = random_bf16((s.tb ? s.n : s.k) * ldb, g);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    c0.resize(static_cast<std::size_t>(s.m * ldc));
    for (float& v : c0) v = nd(g);
    if (bias) {
      vbias.resize(static_cast<std::size_t>(s.n));
      for (float& v : vbias) v = nd(g);
    }
  }
  uint16_t at_a(int64_t i, int64_t p) const { return s.ta ? a[p * lda + i] : a[i * lda + p]; }
  uint16_t at_b(int64_t p, int64_t j) const { return s.tb ? b[j * ldb + p] : b[p * ldb + j]; }

  std::vector<float> run(Bf16GemmPath path) const {
    std::vector<float> c = c0;
    gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
              bias ? vbias.data() : nullptr, path);
    return c;
  }

  // every element (and C's padding, which must stay untouched) within the bound of the header
  void expect_near_reference(const std::vector<float>& c, const char* path) const {
    const double u = std::ldexp(1.0, -24), panels = double((s.k + 511) / 512);
    int bad = 0;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double dot = 0.0, mag = 0.0;
        for (int64_t p = 0; p < s.k; ++p) {
          const double t = bf16_value(at_a(i, p)) * bf16_value(at_b(p, j));
          dot += t;
          mag += std::fabs(t);
        }
        const double c_in = c0[i * ldc + j];
        double ref = double(alpha) * dot, scale = std::fabs(alpha) * mag;
        if (bias) {
          ref += vbias[j];
          scale += std::fabs(vbias[j]);
        } else if (beta != 0.0f) {
          ref += double(beta) * c_in;
          scale += std::fabs(beta * c_in);
        }
        const double tol = (double(s.k) + 2 * panels + 3) * u * scale + 1e-30;
        if (!(std::fabs(c[i * ldc + j] - ref) <= tol) && ++bad <= 3)
          ADD_FAILURE() << path << " " << s << " element (" << i << ", " << j << "): " << c[i * ldc + j]
                        << " vs " << ref << " (tolerance " << tol << ")";
      }
      for (int64_t j = s.n; j < ldc; ++j)
        if (std::bit_cast<uint32_t>(c[i * ldc + j]) != std::bit_cast<uint32_t>(c0[i * ldc + j]) && ++bad <= 3)
          ADD_FAILURE() << path << " " << s << " wrote C's padding at (" << i << ", " << j << ")";
    }
    EXPECT_EQ(bad, 0) << path << " " << s;
  }
};

// Whether the vdpbf16ps / AMX paths run here (whether or not the ops use them).
bool has_dpbf16() { return bf16_gemm_has_path(Bf16GemmPath::Dpbf16); }
bool has_amx() { return bf16_gemm_has_path(Bf16GemmPath::Amx); }

// The first differing element, as a message, or "" when a and b have the same bits. Two NaNs
// match whatever their payloads unless `payloads`: the epilogue's adds do not pin which NaN of
// two comes out (vdpbf16ps itself does: with one k panel, no beta and no bias, C is its result).
std::string first_difference(const std::vector<float>& a, const std::vector<float>& b,
                             bool payloads = false) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]) &&
        (payloads || !(std::isnan(a[i]) && std::isnan(b[i]))))
      return "at " + std::to_string(i) + ": " + std::to_string(std::bit_cast<uint32_t>(a[i])) + " vs " +
             std::to_string(std::bit_cast<uint32_t>(b[i]));
  return "";
}

// (alpha, beta, bias) variants: plain, scaled and accumulating, and the linear layer's bias
struct Epilogue {
  float alpha, beta;
  bool bias;
};
const Epilogue kEpilogues[] = {
    {1.0f, 0.0f, false}, {0.75f, 1.5f, false}, {1.0f, 1.0f, false}, {1.0f, 0.0f, true}, {-2.0f, 0.0f, true}};

class GemmBf16 : public ::testing::TestWithParam<Shape3> {};

TEST_P(GemmBf16, EveryPathIsNearTheFloat64Reference) {
  uint32_t seed = 1;
  for (const Epilogue& e : kEpilogues) {
    const Case c(GetParam(), e.alpha, e.beta, e.bias, seed++);
    c.expect_near_reference(c.run(Bf16GemmPath::Dpbf16Portable), "portable");
    c.expect_near_reference(c.run(Bf16GemmPath::Widened), "widened");
    c.expect_near_reference(c.run(Bf16GemmPath::Build), "build");
    c.expect_near_reference(c.run(Bf16GemmPath::AmxPortable), "amx portable");
    if (has_dpbf16()) c.expect_near_reference(c.run(Bf16GemmPath::Dpbf16), "dpbf16");
    if (has_amx()) c.expect_near_reference(c.run(Bf16GemmPath::Amx), "amx");
  }
}

// The threaded paths of this build: the ops' path, widened, and vdpbf16ps where it runs.
std::vector<Bf16GemmPath> threaded_paths() {
  std::vector<Bf16GemmPath> paths = {Bf16GemmPath::Build, Bf16GemmPath::Widened};
  if (has_dpbf16()) paths.push_back(Bf16GemmPath::Dpbf16);
  if (has_amx()) paths.push_back(Bf16GemmPath::Amx);
  return paths;
}

TEST_P(GemmBf16, Dpbf16HasTheTwinsBits) {
  if (!has_dpbf16()) GTEST_SKIP() << "this build has no AVX512_BF16 (" << bf16_gemm_backend() << ")";
  uint32_t seed = 11;
  for (const Epilogue& e : kEpilogues) {
    const Case c(GetParam(), e.alpha, e.beta, e.bias, seed++);
    const std::string diff =
        first_difference(c.run(Bf16GemmPath::Dpbf16), c.run(Bf16GemmPath::Dpbf16Portable));
    EXPECT_EQ(diff, "") << GetParam() << " alpha " << e.alpha << " beta " << e.beta << " bias " << e.bias;
  }
}

TEST_P(GemmBf16, AmxHasTheTwinsBits) {
  if (!has_amx()) GTEST_SKIP() << "no AMX-BF16 tiles here (not measured here)";
  uint32_t seed = 31;
  for (const Epilogue& e : kEpilogues) {
    const Case c(GetParam(), e.alpha, e.beta, e.bias, seed++);
    EXPECT_EQ(first_difference(c.run(Bf16GemmPath::Amx), c.run(Bf16GemmPath::AmxPortable)), "")
        << GetParam() << " alpha " << e.alpha << " beta " << e.beta << " bias " << e.bias;
  }
}

TEST_P(GemmBf16, SameBitsAtOneTwoAndThreeThreads) {
  const Case c(GetParam(), 1.0f, 0.0f, true, 21);
  for (Bf16GemmPath path : threaded_paths()) {
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
      testing::ThreadCount tc(threads);
      outs.push_back(c.run(path));
    }
    EXPECT_EQ(first_difference(outs[0], outs[1]), "") << GetParam() << " at 2 threads";
    EXPECT_EQ(first_difference(outs[0], outs[2]), "") << GetParam() << " at 3 threads";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape3>& info) {
                           std::ostringstream os;
                           os << info.param;
                           return os.str();
                         });

// A large enough product to split over threads (2 m n k >= 4e6 flops), on each threaded path.
TEST(GemmBf16Threads, ASplitProductHasTheSameBitsAtAnyThreadCount) {
  for (const Shape3& s : {Shape3{300, 400, 700, false, true}, Shape3{1, 5000, 800, false, true},
                          Shape3{130, 800, 1100, true, false}}) {
    const Case c(s, 1.0f, 0.0f, false, 5);
    for (Bf16GemmPath path : threaded_paths()) {
      std::vector<std::vector<float>> outs;
      for (int threads : {1, 2, 3}) {
        testing::ThreadCount tc(threads);
        outs.push_back(c.run(path));
      }
      EXPECT_EQ(first_difference(outs[0], outs[1]), "") << s << " at 2 threads";
      EXPECT_EQ(first_difference(outs[0], outs[2]), "") << s << " at 3 threads";
    }
  }
  // the split vdpbf16ps product against its (one-thread) twin
  if (has_dpbf16()) {
    const Case c(Shape3{300, 400, 700, false, true}, 1.0f, 0.0f, false, 5);
    testing::ThreadCount tc(2);
    EXPECT_EQ(first_difference(c.run(Bf16GemmPath::Dpbf16), c.run(Bf16GemmPath::Dpbf16Portable)), "");
  }
}

// Operands drawn from every class of bfloat16: zeros, subnormals (read as zero), the smallest
// and largest normals (products that underflow below float32's normals, flushed, or
// overflow to inf), infinities, quiet and signalling NaNs with payloads, both signs. The
// vdpbf16ps path and the twin agree bit for bit (a NaN result is NaN in both).
TEST(GemmBf16Special, EveryValueClassHasTheTwinsBits) {
  if (!has_dpbf16()) GTEST_SKIP() << "this build has no AVX512_BF16 (" << bf16_gemm_backend() << ")";
  const uint16_t classes[] = {0x0000, 0x0001, 0x007f, 0x0080, 0x0081, 0x1f80, 0x2000, 0x3f80, 0x3f81,
                              0x4040, 0x5f80, 0x7f7f, 0x7f80, 0x7f81, 0x7fc0, 0x7fc5, 0x7fbf, 0x20ff};
  std::mt19937 g(3);
  for (const Shape3& s : {Shape3{29, 45, 37, false, true}, Shape3{17, 70, 530, true, false}}) {
    for (int density : {3, 40}) {  // one special value in 3 (NaN nearly everywhere), or in 40
      Case c(s, 1.0f, 0.0f, false, 9);
      for (auto* v : {&c.a, &c.b})
        for (uint16_t& x : *v)
          if (g() % density == 0) x = classes[g() % std::size(classes)] | (g() % 2 ? 0x8000 : 0);
      EXPECT_EQ(
          first_difference(c.run(Bf16GemmPath::Dpbf16), c.run(Bf16GemmPath::Dpbf16Portable), s.k <= 512), "")
          << s << " one in " << density;
    }
  }
}

// vdpbf16ps's rounding, pinned on single pairs through the twin (and the SIMD path where it
// runs): the pair's upper half goes first, the result is flushed when tiny.
TEST(GemmBf16Special, PairOrderAndFlushToZero) {
  auto dot = [](std::vector<uint16_t> a, std::vector<uint16_t> b, Bf16GemmPath path) {
    float c = 0.0f;
    gemm_bf16(false, true, 1, 1, int64_t(a.size()), 1.0f, a.data(), int64_t(a.size()), b.data(),
              int64_t(b.size()), 0.0f, &c, 1, nullptr, path);
    return c;
  };
  const uint16_t two_m63 = 0x2000, two_m75 = 0x1a00, one = 0x3f80, two_m24 = 0x3380;
  std::vector<Bf16GemmPath> paths = {Bf16GemmPath::Dpbf16Portable};
  if (has_dpbf16()) paths.push_back(Bf16GemmPath::Dpbf16);
  for (Bf16GemmPath path : paths) {
    // upper product 2^-126 first, then -2^-150: 2^-126 - 2^-150 is tiny (it has 24 bits below
    // 2^-126), so the result is flushed to zero; lower first would keep 2^-126
    EXPECT_EQ(dot({two_m75, two_m63}, {two_m75 | 0x8000, two_m63}, path), 0.0f);
    // after a first pair giving 1, products 2^-24 (lower) and 1.5 * 2^-24 (upper): upper first,
    // 1 + 1.5 * 2^-24 -> 1 + 2^-23, then + 2^-24 ties to even at 1 + 2^-22; lower first would
    // give 1 (a tie), then 1 + 2^-23
    EXPECT_EQ(dot({one, 0, two_m24, 0x33c0}, {one, 0, one, one}, path), 1.0f + 0x1p-22f);
    EXPECT_EQ(dot({one, 0, 0x33c0, two_m24}, {one, 0, one, one}, path), 1.0f + 0x1p-23f);
    // a subnormal operand reads as zero: 2^-127 * 2^100 would be 2^-27
    EXPECT_EQ(dot({0x0040}, {0x7180}, path), 0.0f);
    // products that underflow float32's normals are flushed: 2^-70 * 2^-70 = 2^-140
    EXPECT_EQ(dot({0x1c80}, {0x1c80}, path), 0.0f);
  }
}

TEST(GemmBf16Errors, TheBackendNamesTheBf16Path) {
  EXPECT_NE(gemm_backend().find("bfloat16 " + bf16_gemm_backend()), std::string::npos) << gemm_backend();
  EXPECT_TRUE(bf16_gemm_backend() == "avx512_bf16 vdpbf16ps 14x32" ||
              bf16_gemm_backend() == "amx_bf16 tdpbf16ps 32x32" ||
              bf16_gemm_backend().rfind("widened to float32 FMAs ", 0) == 0)
      << bf16_gemm_backend();
}

// tdpbf16ps's documented order, pinned on its twin (and on the tiles where they run): per 32 k,
// the even and the odd k in two chains from zero, then their sum added. Products 1, 2^-24,
// 2^-24, 2^-24 (k = 0..3): even 1 + 2^-24 -> 1 (a tie, to even), odd 2^-23, so 1 + 2^-23; the
// vdpbf16ps order (pairs in turn, upper half first) gives 1, and the exact sum would round to
// 1 + 2^-22.
TEST(GemmBf16Special, AmxEvenAndOddChains) {
  const uint16_t one = 0x3f80, two_m24 = 0x3380;
  const std::vector<uint16_t> a = {one, two_m24, two_m24, two_m24}, b = {one, one, one, one};
  auto dot = [&](Bf16GemmPath path) {
    float c = 0.0f;
    gemm_bf16(false, true, 1, 1, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, &c, 1, nullptr, path);
    return c;
  };
  EXPECT_EQ(dot(Bf16GemmPath::AmxPortable), 1.0f + 0x1p-23f);
  EXPECT_EQ(dot(Bf16GemmPath::Dpbf16Portable), 1.0f);
  if (has_amx()) EXPECT_EQ(dot(Bf16GemmPath::Amx), 1.0f + 0x1p-23f);
}

TEST(GemmBf16Errors, BadArgumentsThrow) {
  std::vector<uint16_t> a(16), b(16);
  std::vector<float> c(16);
  EXPECT_THROW(gemm_bf16(false, false, 2, 2, 2, 1.0f, a.data(), 1, b.data(), 2, 0.0f, c.data(), 2), Error);
  EXPECT_THROW(gemm_bf16(false, false, -1, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2), Error);
  if (!has_dpbf16())
    EXPECT_THROW(gemm_bf16(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2, nullptr,
                           Bf16GemmPath::Dpbf16),
                 Error);
  if (!has_amx())
    EXPECT_THROW(gemm_bf16(false, false, 2, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2, nullptr,
                           Bf16GemmPath::Amx),
                 Error);
}

}  // namespace
}  // namespace xgrad
