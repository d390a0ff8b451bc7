// tests/text/test_gpt2_tokenizer.cpp: GPT2Tokenizer against gpt-3-encoder's Encoder.js.
//
// The fixture (tests/fixtures/gen_gpt2_tokenizer.js) holds Encoder.js's ids and decodes for the
// hard cases, and tests/fixtures/gpt2_mini/ the part of GPT-2's vocabulary they use, so these
// tests need neither node nor the network. With the whole vocabulary in data/gpt2/
// (scripts/get_gpt2_vocab.sh) and the corpus in data/moby_dick.txt (scripts/get_corpus.sh),
// the *FullVocabulary tests also check every case and all of Moby-Dick with it.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>

#include "error_message.h"
#include "text_fixtures.h"
#include "xgrad/text/tokenizer.h"

using xgrad::testing::expect_error;
using xgrad::text::GPT2Tokenizer;

namespace {

void check_cases(const GPT2Tokenizer& tok) {
  const auto& fx = text_test::gpt2_fixture();
  ASSERT_GE(fx["cases"].size(), 30u);
  for (const auto& c : fx["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = c["text"].get<std::string>();
    const auto expected = c["ids"].get<std::vector<int64_t>>();
    EXPECT_EQ(tok.encode(text), expected);
    EXPECT_EQ(tok.decode(expected), c["decoded"].get<std::string>());
  }
  for (const auto& c : fx["decode_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(tok.decode(c["ids"].get<std::vector<int64_t>>()), c["decoded"].get<std::string>());
  }
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::optional<GPT2Tokenizer> full_vocabulary() {
  const auto dir = text_test::data_dir() / "gpt2";
  if (!std::filesystem::exists(dir / "vocab.bpe") || !std::filesystem::exists(dir / "encoder.json"))
    return std::nullopt;
  return GPT2Tokenizer::from_files((dir / "vocab.bpe").string(), (dir / "encoder.json").string());
}

}  // namespace

// includes decode of byte tokens that are not UTF-8 (U+FFFD per maximal invalid subsequence, as
// TextDecoder) and of a leading byte order mark (dropped, as TextDecoder does)
TEST(GPT2Tokenizer, EncodesAndDecodesAsEncoderJs) { check_cases(text_test::gpt2_mini()); }

TEST(GPT2Tokenizer, HandCheckedIds) {
  const auto& tok = text_test::gpt2_mini();
  // Encoder.js: "Call me Ishmael." -> 14134 502 1148 21720 417 13 (" Ishmael" is 3 tokens)
  EXPECT_EQ(tok.encode("Call me Ishmael."), (std::vector<int64_t>{14134, 502, 1148, 21720, 417, 13}));
  EXPECT_EQ(tok.decode({1148, 21720, 417}), " Ishmael");
  EXPECT_EQ(tok.eot_token(), 50256);
  EXPECT_EQ(tok.decode({tok.eot_token()}), "<|endoftext|>");
  EXPECT_EQ(tok.vocab_size(), 50257);  // the mini vocabulary keeps GPT-2's ids
}

TEST(GPT2Tokenizer, InvalidUtf8InputIsAnError) {
  const auto& tok = text_test::gpt2_mini();
  expect_error([&] { tok.encode("abc\xFF"); }, {"invalid UTF-8", "byte offset 3"});
  expect_error([&] { tok.encode("\xC3"); }, {"truncated"});
}

TEST(GPT2Tokenizer, UnknownIdsAreErrors) {
  const auto& tok = text_test::gpt2_mini();
  expect_error([&] { tok.decode({13, 50257}); }, {"token id 50257", "position 1", "[0, 50257)"});
  expect_error([&] { tok.decode({-1}); }, {"token id -1"});
  // an id the mini vocabulary does not use decodes to nothing, as in Encoder.js
  EXPECT_EQ(tok.decode({13, 40000, 13}), "..");
}

TEST(GPT2Tokenizer, JsonRoundTrip) {
  const auto& tok = text_test::gpt2_mini();
  auto back = xgrad::text::tokenizer_from_json(tok.to_json());
  ASSERT_EQ(back->kind(), "gpt2");
  EXPECT_EQ(back->to_json(), tok.to_json());
  EXPECT_EQ(back->vocab_size(), tok.vocab_size());
  const std::string text = text_test::gpt2_fixture()["cases"][2]["text"].get<std::string>();
  EXPECT_EQ(back->encode(text), tok.encode(text));
}

TEST(GPT2Tokenizer, LoaderErrors) {
  const std::string bytes_only = [] {
    // encoder.json of the mini vocabulary, but only the 256 byte tokens
    auto enc = nlohmann::json::parse(text_test::read_file(XGRAD_FIXTURES_DIR "/gpt2_mini/encoder.json"));
    nlohmann::json out = nlohmann::json::object();
    for (auto& [k, v] : enc.items())
      if (v.get<int64_t>() < 256) out[k] = v;
    return out.dump();
  }();
  // a merge's result missing from the encoder
  expect_error([&] { GPT2Tokenizer::from_strings("#version: 0.2\nĠ t\n", bytes_only); },
               {"merge 0", "'Ġt' is not in encoder.json"});
  expect_error([&] { GPT2Tokenizer::from_strings("#version: 0.2\nĠ t x\n", bytes_only); },
               {"line 2", "3 fields"});
  expect_error([&] { GPT2Tokenizer::from_strings("#\n", "[1, 2]"); }, {"not a JSON object"});
  expect_error([&] { GPT2Tokenizer::from_strings("#\n", R"({"a": 0})"); }, {"no token for byte 0"});
  expect_error([&] { GPT2Tokenizer::from_strings("#\n", R"({"a": 0, "b": 0})"); },
               {"id 0 is given to two tokens"});
  expect_error([&] { GPT2Tokenizer::from_strings("#\n", R"({"a b": 0})"); },
               {"not one of GPT-2's 256 byte characters"});
  expect_error([] { GPT2Tokenizer::from_files("/nonexistent/vocab.bpe", "/nonexistent/e.json"); },
               {"cannot open /nonexistent/vocab.bpe"});
  // the bytes alone: every piece is one token per byte
  auto bytes = GPT2Tokenizer::from_strings("#version: 0.2\n", bytes_only);
  EXPECT_EQ(bytes.encode(" the").size(), 4u);
  EXPECT_EQ(bytes.decode(bytes.encode(" the whale")), " the whale");
}

TEST(GPT2Tokenizer, FullVocabularyCases) {
  auto tok = full_vocabulary();
  if (!tok) GTEST_SKIP() << "no data/gpt2/ (scripts/get_gpt2_vocab.sh fetches it)";
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->num_merges(), 50000);
  check_cases(*tok);
}

TEST(GPT2Tokenizer, FullVocabularyMobyDick) {
  auto tok = full_vocabulary();
  const auto corpus_path = text_test::data_dir() / "moby_dick.txt";
  if (!tok || !std::filesystem::exists(corpus_path))
    GTEST_SKIP() << "needs data/gpt2/ and data/moby_dick.txt (scripts/get_gpt2_vocab.sh, "
                    "scripts/get_corpus.sh)";
  const auto& fx = text_test::gpt2_fixture()["moby_dick"];
  const std::string corpus = text_test::read_file(corpus_path.string());
  const double t0 = thread_cpu_seconds();
  const std::vector<int64_t> ids = tok->encode(corpus);
  const double seconds = thread_cpu_seconds() - t0;
  ASSERT_EQ(static_cast<int64_t>(ids.size()), fx["num_tokens"].get<int64_t>());
  std::string line;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(line)));
  EXPECT_EQ(std::string(hex), fx["ids_fnv1a64"].get<std::string>());
  EXPECT_EQ(tok->decode(ids), corpus);
  std::printf("[ perf     ] GPT-2 encode of Moby-Dick (%zu bytes -> %zu tokens): %.3f s CPU\n", corpus.size(),
              ids.size(), seconds);
}
