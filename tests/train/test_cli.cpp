// tests/train/test_cli.cpp: the train_lm command line, run in-process through run_cli():
// presets and flags, every bad input (clear message, non-zero exit, nothing existing
// overwritten), and a tiny train -> generate -> resume session.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "memory.h"
#include "options.h"
#include "progress.h"
#include "train.h"
#include "train_test_util.h"

using namespace train_lm;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

namespace {

std::vector<std::string> argv_of(std::initializer_list<std::string> a) {
  std::vector<std::string> v = {"train_lm"};
  v.insert(v.end(), a);
  return v;
}

int run(std::initializer_list<std::string> a) { return run_cli(argv_of(a)); }

std::string corpus_text() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "Call me Ishmael. Some years ago, never mind how long.\n";
  return s;
}

// Flags for a model that trains in a fraction of a second.
std::vector<std::string> tiny_flags(const TempDir& tmp, const std::string& ck = "ck") {
  return {"--data",           (tmp / "corpus.txt").string(),
          "--checkpoint-dir", (tmp / ck).string(),
          "--context-length", "8",
          "--emb-dim",        "16",
          "--n-heads",        "2",
          "--n-layers",       "1",
          "--batch-size",     "4",
          "--eval-iters",     "2",
          "--sample-length",  "10",
          "--no-progress"};
}

// `train` with tiny_flags plus `extra`, checkpoints in tmp/<ck>.
int run_train(const TempDir& tmp, std::initializer_list<std::string> extra, const std::string& ck = "ck") {
  std::vector<std::string> a = {"train_lm", "train"};
  for (const auto& f : tiny_flags(tmp, ck)) a.push_back(f);
  a.insert(a.end(), extra);
  return run_cli(a);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::err); }
  void TearDown() override { spdlog::set_level(spdlog::level::info); }
};

}  // namespace

TEST_F(CliTest, PresetsAndOverrides) {
  auto p = parse_cli(argv_of({"train", "--preset", "tiny"}));
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.model.context_length, 64);
  EXPECT_EQ(p.train.model.emb_dim, 64);
  EXPECT_EQ(p.train.model.n_heads, 4);
  EXPECT_EQ(p.train.model.n_layers, 2);
  EXPECT_EQ(p.train.batch_size, 32);
  EXPECT_DOUBLE_EQ(p.train.model.drop_rate, 0.1);

  p = parse_cli(argv_of({"train", "--preset", "medium", "--emb-dim", "192", "--batch-size", "2"}));
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.model.context_length, 256);
  EXPECT_EQ(p.train.model.emb_dim, 192);  // explicit flags win over the preset
  EXPECT_EQ(p.train.model.n_heads, 6);
  EXPECT_EQ(p.train.batch_size, 2);
  EXPECT_TRUE(p.train.explicit_flags.count("emb-dim"));
  EXPECT_FALSE(p.train.explicit_flags.count("n-heads"));

  // gpt2: GPT-2 small, tied, with GPT-2's tokenizer: 124,412,160 parameters at its 50,257 tokens
  p = parse_cli(argv_of({"train", "--preset", "gpt2"}));
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.model.context_length, 1024);
  EXPECT_EQ(p.train.model.emb_dim, 768);
  EXPECT_EQ(p.train.model.n_heads, 12);
  EXPECT_EQ(p.train.model.n_layers, 12);
  EXPECT_TRUE(p.train.model.tie_weights);
  EXPECT_FALSE(p.train.model.qkv_bias);
  EXPECT_EQ(p.train.batch_size, 8);
  EXPECT_EQ(p.train.tokenizer.kind, "gpt2");
  GPTConfig gpt2 = p.train.model;
  gpt2.vocab_size = 50257;
  EXPECT_EQ(estimate_training_memory(gpt2, 8).parameters, 124412160.0);
  EXPECT_EQ(parse_cli(argv_of({"train", "--preset", "gpt2", "--tokenizer", "char"})).train.tokenizer.kind,
            "char");
  EXPECT_EQ(parse_cli(argv_of({"train", "--preset", "medium"})).train.tokenizer.kind, "char");
  EXPECT_FALSE(parse_cli(argv_of({"train", "--preset", "medium"})).train.model.tie_weights);
  EXPECT_EQ(parse_cli(argv_of({"train", "--preset", "llama-gpt2"})).kind, CliParse::kExit);

  p = parse_cli(argv_of({"train"}));  // default preset: small
  EXPECT_EQ(p.train.model.context_length, 128);
  EXPECT_EQ(p.train.model.emb_dim, 128);
  EXPECT_EQ(p.train.batch_size, 16);
  EXPECT_EQ(p.train.data, "data/moby_dick.txt");
  EXPECT_EQ(p.train.metrics_path(), "checkpoints/train_lm/metrics.csv");

  p = parse_cli(argv_of({"train", "--steps", "50"}));  // warmup shrinks with a short run
  EXPECT_EQ(p.train.warmup, 5);

  p = parse_cli(argv_of({"generate", "--checkpoint", "x", "--prompt", "Call me", "--max-new-tokens", "7",
                         "--temperature", "0.5", "--top-k", "3", "--seed", "9"}));
  ASSERT_EQ(p.kind, CliParse::kGenerate);
  EXPECT_EQ(p.generate.checkpoint, "x");
  EXPECT_EQ(p.generate.max_new_tokens, 7);
  EXPECT_EQ(p.generate.sampling.top_k, 3);
  EXPECT_EQ(p.generate.seed, 9u);
}

