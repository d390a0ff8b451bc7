// tests/core/test_bf16.cpp: bfloat16 as a dtype: creation, conversions both ways (bit-exact
// against torch 1.13, tests/fixtures/bf16.txt from gen_bf16.py), every float32 pattern through
// the SIMD loop and the scalar rule, item, printing (bf16_print.txt), copies and views, and
// the ops that refuse bfloat16 naming themselves.
//
// Contiguous float32 -> bfloat16 runs the kernel floor's array loop (vcvtneps2bf16 where the
// build has AVX512_BF16); a strided source runs the scalar rule element by element, so the
// two are compared by converting one source both ways.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::Fixture;
using testing::read_fixture;

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/bf16.txt");
  return f;
}

// float32 -> bfloat16 bits, written apart from the library's rule: keep the top half, then
// round up when the dropped half is above 0x8000, or exactly 0x8000 with an odd kept half.
uint16_t reference_bf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  uint32_t hi = u >> 16;
  const uint32_t lo = u & 0xffffu;
  if (lo > 0x8000u || (lo == 0x8000u && (hi & 1u) != 0)) ++hi;
  return static_cast<uint16_t>(hi);
}

std::vector<uint16_t> bits_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), kBFloat16);
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint16_t*>(c.raw_data_ptr());
  return std::vector<uint16_t>(p, p + c.numel());
}

Tensor bf16_from_bits(const std::vector<int64_t>& bits) {
  Tensor t = empty({static_cast<int64_t>(bits.size())}, kBFloat16);
  auto* p = static_cast<uint16_t*>(t.raw_data_ptr());
  for (std::size_t i = 0; i < bits.size(); ++i) p[i] = static_cast<uint16_t>(bits[i]);
  return t;
}

Tensor f32_from_bits(const std::vector<int64_t>& bits) {
  Tensor t = empty({static_cast<int64_t>(bits.size())}, kFloat32);
  float* p = t.data_ptr<float>();
  for (std::size_t i = 0; i < bits.size(); ++i) p[i] = std::bit_cast<float>(static_cast<uint32_t>(bits[i]));
  return t;
}

// t (1-D) as a strided view: every other element of a buffer twice as long.
Tensor strided_copy(const Tensor& t) {
  Tensor wide = zeros({2 * t.numel()}, t.dtype());
  Tensor view = wide.slice(0, 0, 2 * t.numel(), 2);
  view.copy_(t);
  EXPECT_FALSE(view.is_contiguous());
  return view;
}

void expect_bits(const std::vector<uint16_t>& got, const std::vector<int64_t>& want,
                 const std::vector<int64_t>& in, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i)
    if (got[i] != static_cast<uint16_t>(want[i])) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "] input 0x" << std::hex << in[i] << ": got 0x" << got[i]
                    << ", torch 0x" << want[i];
    }
}

TEST(BFloat16, DTypeBasics) {
  EXPECT_EQ(itemsize(kBFloat16), 2u);
  EXPECT_STREQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_TRUE(is_floating(kBFloat16));
  Tensor t = empty({2, 3}, kBFloat16);
  EXPECT_EQ(t.dtype(), kBFloat16);
  EXPECT_TRUE(t.is_floating_point());
  for (uint16_t b : bits_of(zeros({5}, kBFloat16))) EXPECT_EQ(b, 0x0000);
  for (uint16_t b : bits_of(ones({5}, kBFloat16))) EXPECT_EQ(b, 0x3f80);
  // full rounds its value like to(): through float32, to nearest even
  for (double v : {0.1, -3.14159, 1e-40, 3.4e38, 1e39}) {
    const uint16_t want = reference_bf16(std::bit_cast<uint32_t>(static_cast<float>(v)));
    for (uint16_t b : bits_of(full({3}, v, kBFloat16))) EXPECT_EQ(b, want) << v;
  }
  for (uint16_t b : bits_of(full({2}, NAN, kBFloat16))) EXPECT_EQ(b, 0x7fc0);
  EXPECT_EQ(bits_of(tensor({1.0, 2.5, -0.0}, kBFloat16)), (std::vector<uint16_t>{0x3f80, 0x4020, 0x8000}));
  EXPECT_EQ(zeros_like(t).dtype(), kBFloat16);
}

