// tests/train/test_tokenizer.cpp: the character tokenizer (strict UTF-8, vocabulary, JSON),
// the train/val split and the batch sampler (nanoGPT's get_batch, deterministic per seed,
// resumable through the generator state).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer.h"
#include "xgrad/xgrad.h"

using train_lm::BatchSampler;
using train_lm::CharTokenizer;

namespace {

// Expects `f` to throw xgrad::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected xgrad::Error";
  } catch (const xgrad::Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
        << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace

TEST(Utf8, DecodesOneToFourByteSequences) {
  auto cps = train_lm::decode_utf8("a\xC3\xA9\xE2\x80\x94\xF0\x9F\x90\xB3", "t");  // a é — 🐳
  ASSERT_EQ(cps.size(), 4u);
  EXPECT_EQ(cps[0], U'a');
  EXPECT_EQ(cps[1], U'\u00E9');
  EXPECT_EQ(cps[2], U'\u2014');
  EXPECT_EQ(cps[3], U'\U0001F433');
  std::string back;
  for (char32_t c : cps) train_lm::append_utf8(back, c);
  EXPECT_EQ(back, "a\xC3\xA9\xE2\x80\x94\xF0\x9F\x90\xB3");
}

TEST(Utf8, InvalidInputNamesTheByteOffset) {
  expect_error([] { train_lm::decode_utf8("ab\x80", "corpus.txt"); },
               {"corpus.txt", "byte offset 2", "0x80", "continuation"});
  expect_error([] { train_lm::decode_utf8("abc\xC3", "f"); }, {"offset 3", "truncated"});
  expect_error([] { train_lm::decode_utf8("\xC0\xAF", "f"); }, {"offset 0"});           // overlong '/'
  expect_error([] { train_lm::decode_utf8("x\xE0\x80\xAF", "f"); }, {"offset 1", "overlong"});
  expect_error([] { train_lm::decode_utf8("\xED\xA0\x80", "f"); }, {"surrogate"});
  expect_error([] { train_lm::decode_utf8("\xF4\x90\x80\x80", "f"); }, {"U+10FFFF"});
  expect_error([] { train_lm::decode_utf8("\xC3(", "f"); }, {"offset 1", "continuation"});
  expect_error([] { train_lm::decode_utf8("\xFF", "f"); }, {"never valid"});
}

TEST(CharTokenizer, VocabularyIsTheSortedSetOfCodePoints) {
  auto tok = CharTokenizer::from_text("Call me Ishmael. Œ—é", "text");
  const auto& v = tok.vocab();
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end());
  EXPECT_EQ(tok.vocab_size(), 13);  // " .CIaehlmsŒ—é"
  std::set<char32_t> expect;
  for (char32_t c : train_lm::decode_utf8("Call me Ishmael. Œ—é", "t")) expect.insert(c);
  EXPECT_EQ(static_cast<size_t>(tok.vocab_size()), expect.size());
  EXPECT_EQ(v.front(), U' ');
  EXPECT_EQ(v.back(), U'\u2014');
}

TEST(CharTokenizer, RoundTripsNonAscii) {
  const std::string text = "Œdipus said: “Call me Ishmael” — ηος ח 🐳\n";
  auto tok = CharTokenizer::from_text(text, "t");
  auto ids = tok.encode(text);
  EXPECT_EQ(ids.size(), train_lm::decode_utf8(text, "t").size());
  EXPECT_EQ(tok.decode(ids), text);
  for (int64_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, tok.vocab_size());
  }
  // ids follow code point order
  EXPECT_LT(tok.encode("a")[0], tok.encode("🐳")[0]);
  EXPECT_THROW(tok.encode("b"), xgrad::Error);
}

TEST(CharTokenizer, JsonRoundTrip) {
  auto tok = CharTokenizer::from_text("hello, wörld\n\t\"quoted\" 🐳", "t");
  nlohmann::json j = tok.to_json();
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(static_cast<int64_t>(j.size()), tok.vocab_size());
  auto back = CharTokenizer::from_json(nlohmann::json::parse(j.dump()));
  EXPECT_TRUE(back == tok);
  EXPECT_EQ(back.decode(tok.encode("wörld 🐳")), "wörld 🐳");
}

