// tests/train/test_train_dtype.cpp: train_lm --dtype bf16 (the forward pass and its loss under
// xgrad::autocast): the flag parses, is checked and saved; a bf16 run, GPT or Llama, trains
// (its loss falls) on float32 weights and moments, takes different steps than the float32 run
// (so autocast really ran) yet stays close to it, and its checkpoint holds float32 tensors.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <string>

#include "options.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::TempDir;

namespace {

TrainOptions options(const fs::path& dir, const std::string& dtype, const std::string& arch = "gpt") {
  TrainOptions o;
  o.arch = arch;
  o.model = {.vocab_size = 0,
             .context_length = 16,
             .emb_dim = 32,
             .n_heads = 2,
             .n_layers = 2,
             .drop_rate = 0.0,
             .qkv_bias = false};
  o.batch_size = 4;
  o.steps = 30;
  o.warmup = 2;
  o.lr = 3e-3;
  o.eval_interval = 1000;  // evaluated once, at the end
  o.eval_iters = 2;
  o.sample_length = 0;
  o.checkpoint_dir = dir.string();
  o.dtype = dtype;
  return o;
}

TEST(TrainLmDtype, FlagParsesIsCheckedAndSaved) {
  CliParse p = parse_cli({"train_lm", "train", "--dtype", "bf16"});
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.dtype, "bf16");
  EXPECT_EQ(train_options_to_json(p.train)["dtype"], "bf16");
  EXPECT_EQ(parse_cli({"train_lm", "train"}).train.dtype, "fp32");
  TrainOptions o;
  o.dtype = "fp16";
  try {
    validate(o);
    ADD_FAILURE() << "--dtype fp16 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype must be fp32 or bf16, got 'fp16'"), std::string::npos)
        << e.what();
  }
}

// the GPT and the Llama (whose RoPE and SwiGLU then see bfloat16 queries, keys and activations)
class TrainLmDtypeArch : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainLmDtypeArch, Bf16TrainsFloat32WeightsCloseToTheFloat32Run) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  const std::string text = train_test::ishmael_corpus();
  Trainer fp32(options(tmp / "fp32", "fp32", GetParam()), make_corpus(text, 16, "text"));
  const TrainResult r32 = fp32.train();
  Trainer bf16(options(tmp / "bf16", "bf16", GetParam()), make_corpus(text, 16, "text"));
  const TrainResult r16 = bf16.train();
  ASSERT_EQ(r16.history.size(), 30u);
  EXPECT_LT(r16.history.back().train_loss, r16.history.front().train_loss - 0.5);  // it learns
  // the first step's loss differs (bfloat16 products) but only by bfloat16's rounding
  EXPECT_NE(r16.history.front().train_loss, r32.history.front().train_loss);
  EXPECT_NEAR(r16.history.front().train_loss, r32.history.front().train_loss,
              0.01 * r32.history.front().train_loss);
  ASSERT_TRUE(r16.last_val_loss && r32.last_val_loss);
  EXPECT_NEAR(*r16.last_val_loss, *r32.last_val_loss, 0.05 * *r32.last_val_loss);
  for (const auto& [name, p] : bf16.module().named_parameters())
    EXPECT_EQ(p.dtype(), xgrad::kFloat32) << name;
  ASSERT_TRUE(r16.last_checkpoint);  // saved at the last step
  const xgrad::io::Checkpoint ck = train_test::load_checkpoint_files(*r16.last_checkpoint);
  for (const auto& file : {"model.safetensors", "train_state.safetensors"})
    for (const auto& [name, t] : ck.at(file).tensors)
      if (xgrad::is_floating(t.dtype())) EXPECT_EQ(t.dtype(), xgrad::kFloat32) << file << " " << name;
  spdlog::set_level(spdlog::level::info);
}

INSTANTIATE_TEST_SUITE_P(Arch, TrainLmDtypeArch, ::testing::Values("gpt", "llama"),
                         [](const auto& info) { return info.param; });

// --dtype bf16 with --activation-checkpointing: the blocks' reruns in backward run under the
// forward's autocast, so the run takes the same steps, bit for bit, as without checkpointing.
TEST(TrainLmDtype, Bf16WithActivationCheckpointingTakesTheSameSteps) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  const std::string text = train_test::ishmael_corpus();
  TrainOptions plain_o = options(tmp / "plain", "bf16"), ck_o = options(tmp / "ck", "bf16");
  plain_o.steps = ck_o.steps = 5;
  plain_o.model.drop_rate = ck_o.model.drop_rate = 0.1;
  ck_o.model.activation_checkpointing = true;
  Trainer plain(plain_o, make_corpus(text, 16, "text"));
  const TrainResult a = plain.train();
  Trainer ck(ck_o, make_corpus(text, 16, "text"));
  const TrainResult b = ck.train();
  ASSERT_EQ(a.history.size(), 5u);
  ASSERT_EQ(b.history.size(), 5u);
  for (std::size_t i = 0; i < a.history.size(); ++i)
    EXPECT_EQ(a.history[i].train_loss, b.history[i].train_loss) << i;
  const auto pa = plain.model().named_parameters(), pb = ck.model().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
  spdlog::set_level(spdlog::level::info);
}

}  // namespace