TEST(BFloat16, FromFloat32MatchesTorch) {
  const std::vector<int64_t> in = fx().get("f32_bits").to_vector<int64_t>();
  const std::vector<int64_t> want = fx().get("f32_to_bf16").to_vector<int64_t>();
  const Tensor x = f32_from_bits(in);
  expect_bits(bits_of(x.to(kBFloat16)), want, in, "contiguous (array loop)");
  expect_bits(bits_of(strided_copy(x).to(kBFloat16)), want, in, "strided (scalar rule)");
  std::vector<int64_t> ref;
  for (int64_t u : in) ref.push_back(reference_bf16(static_cast<uint32_t>(u)));
  EXPECT_EQ(ref, want) << "the test's reference rule disagrees with torch";
}

TEST(BFloat16, FromFloat64AndInt64MatchTorch) {
  const Tensor f64 = fx().get("f64");
  expect_bits(bits_of(f64.to(kBFloat16)), fx().get("f64_to_bf16").to_vector<int64_t>(),
              std::vector<int64_t>(f64.numel(), 0), "float64");
  const Tensor i64 = fx().get("i64");
  expect_bits(bits_of(i64.to(kBFloat16)), fx().get("i64_to_bf16").to_vector<int64_t>(),
              i64.to_vector<int64_t>(), "int64");
  EXPECT_EQ(bits_of(tensor({true, false, true}).to(kBFloat16)), (std::vector<uint16_t>{0x3f80, 0, 0x3f80}));
}

TEST(BFloat16, ToOtherDTypesMatchesTorch) {
  const Tensor b = bf16_from_bits(fx().get("bf16_bits").to_vector<int64_t>());
  for (const Tensor& src : {b, strided_copy(b)}) {
    const Tensor f32 = src.to(kFloat32);
    const std::vector<int64_t> want = fx().get("bf16_to_f32").to_vector<int64_t>();
    const float* p = f32.contiguous().data_ptr<float>();
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(p[i]), static_cast<uint32_t>(want[i])) << i;
    const std::vector<double> f64 = src.to(kFloat64).to_vector<double>();
    const std::vector<double> want64 = fx().get("bf16_to_f64").to_vector<double>();
    for (std::size_t i = 0; i < want64.size(); ++i) {
      if (std::isnan(want64[i])) EXPECT_TRUE(std::isnan(f64[i])) << i;
      else EXPECT_EQ(f64[i], want64[i]) << i;
    }
    EXPECT_EQ(src.to(kBool).to_vector<bool>(), fx().get("bf16_to_bool").to_vector<bool>());
  }
  const Tensor finite = bf16_from_bits(fx().get("bf16_finite_bits").to_vector<int64_t>());
  EXPECT_EQ(finite.to(kInt64).to_vector<int64_t>(), fx().get("bf16_finite_to_i64").to_vector<int64_t>());
}

