// tests/io/test_safetensors_bf16.cpp: BF16 in safetensors (written and read back bit for bit,
// and read from a file laid out by PyTorch's side, tests/fixtures/bf16.safetensors from
// gen_bf16.py) and F16 (read only, into float32: every one of the 65,536 halves against the
// format's definition).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "train/train_test_util.h"
#include "xgrad/xgrad.h"

using namespace xgrad::io;
using train_test::TempDir;
using xgrad::Tensor;

namespace {

std::vector<uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint16_t*>(c.raw_data_ptr());
  return std::vector<uint16_t>(p, p + c.numel());
}

// A safetensors file by hand: one tensor `name` of dtype `dt` holding `data`.
std::string one_tensor_file(const std::string& name, const std::string& dt, const xgrad::Shape& shape,
                            const std::string& data) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"" + dt + "\",\"shape\":[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) header += ',';
    header += std::to_string(shape[i]);
  }
  header += "],\"data_offsets\":[0," + std::to_string(data.size()) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

// IEEE binary16 by its definition (sign, 5-bit exponent biased by 15, 10-bit fraction),
// in double: the reference the reader's bit rebiasing must agree with.
float half_value(uint32_t h) {
  const double sign = (h & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = static_cast<int>((h >> 10) & 0x1fu);
  const double fraction = static_cast<double>(h & 0x3ffu) / 1024.0;
  if (exponent == 31) return static_cast<float>(fraction == 0.0 ? sign * INFINITY : std::copysign(NAN, sign));
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(fraction, -14));  // subnormal
  return static_cast<float>(sign * std::ldexp(1.0 + fraction, exponent - 15));
}

TEST(SafetensorsBF16, RoundTripKeepsEveryBit) {
  TempDir dir;
  Tensor b = xgrad::empty({4, 5}, xgrad::kBFloat16);
  auto* p = static_cast<uint16_t*>(b.raw_data_ptr());
  const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x7f80, 0xff80, 0x7fc0, 0xffff, 0x7f81, 0x3f80, 0x7f7f};
  for (int i = 0; i < 20; ++i) p[i] = i < 10 ? special[i] : static_cast<uint16_t>(0x4000 + 37 * i);
  const Tensor bt = b.t();  // non-contiguous: written as its contiguous copy
  save_safetensors(dir.path / "b.safetensors", {{"b", b}, {"bt", bt}});
  const SafetensorsFile f = load_safetensors(dir.path / "b.safetensors");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_TRUE(f.checksum_verified);
  for (const auto& [name, t] : f.tensors) {
    EXPECT_EQ(t.dtype(), xgrad::kBFloat16) << name;
    EXPECT_EQ(bits_of(t), bits_of(name == "b" ? b : bt)) << name;
  }
  EXPECT_EQ(f.tensors[0].second.shape(), (xgrad::Shape{4, 5}));
  EXPECT_EQ(f.tensors[1].second.shape(), (xgrad::Shape{5, 4}));
}

TEST(SafetensorsBF16, ReadsAFileWrittenInTorchsLayout) {
  const auto fx = xgrad::testing::read_fixture(XGRAD_FIXTURES_DIR "/bf16.txt");
  const SafetensorsFile f = load_safetensors(XGRAD_FIXTURES_DIR "/bf16.safetensors");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_FALSE(f.checksum_verified);
  for (const auto& [name, t] : f.tensors) {
    const Tensor want = fx.get(name == "w" ? "st_bf16" : "st_f16");
    // BF16 stays bfloat16, F16 arrives as float32; both hold torch's values exactly
    EXPECT_EQ(t.dtype(), name == "w" ? xgrad::kBFloat16 : xgrad::kFloat32) << name;
    EXPECT_EQ(t.shape(), want.shape()) << name;
    EXPECT_EQ(t.to(xgrad::kFloat32).to_vector<float>(), want.to_vector<float>()) << name;
  }
}

TEST(SafetensorsBF16, ReadsEveryF16PatternAsFloat32) {
  std::string data(2 * 65536, '\0');
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto v = static_cast<uint16_t>(h);
    std::memcpy(&data[2 * h], &v, 2);
  }
  const SafetensorsFile f = parse_safetensors(one_tensor_file("h", "F16", {256, 256}, data), "halves");
  const Tensor& t = f.tensors.at(0).second;
  ASSERT_EQ(t.dtype(), xgrad::kFloat32);
  ASSERT_EQ(t.shape(), (xgrad::Shape{256, 256}));
  const float* p = t.data_ptr<float>();
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = half_value(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(p[h])) << std::hex << h;
      ASSERT_EQ(std::signbit(p[h]), std::signbit(want)) << std::hex << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(p[h]), std::bit_cast<uint32_t>(want)) << std::hex << h;
    }
  }
}

TEST(SafetensorsBF16, ChecksF16AndBF16Sizes) {
  // 3 elements of 2 bytes need 6 bytes; 4 is a wrong size for either
  for (const char* dt : {"F16", "BF16"})
    train_test::expect_error(
        [&] { parse_safetensors(one_tensor_file("x", dt, {3}, std::string(4, '\0')), "short"); },
        {"short", "x", dt, "need 6"});
  train_test::expect_error(
      [&] { parse_safetensors(one_tensor_file("x", "F8_E4M3", {2}, std::string(2, '\0')), "f8"); },
      {"F8_E4M3", "not supported", "BF16, F16"});
}

}  // namespace
