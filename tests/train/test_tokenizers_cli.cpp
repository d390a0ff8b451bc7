// tests/train/test_tokenizers_cli.cpp: `train_lm --tokenizer char|gpt2|bpe` and
// `train_lm tokenize`: the ids printed, the tokenizer saved in the checkpoint and used by
// generate and --resume, and the errors. GPT-2 runs use the fixture's part of GPT-2's
// vocabulary (tests/fixtures/gpt2_mini), which has GPT-2's ids.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "options.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/text/tokenizer.h"

using namespace train_lm;
using train_test::load_checkpoint_files;
using train_test::spit;
using train_test::TempDir;

namespace {

const std::string kMini = XGRAD_FIXTURES_DIR "/gpt2_mini";

int run(std::vector<std::string> a) {
  a.insert(a.begin(), "train_lm");
  return run_cli(a);
}

// `train_lm tokenize ...`: exit code and stdout
std::pair<int, std::string> tokenize(std::vector<std::string> a) {
  a.insert(a.begin(), "tokenize");
  ::testing::internal::CaptureStdout();
  int code = run(a);
  return {code, ::testing::internal::GetCapturedStdout()};
}

std::string corpus_text() { return train_test::ishmael_corpus(); }

std::vector<std::string> tiny_train(const TempDir& tmp, std::vector<std::string> extra) {
  std::vector<std::string> a =
      train_test::tiny_train_args(tmp / "corpus.txt", tmp / "ck",
                                  {"--batch-size", "4", "--eval-iters", "2", "--sample-length", "4",
                                   "--steps", "4", "--eval-interval", "2"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::unique_ptr<xgrad::text::Tokenizer> saved_tokenizer(const TempDir& tmp) {
  auto ck = load_checkpoint_files(tmp / "ck");
  EXPECT_FALSE(ck.at(kTrainStateFile).metadata.count("vocab"));  // written once, in the model file
  return xgrad::text::tokenizer_from_json(ck.at(kModelFile).metadata.at("vocab"));
}

class TokenizersCli : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::off); }
  void TearDown() override { spdlog::set_level(spdlog::level::info); }
};

}  // namespace

TEST_F(TokenizersCli, TokenizePrintsIdsOnOneLine) {
  TempDir tmp;
  spit(tmp / "t.txt", "Call me Ishmael.");
  const std::string data = (tmp / "t.txt").string();
  // Encoder.js: 14134 502 1148 21720 417 13
  EXPECT_EQ(tokenize({"--tokenizer", "gpt2", "--gpt2-vocab", kMini, "--data", data}),
            (std::pair<int, std::string>{0, "14134 502 1148 21720 417 13\n"}));
  // char: ids in code point order of the file's own characters: ' ' . C I a e h l m s
  EXPECT_EQ(tokenize({"--tokenizer", "char", "--data", data}).second, "2 4 7 7 0 8 5 0 3 9 6 8 4 5 7 1\n");
  // bpe without merges: the bytes
  EXPECT_EQ(tokenize({"--tokenizer", "bpe", "--bpe-merges", "0", "--data", data}).second,
            "67 97 108 108 32 109 101 32 73 115 104 109 97 101 108 46\n");
  // bpe learnt from the file: no pair occurs twice in it, so no merge
  EXPECT_EQ(tokenize({"--tokenizer", "bpe", "--bpe-merges", "5", "--data", data}).second,
            "67 97 108 108 32 109 101 32 73 115 104 109 97 101 108 46\n");
  // twice the text: 5 merges ("Call" is id 256 + ..., 7 tokens a line)
  spit(tmp / "t2.txt", "Call me Ishmael. Call me Ishmael.");
  auto [code, line] =
      tokenize({"--tokenizer", "bpe", "--bpe-merges", "5", "--data", (tmp / "t2.txt").string()});
  EXPECT_EQ(code, 0);
  EXPECT_EQ(std::count(line.begin(), line.end(), ' ') + 1,
            static_cast<long>(xgrad::text::BPETokenizer::train("Call me Ishmael. Call me Ishmael.", 5)
                                  .encode("Call me Ishmael. Call me Ishmael.")
                                  .size()));
  EXPECT_LT(std::count(line.begin(), line.end(), ' '), 31);
}

TEST_F(TokenizersCli, TokenizeErrors) {
  TempDir tmp;
  spit(tmp / "t.txt", "text");
  const std::string data = (tmp / "t.txt").string();
  EXPECT_EQ(tokenize({"--tokenizer", "gpt2", "--gpt2-vocab", (tmp / "none").string(), "--data", data}).first,
            1);
  EXPECT_EQ(tokenize({"--tokenizer", "wordpiece", "--data", data}).first, 2);
  EXPECT_EQ(tokenize({"--tokenizer", "bpe", "--bpe-merges", "-1", "--data", data}).first, 2);
  EXPECT_EQ(tokenize({"--data", (tmp / "missing.txt").string()}).first, 1);
  spit(tmp / "bad.txt", "ok\xFF");
  EXPECT_EQ(
      tokenize({"--tokenizer", "gpt2", "--gpt2-vocab", kMini, "--data", (tmp / "bad.txt").string()}).first,
      1);
}

TEST_F(TokenizersCli, BpeTrainGenerateResume) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(tiny_train(tmp, {"--tokenizer", "bpe", "--bpe-merges", "20"})), 0);
  auto tok = saved_tokenizer(tmp);
  ASSERT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->vocab_size(), 256 + 20);
  EXPECT_EQ(tok->to_json(), xgrad::text::BPETokenizer::train(corpus_text(), 20).to_json());
  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "ck").string(), "--prompt", "Call me", "--max-new-tokens",
                 "5"}),
            0);
  // resume keeps the saved merges; another tokenizer is refused
  EXPECT_EQ(run({"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume", "--steps", "6",
                 "--no-progress", "--tokenizer", "char"}),
            2);
  EXPECT_EQ(
      run({"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume", "--steps", "6", "--no-progress"}),
      0);
  EXPECT_EQ(saved_tokenizer(tmp)->to_json(), tok->to_json());
}

TEST_F(TokenizersCli, Gpt2TrainGenerateResume) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run(tiny_train(tmp, {"--tokenizer", "gpt2", "--gpt2-vocab", kMini})), 0);
  auto tok = saved_tokenizer(tmp);
  ASSERT_EQ(tok->kind(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->encode("Call me Ishmael."), (std::vector<int64_t>{14134, 502, 1148, 21720, 417, 13}));
  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "ck").string(), "--prompt", "Call me", "--max-new-tokens",
                 "3", "--temperature", "0"}),
            0);
  // the vocabulary travels with the checkpoint: resuming needs no GPT-2 files
  EXPECT_EQ(run({"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume", "--steps", "6",
                 "--no-progress", "--gpt2-vocab", (tmp / "nowhere").string()}),
            0);
  // a new run without the files says how to get them
  EXPECT_EQ(run({"train", "--data", (tmp / "corpus.txt").string(), "--checkpoint-dir", (tmp / "ck2").string(),
                 "--tokenizer", "gpt2", "--gpt2-vocab", (tmp / "nowhere").string(), "--no-progress"}),
            1);
}