TEST_F(CliTest, BadFlagsExitNonZero) {
  for (auto args : std::vector<std::vector<std::string>>{
           {},                                               // no subcommand
           {"fly"},                                          // unknown subcommand
           {"train", "--no-such-flag"},                      // unknown flag
           {"train", "--lr", "-0.1"},                        // negative lr
           {"train", "--lr", "abc"},                         // not a number
           {"train", "--n-heads", "0"},                      // zero heads
           {"train", "--emb-dim", "130", "--n-heads", "4"},  // not divisible
           {"train", "--preset", "huge"},
           {"train", "--steps", "0"},
           {"train", "--warmup", "10", "--steps", "10"},
           {"train", "--drop-rate", "1.5"},
           {"train", "--min-lr", "1", "--lr", "0.1"},
           {"train", "--batch-size", "-3"},
           {"train", "--time-budget", "-1"},
           {"generate", "--max-new-tokens", "-1"},
           {"generate", "--temperature", "-1"},
       }) {
    std::vector<std::string> a = {"train_lm"};
    a.insert(a.end(), args.begin(), args.end());
    EXPECT_EQ(parse_cli(a).kind, CliParse::kExit) << ::testing::PrintToString(args);
    EXPECT_EQ(run_cli(a), 2) << ::testing::PrintToString(args);
  }
  EXPECT_EQ(run({"--help"}), 0);
}

TEST_F(CliTest, BadCorpusExitsNonZero) {
  TempDir tmp;
  EXPECT_EQ(run_train(tmp, {}), 1);  // corpus.txt missing
  spit(tmp / "corpus.txt", "");
  EXPECT_EQ(run_train(tmp, {}), 1);  // empty
  spit(tmp / "corpus.txt", "Call me Ishmael.");
  EXPECT_EQ(run_train(tmp, {}), 1);  // shorter than one window per split
  spit(tmp / "corpus.txt", corpus_text() + "\xC3");
  EXPECT_EQ(run_train(tmp, {}), 1);  // invalid UTF-8
  EXPECT_FALSE(fs::exists(tmp / "ck" / "latest"));
}

