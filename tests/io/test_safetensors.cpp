// tests/io/test_safetensors.cpp: safetensors round trips, every corruption the reader must
// reject (with the file name in the message), a file written by PyTorch, and the atomic
// write (an interrupted write leaves the previous file intact): xgrad::io, the library's.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/fixture_reader.h"
#include "train/train_test_util.h"
#include "xgrad/xgrad.h"

using namespace xgrad::io;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;
using xgrad::Tensor;

namespace {

NamedTensors sample_tensors() {
  xgrad::Generator g(3);
  Tensor w = xgrad::randn({3, 4}, &g);
  Tensor d = xgrad::randn({2, 5}, &g, xgrad::kFloat64);
  Tensor ids = xgrad::from_vector(std::vector<int64_t>{5, -2, 1LL << 50}, {3});
  Tensor mask = xgrad::tensor({{true, false}, {false, true}});
  Tensor scalar = xgrad::scalar_tensor(1.5);
  Tensor empty = xgrad::zeros({0, 4});
  Tensor wt = w.t();  // non-contiguous: written as its contiguous copy
  return {{"w", w},           {"d", d},         {"ids", ids}, {"mask", mask},
          {"scalar", scalar}, {"empty", empty}, {"w_t", wt}};
}

void expect_same(const Tensor& a, const Tensor& b, const std::string& name) {
  EXPECT_EQ(a.dtype(), b.dtype()) << name;
  EXPECT_EQ(a.shape(), b.shape()) << name;
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << name;
}

// Builds a file from a header JSON and a data section.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypesAndMetadata) {
  TempDir tmp;
  auto tensors = sample_tensors();
  save_safetensors(tmp / "a.safetensors", tensors, {{"step", "12"}, {"note", "héllo"}});
  auto f = load_safetensors(tmp / "a.safetensors");
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, tensors[i].first);  // our files keep the caller's order
    expect_same(f.tensors[i].second, tensors[i].second, tensors[i].first);
    EXPECT_TRUE(f.tensors[i].second.is_contiguous());
  }
  EXPECT_EQ(f.metadata.at("step"), "12");
  EXPECT_EQ(f.metadata.at("note"), "héllo");
  EXPECT_TRUE(f.checksum_verified);
  EXPECT_EQ(f.metadata.count(kChecksumKey), 1u);
  EXPECT_TRUE(f.contains("w_t"));
  expect_same(f.at("w_t"), tensors[0].second.t(), "w_t");
  expect_error([&] { f.at("nope"); }, {"nope"});
}

TEST(Safetensors, LayoutMatchesTheSpec) {
  TempDir tmp;
  save_safetensors(tmp / "b.safetensors", {{"x", xgrad::from_vector(std::vector<float>{1, 2, 3}, {3})}}, {});
  std::string bytes = slurp(tmp / "b.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);  // header padded so the data is 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + n + 12);
  auto h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["x"]["dtype"], "F32");
  EXPECT_EQ(h["x"]["shape"], nlohmann::json::array({3}));
  EXPECT_EQ(h["x"]["data_offsets"], nlohmann::json::array({0, 12}));
  EXPECT_EQ(bytes.substr(8 + n), f32_bytes({1, 2, 3}));
  // CRC-32 of the data section, as zlib.crc32
  EXPECT_EQ(h["__metadata__"][kChecksumKey], hex32(crc32(bytes.data() + 8 + n, 12)));
}

TEST(Safetensors, ReadsAFileWrittenByPyTorch) {
  // tests/fixtures/gen_safetensors.py: torch tensors written in the reference layout
  auto f = load_safetensors(XGRAD_FIXTURES_DIR "/safetensors_basic.safetensors");
  EXPECT_FALSE(f.checksum_verified);  // torch writes no checksum: accepted unchecked
  EXPECT_EQ(f.metadata.at("format"), "pt");
  auto fx = xgrad::testing::read_fixture(XGRAD_FIXTURES_DIR "/safetensors_basic.txt");
  for (const char* name : {"weight", "bias", "double", "ids", "mask", "scalar", "empty"}) {
    ASSERT_TRUE(f.contains(name)) << name;
    expect_same(f.at(name), fx.get(name), name);
  }
  EXPECT_EQ(f.at("ids").to_vector<int64_t>()[2], (1LL << 40) + 3);
  EXPECT_EQ(f.at("ids").to_vector<int64_t>()[4], -(1LL << 62));
  // and ours re-save it bit for bit in the data
  TempDir tmp;
  save_safetensors(tmp / "re.safetensors", f.tensors, {});
  auto g = load_safetensors(tmp / "re.safetensors");
  for (const auto& [name, t] : f.tensors) expect_same(g.at(name), t, name);
}

