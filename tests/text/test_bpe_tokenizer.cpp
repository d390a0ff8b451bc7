// tests/text/test_bpe_tokenizer.cpp: the trainable byte-level BPE: a tiny example worked by
// hand, determinism, round trips, save/load and its errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "error_message.h"
#include "text_fixtures.h"
#include "xgrad/io/file.h"
#include "xgrad/text/pretokenize.h"
#include "xgrad/text/tokenizer.h"

using xgrad::testing::expect_error;
using xgrad::text::BPETokenizer;
using Merges = std::vector<std::pair<int32_t, int32_t>>;

namespace {}  // namespace

TEST(BPETokenizer, TinyExampleByHand) {
  // pieces: "aaab" x1, " aaab" x2, " ab" x1 (gpt2_split of the text below)
  //   pairs: (a,a) 1*2 + 2*2 = 6, (a,b) 1 + 2 + 1 = 4, (' ',a) 2 + 1 = 3
  //   merge 0: (a, a) -> 256:   "aaab" = [256 a b], " aaab" = [' ' 256 a b], " ab"
  //   pairs now: (256,a) 3, (a,b) 4, (' ',256) 2, (' ',a) 1  -> merge 1: (a, b) -> 257
  //   then: (256,257) 3, (' ',256) 2, (' ',257) 1            -> merge 2: (256, 257) -> 258
  //   then: (' ',258) 2, (' ',257) 1                          -> merge 3: (' ', 258) -> 259
  //   then: (' ',257) 1: no pair occurs twice, stop.
  const std::string text = "aaab aaab aaab ab";
  auto tok = BPETokenizer::train(text, 10);
  EXPECT_EQ(tok.merges(), (Merges{{'a', 'a'}, {'a', 'b'}, {256, 257}, {' ', 258}}));
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.token_bytes(258), "aaab");
  EXPECT_EQ(tok.token_bytes(259), " aaab");
  EXPECT_EQ(tok.encode(text), (std::vector<int64_t>{258, 259, 259, ' ', 257}));
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  // fewer merges asked: the first ones
  EXPECT_EQ(BPETokenizer::train(text, 2).merges(), (Merges{{'a', 'a'}, {'a', 'b'}}));
  // a tie (a,b) 1 vs (b,a) 1 ... everything once: nothing to merge
  EXPECT_EQ(BPETokenizer::train("ab", 5).num_merges(), 0);
  // ties go to the smaller pair: (a,b) and (c,d) occur twice each
  EXPECT_EQ(BPETokenizer::train("cd ab cd ab", 1).merges(), (Merges{{' ', 'a'}}));
}

TEST(BPETokenizer, MergesAreAppliedInOrderNotByFrequency) {
  // merge 0 joins (b, c), so "abc" cannot use merge 1 (a, b)
  auto tok = BPETokenizer::from_merges({{'b', 'c'}, {'a', 'b'}});
  EXPECT_EQ(tok.encode("abc"), (std::vector<int64_t>{'a', 256}));
  EXPECT_EQ(tok.encode("abd"), (std::vector<int64_t>{257, 'd'}));
  // no merge across pieces: "a" and " b" are separate pieces
  EXPECT_EQ(tok.encode("a b"), (std::vector<int64_t>{'a', ' ', 'b'}));
}

TEST(BPETokenizer, DeterministicAndRoundTrips) {
  std::string corpus;  // 5 kB of Moby-Dick and the hard cases of the GPT-2 fixture
  for (const auto& c : text_test::gpt2_fixture()["cases"]) corpus += c["text"].get<std::string>();
  auto a = BPETokenizer::train(corpus, 200);
  auto b = BPETokenizer::train(corpus, 200);
  EXPECT_EQ(a.num_merges(), 200);
  EXPECT_TRUE(a == b);
  const auto ids = a.encode(corpus);
  EXPECT_LT(ids.size(), corpus.size() * 2 / 3);  // it compresses (5.9 kB, 3.1k tokens)
  EXPECT_EQ(a.decode(ids), corpus);
  for (const std::string s : {"", "unseen words: zebra 9999", "\xE6\x97\xA5\xE6\x9C\xAC", "  \t\n"})
    EXPECT_EQ(a.decode(a.encode(s)), s);
  // decode of a cut character gives U+FFFD; decode_bytes gives the bytes
  const auto whale = BPETokenizer().encode("\xF0\x9F\x90\xB3");
  ASSERT_EQ(whale.size(), 4u);
  EXPECT_EQ(a.decode({whale[0], whale[1]}), "\xEF\xBF\xBD");
  EXPECT_EQ(a.decode_bytes({whale[0], whale[1]}), "\xF0\x9F");
}