// The rounding reads the dropped low half whole and, of the kept high half, its parity and
// whether it is the largest finite value, an infinity or a NaN. So every one of the 65,536 low
// halves, under high halves of every class (zero and subnormal exponents, normal ones odd and
// even, the largest finite, infinities, NaNs quiet and signalling, both signs), goes through the
// array loop (contiguous: vcvtneps2bf16 where built for AVX512_BF16) against the reference.
TEST(BFloat16, EveryLowHalfUnderEveryHighHalfClass) {
  std::vector<uint32_t> highs = {0x0000, 0x0001, 0x0002, 0x007f, 0x0080, 0x0081, 0x3f80, 0x3f81, 0x4049,
                                 0x7f00, 0x7f7e, 0x7f7f, 0x7f80, 0x7f81, 0x7fbf, 0x7fc0, 0x7fc1, 0x7fff};
  for (std::size_t i = 0, n = highs.size(); i < n; ++i) highs.push_back(highs[i] | 0x8000u);
  constexpr int64_t kLow = 65536;
  Tensor x = empty({static_cast<int64_t>(highs.size()), kLow}, kFloat32);
  auto* px = reinterpret_cast<uint32_t*>(x.data_ptr<float>());
  for (std::size_t h = 0; h < highs.size(); ++h)
    for (uint32_t lo = 0; lo < kLow; ++lo) px[h * kLow + lo] = (highs[h] << 16) | lo;
  x.bump_version();
  const std::vector<uint16_t> got = bits_of(x.to(kBFloat16));
  int64_t bad = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (got[i] != reference_bf16(px[i]) && ++bad <= 5)
      ADD_FAILURE() << "0x" << std::hex << px[i] << " -> 0x" << got[i] << ", want 0x"
                    << reference_bf16(px[i]);
  EXPECT_EQ(bad, 0);
}

// The scalar rule (strided source) on a sweep with a stride coprime to 2^16, so every low
// half (the bits that decide the rounding) meets many exponents, signs and NaN payloads.
TEST(BFloat16, StridedSweepMatchesReference) {
  constexpr int64_t kN = int64_t{1} << 22;
  std::vector<int64_t> in(kN);
  for (int64_t i = 0; i < kN; ++i)
    in[i] = static_cast<int64_t>((static_cast<uint64_t>(i) * 1021u) & 0xffffffffu);
  const Tensor x = f32_from_bits(in);
  const std::vector<uint16_t> got = bits_of(strided_copy(x).to(kBFloat16));
  int64_t bad = 0;
  for (int64_t i = 0; i < kN; ++i)
    if (got[i] != reference_bf16(static_cast<uint32_t>(in[i])) && ++bad <= 5)
      ADD_FAILURE() << "0x" << std::hex << in[i] << " -> 0x" << got[i];
  EXPECT_EQ(bad, 0);
}

// Lengths and start offsets around the vector width: the masked tail and unaligned loads.
TEST(BFloat16, ArrayLoopTailsAndOffsets) {
  std::vector<int64_t> in;
  for (int64_t i = 0; i < 80; ++i)
    in.push_back(static_cast<int64_t>((0x3f808000u + static_cast<uint32_t>(i) * 0x00010001u) ^
                                      (i % 7 == 0 ? 0x80000000u : 0u)));
  in[5] = 0x00018000;   // a subnormal tie
  in[17] = 0x7f800001;  // a NaN with a low payload
  in[33] = 0x7f7fffff;  // rounds to infinity
  const Tensor x = f32_from_bits(in);
  for (int64_t start = 0; start < 3; ++start)
    for (int64_t len = 0; len + start <= 80; ++len) {
      const std::vector<uint16_t> got = bits_of(x.slice(0, start, start + len).to(kBFloat16));
      for (int64_t i = 0; i < len; ++i)
        ASSERT_EQ(got[i], reference_bf16(static_cast<uint32_t>(in[start + i])))
            << start << " " << len << " " << i;
    }
}

TEST(BFloat16, Item) {
  EXPECT_EQ(scalar_tensor(3.1416, kBFloat16).item(), 3.140625);
  EXPECT_EQ(full({1, 1}, -0.1, kBFloat16).item<float>(), std::bit_cast<float>(uint32_t{0xbdcd0000}));
  EXPECT_TRUE(std::isnan(scalar_tensor(NAN, kBFloat16).item()));
  EXPECT_EQ(scalar_tensor(-INFINITY, kBFloat16).item(), -INFINITY);
}