TEST(CharTokenizer, Errors) {
  auto tok = CharTokenizer::from_text("abc", "t");
  expect_error([&] { tok.encode("abz"); }, {"U+007A", "'z'", "character 2", "not in the vocabulary"});
  expect_error([&] { tok.decode({0, 3}); }, {"token id 3", "position 1"});
  expect_error([&] { tok.decode({-1}); }, {"token id -1"});
  expect_error([] { CharTokenizer::from_text("", "empty.txt"); }, {"empty.txt", "empty"});
  expect_error([] { CharTokenizer::from_json(nlohmann::json::parse(R"(["b","a"])")); },
               {"increasing"});
  expect_error([] { CharTokenizer::from_json(nlohmann::json::parse(R"(["a","bc"])")); },
               {"entry 1", "exactly one"});
  expect_error([] { CharTokenizer::from_json(nlohmann::json::parse(R"({"a":1})")); }, {"list"});
  expect_error([] { CharTokenizer::from_json(nlohmann::json::parse(R"(["a",1])")); },
               {"entry 1", "not a string"});
}

TEST(Split, NinetyTen) {
  std::vector<int64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  auto s = train_lm::split_tokens(ids);
  ASSERT_EQ(s.train.size(), 900u);
  ASSERT_EQ(s.val.size(), 100u);
  EXPECT_EQ(s.train.back(), 899);
  EXPECT_EQ(s.val.front(), 900);
}

TEST(BatchSampler, WindowsAreShiftedPairsOfTheData) {
  std::vector<int64_t> data(200);
  std::iota(data.begin(), data.end(), 1000);
  BatchSampler s(&data, 4, 8, 42);
  auto b = s.next();
  EXPECT_EQ(b.x.shape(), (xgrad::Shape{4, 8}));
  EXPECT_EQ(b.y.shape(), (xgrad::Shape{4, 8}));
  EXPECT_EQ(b.x.dtype(), xgrad::kInt64);
  auto x = b.x.to_vector<int64_t>(), y = b.y.to_vector<int64_t>();
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(y[i * 8 + t], x[i * 8 + t] + 1);  // consecutive data, y = x shifted by one
      if (t > 0) EXPECT_EQ(x[i * 8 + t], x[i * 8 + t - 1] + 1);
    }
    EXPECT_GE(x[i * 8], 1000);
    EXPECT_LE(y[i * 8 + 7], 1199);
  }
}

TEST(BatchSampler, StartsAreTorchRandint) {
  // torch.manual_seed(42); torch.randint(len(data) - T, (B,)) draws from the same stream as
  // Generator(42).random_int, which random.h guarantees equal to torch's.
  std::vector<int64_t> data(100);
  std::iota(data.begin(), data.end(), 0);
  BatchSampler s(&data, 3, 5, 42);
  xgrad::Generator g(42);
  std::vector<int64_t> starts(3);
  g.random_int(starts.data(), 3, 0, 100 - 5);
  auto x = s.next().x.to_vector<int64_t>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(x[i * 5], starts[i]);
}

TEST(BatchSampler, DeterministicPerSeedAndResumable) {
  std::vector<int64_t> data(500);
  std::iota(data.begin(), data.end(), 0);
  BatchSampler a(&data, 4, 16, 7), b(&data, 4, 16, 7), c(&data, 4, 16, 8);
  auto a1 = a.next().x.to_vector<int64_t>();
  EXPECT_EQ(a1, b.next().x.to_vector<int64_t>());
  EXPECT_NE(a1, c.next().x.to_vector<int64_t>());

  // save the state after two batches, draw two more; a fresh sampler restored from the state
  // draws the same two
  a.next();
  auto state = a.get_state();
  auto a3 = a.next().x.to_vector<int64_t>(), a4 = a.next().y.to_vector<int64_t>();
  BatchSampler r(&data, 4, 16, 999);
  r.set_state(state);
  EXPECT_EQ(r.next().x.to_vector<int64_t>(), a3);
  EXPECT_EQ(r.next().y.to_vector<int64_t>(), a4);
}

TEST(BatchSampler, TooShortSplitIsAnError) {
  std::vector<int64_t> data(8);
  expect_error([&] { BatchSampler(&data, 2, 8, 1, "val"); }, {"val split", "8 tokens", "9"});
  std::vector<int64_t> ok(9);
  BatchSampler s(&ok, 2, 8, 1);
  auto x = s.next().x.to_vector<int64_t>();  // the only window starts at 0
  EXPECT_EQ(x[0], 0);
  EXPECT_EQ(x[8], 0);
}
