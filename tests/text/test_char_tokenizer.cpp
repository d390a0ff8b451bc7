// tests/text/test_char_tokenizer.cpp: strict UTF-8 (xgrad/text/utf8.h) and the character
// tokenizer (vocabulary, encode/decode, JSON), moved here from tests/train with the code.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "error_message.h"
#include "xgrad/text/tokenizer.h"
#include "xgrad/text/utf8.h"

using xgrad::testing::expect_error;
using xgrad::text::append_utf8;
using xgrad::text::CharTokenizer;
using xgrad::text::decode_utf8;

TEST(Utf8, DecodesOneToFourByteSequences) {
  auto cps = decode_utf8("a\xC3\xA9\xE2\x80\x94\xF0\x9F\x90\xB3", "t");  // a é — 🐳
  ASSERT_EQ(cps.size(), 4u);
  EXPECT_EQ(cps[0], U'a');
  EXPECT_EQ(cps[1], U'\u00E9');
  EXPECT_EQ(cps[2], U'\u2014');
  EXPECT_EQ(cps[3], U'\U0001F433');
  std::string back;
  for (char32_t c : cps) append_utf8(back, c);
  EXPECT_EQ(back, "a\xC3\xA9\xE2\x80\x94\xF0\x9F\x90\xB3");
}

TEST(Utf8, InvalidInputNamesTheByteOffset) {
  expect_error([] { decode_utf8("ab\x80", "corpus.txt"); },
               {"corpus.txt", "byte offset 2", "0x80", "continuation"});
  expect_error([] { decode_utf8("abc\xC3", "f"); }, {"offset 3", "truncated"});
  expect_error([] { decode_utf8("\xC0\xAF", "f"); }, {"offset 0"});  // overlong '/'
  expect_error([] { decode_utf8("x\xE0\x80\xAF", "f"); }, {"offset 1", "overlong"});
  expect_error([] { decode_utf8("\xED\xA0\x80", "f"); }, {"surrogate"});
  expect_error([] { decode_utf8("\xF4\x90\x80\x80", "f"); }, {"U+10FFFF"});
  expect_error([] { decode_utf8("\xC3(", "f"); }, {"offset 1", "continuation"});
  expect_error([] { decode_utf8("\xFF", "f"); }, {"never valid"});
}

TEST(CharTokenizer, VocabularyIsTheSortedSetOfCodePoints) {
  auto tok = CharTokenizer::from_text("Call me Ishmael. Œ—é", "text");
  const auto& v = tok.vocab();
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  EXPECT_EQ(std::adjacent_find(v.begin(), v.end()), v.end());
  EXPECT_EQ(tok.vocab_size(), 13);  // " .CIaehlmsŒ—é"
  std::set<char32_t> expect;
  for (char32_t c : decode_utf8("Call me Ishmael. Œ—é", "t")) expect.insert(c);
  EXPECT_EQ(static_cast<size_t>(tok.vocab_size()), expect.size());
  EXPECT_EQ(v.front(), U' ');
  EXPECT_EQ(v.back(), U'\u2014');
}

TEST(CharTokenizer, RoundTripsNonAscii) {
  const std::string text = "Œdipus said: “Call me Ishmael” — ηος ח 🐳\n";
  auto tok = CharTokenizer::from_text(text, "t");
  auto ids = tok.encode(text);
  EXPECT_EQ(ids.size(), decode_utf8(text, "t").size());
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
  nlohmann::json j = nlohmann::json::parse(tok.to_json());
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(static_cast<int64_t>(j.size()), tok.vocab_size());
  auto back = CharTokenizer::from_json(j.dump());
  EXPECT_TRUE(back == tok);
  auto any = xgrad::text::tokenizer_from_json(tok.to_json());  // a JSON list is a CharTokenizer
  EXPECT_EQ(any->kind(), "char");
  EXPECT_EQ(any->to_json(), tok.to_json());
  EXPECT_EQ(back.decode(tok.encode("wörld 🐳")), "wörld 🐳");
}

TEST(CharTokenizer, Errors) {
  auto tok = CharTokenizer::from_text("abc", "t");
  expect_error([&] { tok.encode("abz"); }, {"U+007A", "'z'", "character 2", "not in the vocabulary"});
  expect_error([&] { tok.decode({0, 3}); }, {"token id 3", "position 1"});
  expect_error([&] { tok.decode(std::vector<int64_t>{-1}); }, {"token id -1"});
  expect_error([&] { tok.decode(int64_t{-1}); }, {"token id -1"});
  expect_error([] { CharTokenizer::from_text("", "empty.txt"); }, {"empty.txt", "empty"});
  expect_error([] { CharTokenizer::from_json(R"(["b","a"])"); }, {"increasing"});
  expect_error([] { CharTokenizer::from_json(R"(["a","bc"])"); }, {"entry 1", "exactly one"});
  expect_error([] { CharTokenizer::from_json(R"({"a":1})"); }, {"list"});
  expect_error([] { CharTokenizer::from_json(R"(["a",1])"); }, {"entry 1", "not a string"});
  expect_error([] { CharTokenizer::from_json("[\"a\""); }, {"not valid JSON"});
}