TEST(BFloat16, PrintsLikeTorch) {
  std::ifstream in(std::string(XGRAD_FIXTURES_DIR) + "/bf16_print.txt");
  std::map<std::string, std::string> reprs;
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      name = line.substr(4);
      reprs[name] = "";
    } else {
      reprs[name] += (reprs[name].empty() ? "" : "\n") + line;
    }
  }
  ASSERT_EQ(reprs.size(), 6u) << "fixture bf16_print.txt missing or changed";
  Tensor grad_leaf = tensor({0.3, -0.7}, kBFloat16);
  grad_leaf.requires_grad_();
  std::map<std::string, Tensor> cases = {
      {"vector", tensor({1.5, 2.25, -0.1, double{NAN}}, kBFloat16)},
      {"sci", tensor({1e-5, 3.0, 1000.0}, kBFloat16)},
      {"intmode", arange(0, 6, 1, kFloat32).reshape({2, 3}).to(kBFloat16)},
      {"scalar", scalar_tensor(3.1416, kBFloat16)},
      {"empty", zeros({0}, kBFloat16)},
      {"requires_grad", grad_leaf},
  };
  for (auto& [n, t] : cases) EXPECT_EQ(to_string(t), reprs[n]) << "case " << n;
}

// Copies and views move bytes whatever the dtype: check them against the same moves in
// float32 (every bfloat16 value is exact in float32).
TEST(BFloat16, CopiesAndViewsMoveBits) {
  const Tensor f = arange(0, 24, 1, kFloat32).reshape({2, 3, 4}) / 7.0 - 1.5;
  const Tensor b = f.to(kBFloat16);
  const Tensor fb = b.to(kFloat32);  // f's values as bfloat16 holds them
  auto same = [](const Tensor& bf, const Tensor& ref, const char* what) {
    ASSERT_EQ(bf.dtype(), kBFloat16) << what;
    ASSERT_EQ(bf.shape(), ref.shape()) << what;
    EXPECT_EQ(bf.to(kFloat32).to_vector<float>(), ref.contiguous().to_vector<float>()) << what;
  };
  same(b.clone(), fb, "clone");
  same(b.transpose(0, 2).contiguous(), fb.transpose(0, 2), "transpose + contiguous");
  same(b.permute({2, 0, 1}), fb.permute({2, 0, 1}), "permute");
  same(b.slice(2, 1, 4, 2), fb.slice(2, 1, 4, 2), "slice");
  same(b.view({6, 4}), fb.view({6, 4}), "view");
  same(b.transpose(1, 2).reshape({2, 12}), fb.transpose(1, 2).reshape({2, 12}), "reshape");
  same(b.select(1, 2).unsqueeze(0).expand({3, 2, 4}).contiguous(),
       fb.select(1, 2).unsqueeze(0).expand({3, 2, 4}), "expand");
  same(b.narrow(0, 1, 1).squeeze(0), fb.narrow(0, 1, 1).squeeze(0), "narrow + squeeze");
  same(cat({b, b.slice(0, 0, 1)}, 0), cat({fb, fb.slice(0, 0, 1)}, 0), "cat");
  EXPECT_TRUE(b.view({24}).is_alias_of(b));

  Tensor dst = zeros({3, 4}, kBFloat16);
  dst.copy_(f.select(0, 1));  // float32 into bfloat16: rounds
  same(dst, fb.select(0, 1), "copy_ float32 -> bfloat16");
  Tensor back = zeros({4, 3}, kFloat32);
  back.copy_(b.select(0, 0).t());  // bfloat16 into float32, strided
  EXPECT_EQ(back.to_vector<float>(), fb.select(0, 0).t().contiguous().to_vector<float>());
  Tensor twice = zeros({2, 3, 4}, kBFloat16);
  twice.copy_(b.select(0, 0));  // broadcast
  same(twice, fb.select(0, 0).expand({2, 3, 4}), "copy_ broadcast");
}

// to() is differentiable across float dtypes: the gradient comes back converted.
TEST(BFloat16, ToRecordsItsGradient) {
  Tensor x = tensor({0.1, 2.0, -3.0}).requires_grad_();
  Tensor y = x.to(kBFloat16);
  EXPECT_EQ(y.grad_fn_name(), "ToCopyBackward0");
  (y.to(kFloat32) * tensor({1.0, 2.0, 3.0})).sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

}  // namespace
}  // namespace xgrad