TEST(Safetensors, RejectsEveryCorruption) {
  TempDir tmp;
  auto check = [&](const std::string& bytes, std::initializer_list<std::string> parts) {
    fs::path p = tmp / "bad.safetensors";
    spit(p, bytes);
    std::vector<std::string> all(parts);
    all.push_back(p.string());  // every message names the file
    try {
      load_safetensors(p);
      ADD_FAILURE() << "accepted a corrupt file; expected '" << all[0] << "'";
    } catch (const xgrad::Error& e) {
      for (const auto& s : all)
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what() << " lacks " << s;
    }
  };
  const std::string ok_header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = f32_bytes({1, 2});
  ASSERT_NO_THROW(parse_safetensors(make_file(ok_header, data), "ok"));

  check("", {"too short"});
  check("abc", {"too short", "3 bytes"});
  check(make_file(ok_header, data).substr(0, 20), {"header length", "past the end"});
  {
    std::string huge = make_file(ok_header, data);
    huge[6] = 1;  // a header length of 2^48 bytes
    check(huge, {"larger than"});
  }
  check(make_file(R"({"x":{"dtype":"F32",)", data), {"not valid JSON"});
  check(make_file(R"([1,2])", data), {"not a JSON object"});
  check(make_file(R"({"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
        {"'x'", "I32", "not supported"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", data),
        {"'x'", "past the end", "truncated"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
        {"'x'", "8 bytes", "need 12"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
        {"invalid data_offsets"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), {"invalid shape"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[2]}})", data), {"no data_offsets"});
  check(make_file(R"({"x":{"shape":[2],"data_offsets":[0,8]}})", data), {"no dtype"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", data),
        {"unknown field"});
  check(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  data),
        {"'a'", "'b'", "overlap"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data),
        {"gap of 4 bytes", "'x'"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data),
        {"4 bytes after the last tensor"});
  check(make_file(R"({"__metadata__":{"k":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data),
        {"'k'", "not a string"});
  check(make_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07", 2)),
        {"'m'", "byte 7"});
  check(make_file(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", data),
        {"too large"});

  // a file of ours with one flipped data bit fails its checksum
  save_safetensors(tmp / "good.safetensors", sample_tensors(), {});
  std::string bytes = slurp(tmp / "good.safetensors");
  bytes[bytes.size() - 70] ^= 0x10;
  check(bytes, {"checksum mismatch", "corrupted"});
  // ... and truncating it by one byte is caught too
  check(slurp(tmp / "good.safetensors").substr(0, bytes.size() - 1), {"truncated"});

  expect_error([&] { load_safetensors(tmp / "missing.safetensors"); },
               {"missing.safetensors", "no such file"});
  expect_error([&] { load_safetensors(tmp.path); }, {"is a directory"});
}

TEST(Safetensors, RejectsBadTensorsWhenWriting) {
  TempDir tmp;
  Tensor x = xgrad::zeros({2});
  expect_error([&] { save_safetensors(tmp / "a.st", {{"x", x}, {"x", x}}); }, {"'x'", "twice"});
  expect_error([&] { save_safetensors(tmp / "a.st", {{"", x}}); }, {"invalid tensor name"});
  expect_error([&] { save_safetensors(tmp / "a.st", {{"__metadata__", x}}); }, {"invalid tensor name"});
  expect_error([&] { save_safetensors(tmp / "a.st", {{"u", Tensor()}}); }, {"'u'", "undefined"});
  expect_error([&] { save_safetensors(tmp / "a.st", {{"x", x}}, {{kChecksumKey, "0"}}); }, {"reserved"});
  EXPECT_FALSE(fs::exists(tmp / "a.st"));
}

TEST(Safetensors, InterruptedWriteKeepsThePreviousFile) {
  TempDir tmp;
  const fs::path p = tmp / "model.safetensors";
  save_safetensors(p, {{"x", xgrad::full({64}, 1.0)}}, {{"version", "old"}});
  const std::string before = slurp(p);

  // the disk "fills up" after 100 bytes of the new file
  inject_write_failure_after(100);
  expect_error(
      [&] {
        save_safetensors(p, {{"x", xgrad::full({64}, 2.0)}}, {{"version", "new"}});
      },
      {"injected failure", ".tmp."});
  inject_write_failure_after(-1);
  EXPECT_EQ(slurp(p), before);
  EXPECT_EQ(load_safetensors(p).metadata.at("version"), "old");
  for (const auto& e : fs::directory_iterator(tmp.path))  // no temp file left behind
    EXPECT_EQ(e.path().filename(), "model.safetensors");

  // a directory that cannot hold files (its "parent" is a regular file)
  spit(tmp / "plain_file", "x");
  expect_error(
      [&] {
        save_safetensors(tmp / "plain_file" / "m.safetensors", {{"x", xgrad::zeros({1})}});
      },
      {"cannot create", "plain_file"});

  // after a successful write the new content is in place
  save_safetensors(p, {{"x", xgrad::full({64}, 2.0)}}, {{"version", "new"}});
  EXPECT_EQ(load_safetensors(p).metadata.at("version"), "new");
}

TEST(FsUtil, Crc32AndBase64) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(crc32("", 0), 0u);
  std::string long_text(1000, 'a');
  for (std::size_t i = 0; i < long_text.size(); ++i) long_text[i] = static_cast<char>(i * 7);
  // chaining = one pass
  EXPECT_EQ(crc32(long_text.data() + 13, 987, crc32(long_text.data(), 13)), crc32(long_text.data(), 1000));
  for (std::size_t n : {0, 1, 2, 3, 4, 5, 100, 5056}) {
    std::vector<uint8_t> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + 7);
    std::string e = base64_encode(b);
    EXPECT_EQ(e.size() % 4, 0u);
    EXPECT_EQ(base64_decode(e, "t"), b) << n;
  }
  EXPECT_EQ(base64_encode({'M', 'a'}), "TWE=");
  expect_error([] { base64_decode("TWE", "rng"); }, {"rng", "multiple of 4"});
  expect_error([] { base64_decode("TW!=", "rng"); }, {"invalid character"});
}