TEST_F(CliTest, NothingExistingIsOverwritten) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run_train(tmp, {"--steps", "4", "--eval-interval", "2"}), 0);
  const std::string latest = slurp(tmp / "ck" / "latest");
  const std::string model = slurp(tmp / "ck" / "step_00000004" / "model.safetensors");
  const std::string metrics = slurp(tmp / "ck" / "metrics.csv");

  // a second run into the same directory without --resume is refused
  EXPECT_EQ(run_train(tmp, {"--steps", "4"}), 1);
  // resuming with a different model is refused
  EXPECT_EQ(run_train(tmp, {"--resume", "--steps", "6", "--emb-dim", "32"}), 2);
  // resuming on a corpus with another vocabulary is refused
  spit(tmp / "other.txt", corpus_text() + "XYZ");
  {
    std::vector<std::string> a = {"train_lm", "train"};
    for (const auto& f : tiny_flags(tmp)) a.push_back(f);
    a[3] = (tmp / "other.txt").string();  // --data
    a.insert(a.end(), {"--resume", "--steps", "6"});
    EXPECT_EQ(run_cli(a), 1);
  }
  // a corrupted train state is refused
  fs::path state = tmp / "ck" / "step_00000004" / "train_state.safetensors";
  const std::string good_state = slurp(state);
  spit(state, good_state.substr(0, good_state.size() - 10));
  EXPECT_EQ(run_train(tmp, {"--resume", "--steps", "6"}), 1);
  std::string flipped = good_state;
  flipped[flipped.size() - 5] ^= 1;
  spit(state, flipped);
  EXPECT_EQ(run_train(tmp, {"--resume", "--steps", "6"}), 1);
  spit(state, good_state);

  EXPECT_EQ(slurp(tmp / "ck" / "latest"), latest);
  EXPECT_EQ(slurp(tmp / "ck" / "step_00000004" / "model.safetensors"), model);
  EXPECT_EQ(slurp(tmp / "ck" / "metrics.csv"), metrics);

  // --resume without a checkpoint; an unwritable checkpoint dir (below a regular file)
  EXPECT_EQ(run_train(tmp, {"--resume"}, "nothing"), 1);
  spit(tmp / "file", "x");
  EXPECT_EQ(run_train(tmp, {"--steps", "2"}, "file/ck"), 1);
  EXPECT_EQ(slurp(tmp / "file"), "x");
  // a new run with an existing --metrics file
  spit(tmp / "m.csv", "keep me");
  EXPECT_EQ(run_train(tmp, {"--steps", "2", "--metrics", (tmp / "m.csv").string()}, "ck2"), 1);
  EXPECT_EQ(slurp(tmp / "m.csv"), "keep me");
}

TEST_F(CliTest, TrainGenerateResume) {
  TempDir tmp;
  spit(tmp / "corpus.txt", corpus_text());
  ASSERT_EQ(run_train(tmp, {"--steps", "6", "--eval-interval", "3"}), 0);
  EXPECT_EQ(slurp(tmp / "ck" / "latest"), "step_00000006\n");
  EXPECT_EQ(MetricsLog::read(tmp / "ck" / "metrics.csv").size(), 6u);
  EXPECT_TRUE(fs::exists(tmp / "ck" / "metrics.png") || fs::exists(tmp / "ck" / "metrics.svg"));

  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "ck").string(), "--prompt", "Call me", "--max-new-tokens",
                 "12", "--seed", "3"}),
            0);
  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "ck" / "step_00000006").string(), "--prompt", "Call",
                 "--max-new-tokens", "5", "--temperature", "0"}),
            0);
  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "ck").string(), "--prompt", "Qq"}), 1);  // not in vocab
  EXPECT_EQ(run({"generate", "--checkpoint", (tmp / "nowhere").string()}), 1);
  EXPECT_EQ(run({"generate", "--checkpoint", XGRAD_FIXTURES_DIR "/gpt_tiny", "--prompt", "Ishmael",
                 "--max-new-tokens", "4"}),
            0);  // written by PyTorch

  // resume (everything but --steps comes from the checkpoint) and extend to 8 steps
  ASSERT_EQ(
      run({"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume", "--steps", "8", "--no-progress"}),
      0);
  EXPECT_EQ(slurp(tmp / "ck" / "latest"), "step_00000008\n");
  auto rows = MetricsLog::read(tmp / "ck" / "metrics.csv");
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows.back().step, 8);
  // already done: nothing to do, exit 0
  EXPECT_EQ(
      run({"train", "--checkpoint-dir", (tmp / "ck").string(), "--resume", "--steps", "8", "--no-progress"}),
      0);
}