namespace {
// The incremental pair counts of train() against the plain algorithm: recount every pair of
// every piece before each merge.
Merges naive_bpe(const std::string& corpus, int64_t num_merges) {
  std::map<std::string, int64_t> freq;
  for (std::string_view p : xgrad::text::gpt2_split(corpus)) ++freq[std::string(p)];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [p, n] : freq) {
    std::vector<int32_t> w;
    for (unsigned char c : p) w.push_back(c);
    words.emplace_back(w, n);
  }
  Merges merges;
  while (static_cast<int64_t>(merges.size()) < num_merges) {
    std::map<std::pair<int32_t, int32_t>, int64_t> count;
    for (const auto& [w, n] : words)
      for (std::size_t i = 0; i + 1 < w.size(); ++i) count[{w[i], w[i + 1]}] += n;
    std::pair<int32_t, int32_t> best{};
    int64_t best_n = 0;
    for (const auto& [pair, n] : count)  // in pair order: the first of the largest count wins
      if (n > best_n) best = pair, best_n = n;
    if (best_n < 2) break;
    const auto id = static_cast<int32_t>(256 + merges.size());
    merges.push_back(best);
    for (auto& [w, n] : words) {
      std::vector<int32_t> out;
      for (std::size_t i = 0; i < w.size();) {
        if (i + 1 < w.size() && w[i] == best.first && w[i + 1] == best.second) out.push_back(id), i += 2;
        else out.push_back(w[i++]);
      }
      w = out;
    }
  }
  return merges;
}
}  // namespace

TEST(BPETokenizer, TrainMatchesThePlainAlgorithm) {
  std::string corpus;
  for (const auto& c : text_test::gpt2_fixture()["cases"]) corpus += c["text"].get<std::string>();
  EXPECT_EQ(BPETokenizer::train(corpus, 400).merges(), naive_bpe(corpus, 400));
  const std::string runs = "aaaaaaa bbbbbb aaaa abababab baba aaaaaaa";  // overlapping pairs
  EXPECT_EQ(BPETokenizer::train(runs, 50).merges(), naive_bpe(runs, 50));
}

TEST(BPETokenizer, SaveAndLoad) {
  auto tok = BPETokenizer::train("the cat sat on the mat; the cat sat on the hat", 12);
  const auto dir = std::filesystem::temp_directory_path() / ("xgrad_bpe_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bpe.json").string();
  tok.save(path);
  auto back = BPETokenizer::load(path);
  EXPECT_TRUE(back == tok);
  EXPECT_EQ(back.encode("the cat"), tok.encode("the cat"));
  auto any = xgrad::text::tokenizer_from_json(text_test::read_file(path));
  EXPECT_EQ(any->kind(), "bpe");
  EXPECT_EQ(any->encode("the hat"), tok.encode("the hat"));
  // no temporary file is left beside it
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::filesystem::remove_all(dir);
  expect_error([&] { tok.save((dir / "missing" / "bpe.json").string()); },
               {"BPETokenizer.save", "cannot create"});
}

TEST(BPETokenizer, SaveIsCrashSafe) {
  // save writes through xgrad::io's atomic writer: a write that fails half-way (a full disk, a
  // crash) leaves the old file as it was and no temporary file beside it
  const auto dir = std::filesystem::temp_directory_path() / ("xgrad_bpe_crash_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bpe.json").string();
  auto old_tok = BPETokenizer::train("the cat sat on the mat", 4);
  old_tok.save(path);
  const std::string before = text_test::read_file(path);
  auto new_tok = BPETokenizer::train("the cat sat on the mat; the cat sat on the hat", 12);
  xgrad::io::inject_write_failure_after(10);
  expect_error([&] { new_tok.save(path); }, {"BPETokenizer.save", "injected failure"});
  xgrad::io::inject_write_failure_after(-1);
  EXPECT_EQ(text_test::read_file(path), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  new_tok.save(path);
  EXPECT_TRUE(BPETokenizer::load(path) == new_tok);
  std::filesystem::remove_all(dir);
}

TEST(BPETokenizer, BadMergesAreErrors) {
  expect_error([] { BPETokenizer::from_merges({{'a', 256}}); }, {"merge 0", "[0, 256)"});
  expect_error([] { BPETokenizer::from_merges({{-1, 3}}); }, {"merge 0"});
  expect_error([] { BPETokenizer::from_json(R"({"type": "bpe", "version": 2, "merges": []})"); },
               {"version 2"});
  expect_error([] { BPETokenizer::from_json(R"({"type": "bpe", "version": 1, "merges": [[1]]})"); },
               {"merge 0", "pair"});
  expect_error([] { BPETokenizer::from_json(R"({"type": "gpt2"})"); }, {"expected"});
  expect_error([] { BPETokenizer::load("/nonexistent/bpe.json"); }, {"cannot open"});
  expect_error([] { BPETokenizer().decode({256}); }, {"token id 256"});
  expect_error([] { BPETokenizer::train("x", -1); }, {"num_merges"});
  expect_error([] { BPETokenizer().encode("\x80"); }, {"invalid UTF-8"});
  expect_error([] { xgrad::text::tokenizer_from_json(R"({"type": "wordpiece"})"); },
               {"unknown tokenizer type 'wordpiece'"});
}
