// tests/train/test_train_checkpointing.cpp: train_lm --activation-checkpointing (the
// GPTConfig field, made a flag by the config's field table): twenty steps with dropout and
// gradient accumulation give the same loss bits at every step and the same parameter bits as
// without it; the flag is saved in the checkpoint's config, a run may resume with it toggled,
// and a saved config without the field loads (as not checkpointed).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "cli_capture.h"
#include "gpt_checkpoint.h"
#include "options.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::load_checkpoint_files;
using train_test::RunResult;
using train_test::TempDir;

namespace {

TrainOptions options(const fs::path& dir, bool checkpointing) {
  TrainOptions o;
  o.model = {.vocab_size = 0,
             .context_length = 16,
             .emb_dim = 32,
             .n_heads = 2,
             .n_layers = 3,
             .drop_rate = 0.1,
             .qkv_bias = false,
             .activation_checkpointing = checkpointing};
  o.batch_size = 2;
  o.grad_accum = 2;
  o.steps = 20;
  o.warmup = 2;
  o.lr = 3e-3;
  o.eval_interval = 1000;  // evaluated once, at the end
  o.eval_iters = 1;
  o.sample_length = 0;
  o.checkpoint_dir = dir.string();
  return o;
}

std::vector<uint64_t> bits(const xgrad::Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to(xgrad::kFloat64).to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

TEST(TrainLm, ActivationCheckpointingGivesTheSameLossAndParameterBits) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  const std::string text = train_test::ishmael_corpus();
  // each built and trained in turn: the default generator (dropout) is seeded by the constructor
  Trainer plain(options(tmp / "plain", false), make_corpus(text, 16, "text"));
  const TrainResult rp = plain.train();
  Trainer ck(options(tmp / "ck", true), make_corpus(text, 16, "text"));
  const TrainResult rc = ck.train();
  ASSERT_EQ(rc.history.size(), 20u);
  ASSERT_EQ(rp.history.size(), 20u);
  for (std::size_t s = 0; s < 20; ++s)
    EXPECT_EQ(std::bit_cast<uint64_t>(rc.history[s].train_loss),
              std::bit_cast<uint64_t>(rp.history[s].train_loss))
        << "step " << s;
  EXPECT_EQ(rc.last_val_loss, rp.last_val_loss);
  const auto pc = ck.model().named_parameters(), pp = plain.model().named_parameters();
  ASSERT_EQ(pc.size(), pp.size());
  for (std::size_t i = 0; i < pc.size(); ++i)
    EXPECT_EQ(bits(pc[i].second), bits(pp[i].second)) << pc[i].first;
}

TEST(TrainLm, ActivationCheckpointingFlagIsSavedAndMayChangeOnResume) {
  spdlog::set_level(spdlog::level::info);
  TempDir tmp;
  train_test::spit(tmp / "corpus.txt", train_test::ishmael_corpus());
  const std::string dir = (tmp / "ck").string();
  RunResult r = train_test::run_captured(
      train_test::tiny_train_args(tmp / "corpus.txt", dir,
                                  {"--activation-checkpointing", "--batch-size", "2", "--steps", "3",
                                   "--warmup", "1", "--eval-iters", "1", "--sample-length", "0"}));
  ASSERT_EQ(r.code, 0) << r.out;
  auto files = load_checkpoint_files(dir);
  nlohmann::json cfg = nlohmann::json::parse(files.at(kModelFile).metadata.at("config"));
  EXPECT_EQ(cfg.at("activation_checkpointing"), true);
  // resumed without the flag: this run's choice, not the checkpoint's
  r = train_test::run_captured(
      {"train", "--checkpoint-dir", dir, "--resume", "--steps", "5", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out;
  cfg = nlohmann::json::parse(load_checkpoint_files(dir).at(kModelFile).metadata.at("config"));
  EXPECT_EQ(cfg.at("activation_checkpointing"), false);
  // a config saved before the field existed
  cfg.erase("activation_checkpointing");
  EXPECT_FALSE(xgrad_examples::gpt_config_from_json(cfg).activation_checkpointing);
  EXPECT_EQ(xgrad_examples::gpt_config_from_json(cfg).emb_dim, 16);
}

}  // namespace
