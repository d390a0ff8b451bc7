// tests/train/test_train_flags.cpp: the training flags that change the step or the model:
//   --grad-accum N: N micro-batches per optimizer step give the step of one batch N times
//     larger (parameters after 20 steps, dropout 0), and the flag travels with --resume;
//   --tie-weights: one parameter fewer matrix, saved in the config, resumed, generated from;
//   generate and generate --no-kv-cache print the same text; --profile N.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "cli_capture.h"
#include "options.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::load_checkpoint_files;
using train_test::TempDir;

using train_test::RunResult;

namespace {

std::string corpus_text() { return train_test::ishmael_corpus(); }

TrainOptions options(const fs::path& dir, int64_t batch, int64_t accum) {
  TrainOptions o;
  o.model = {.vocab_size = 0,
             .context_length = 16,
             .emb_dim = 32,
             .n_heads = 2,
             .n_layers = 2,
             .drop_rate = 0.0,
             .qkv_bias = false};
  o.batch_size = batch;
  o.grad_accum = accum;
  o.steps = 20;
  o.warmup = 2;
  o.lr = 3e-3;
  o.eval_interval = 1000;  // evaluated once, at the end
  o.eval_iters = 1;
  o.sample_length = 0;
  o.checkpoint_dir = dir.string();
  return o;
}

// max |a - b| / max |b| over a tensor: the difference relative to the tensor's scale (float32
// rounding differs between one mean over 8 rows and a sum of 1/N-scaled means over 8/N rows,
// and 20 AdamW steps carry it on; element-wise, values near 0 would make any rounding large)
double max_rel_diff(const xgrad::Tensor& a, const xgrad::Tensor& b) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::fabs(x[i] - y[i]));
    scale = std::max(scale, std::fabs(y[i]));
  }
  return diff / scale;
}

TEST(GradAccum, MicroBatchesGiveTheStepOfOneLargeBatch) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  const std::string text = corpus_text();
  Trainer big(options(tmp / "big", 8, 1), make_corpus(text, 16, "text"));
  TrainResult rb = big.train();
  for (int64_t accum : {2, 4}) {
    Trainer acc(options(tmp / ("acc" + std::to_string(accum)), 8 / accum, accum),
                make_corpus(text, 16, "text"));
    TrainResult ra = acc.train();
    ASSERT_EQ(ra.history.size(), 20u);
    double worst = 0;
    auto pa = acc.model().named_parameters(), pb = big.model().named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      const double d = max_rel_diff(pa[i].second, pb[i].second);
      EXPECT_LE(d, 1e-5) << pa[i].first << " with --grad-accum " << accum;
      worst = std::max(worst, d);
    }
    // the logged loss is the mean over the whole batch, at the optimizer step
    for (std::size_t s = 0; s < 20; ++s) {
      EXPECT_NEAR(ra.history[s].train_loss, rb.history[s].train_loss, 1e-5 * rb.history[s].train_loss) << s;
      EXPECT_EQ(ra.history[s].lr, rb.history[s].lr) << s;
    }
    std::printf("--grad-accum %lld: max relative parameter difference %.3g after 20 steps\n",
                static_cast<long long>(accum), worst);
  }
  // and the accumulation is not a no-op: one micro-batch alone gives another step
  Trainer one(options(tmp / "one", 4, 1), make_corpus(text, 16, "text"));
  one.train();
  EXPECT_GT(max_rel_diff(one.model().tok_emb->weight, big.model().tok_emb->weight), 1e-3);
}

RunResult run(const std::vector<std::string>& args) { return train_test::run_captured(args); }

TEST(TrainLm, GradAccumAndTieWeightsTravelWithTheCheckpoint) {
  spdlog::set_level(spdlog::level::info);
  TempDir tmp;
  train_test::spit(tmp / "corpus.txt", corpus_text());
  const std::string ck = (tmp / "ck").string();
  RunResult r = run(train_test::tiny_train_args(
      tmp / "corpus.txt", ck,
      {"--batch-size", "2", "--grad-accum", "3", "--tie-weights", "--steps", "4", "--warmup", "1",
       "--eval-interval", "2", "--eval-iters", "1", "--sample-length", "5", "--seed", "3"}));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("batch 2 x 3 micro-batches"), std::string::npos) << r.out;
  auto files = load_checkpoint_files(ck);
  const auto cfg = nlohmann::json::parse(files.at(kModelFile).metadata.at("config"));
  EXPECT_EQ(cfg.at("tie_weights"), true);
  int both = 0;  // state_dict's two names for the tied tensor, as torch saves them
  for (const auto& [name, t] : files.at(kModelFile).tensors)
    both += name == "out_head.weight" || name == "tok_emb.weight";
  EXPECT_EQ(both, 2);
  // resumed: the saved flags come back (a mismatching --tie-weights is refused)
  r = run({"train", "--checkpoint-dir", ck, "--resume", "--steps", "6", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("batch 2 x 3 micro-batches"), std::string::npos) << r.out;
  r = run(
      {"generate", "--checkpoint", ck, "--prompt", "Call", "--max-new-tokens", "5", "--temperature", "0"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("Call", 0), 0u) << r.out;
  // generation with and without the KV cache, past the context (8): the same text at
  // temperature 0, and with the same seed at temperature 1
  for (const char* temperature : {"0", "1"}) {
    RunResult cached = run({"generate", "--checkpoint", ck, "--prompt", "Call me", "--max-new-tokens", "30",
                            "--temperature", temperature, "--seed", "5"});
    RunResult recomputed = run({"generate", "--checkpoint", ck, "--prompt", "Call me", "--max-new-tokens",
                                "30", "--temperature", temperature, "--seed", "5", "--no-kv-cache"});
    ASSERT_EQ(cached.code, 0) << cached.out;
    ASSERT_EQ(recomputed.code, 0) << recomputed.out;
    EXPECT_EQ(cached.out, recomputed.out) << temperature;
    EXPECT_EQ(cached.out.size(), 7u + 30u + 1u);
  }
  // --profile N: the op table and a Chrome trace that parses
  const std::string ck2 = (tmp / "ck2").string();
  r = run(train_test::tiny_train_args(tmp / "corpus.txt", ck2,
                                      {"--batch-size", "2", "--steps", "3", "--warmup", "1", "--eval-iters",
                                       "1", "--sample-length", "0", "--profile", "2"}));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("profile of 2 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Self CPU %"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Optimizer.step"), std::string::npos) << r.out;
  const auto trace = nlohmann::json::parse(train_test::slurp(fs::path(ck2) / "profile_trace.json"));
  EXPECT_GT(trace.at("traceEvents").size(), 10u);
  r = run({"train", "--data", (tmp / "corpus.txt").string(), "--checkpoint-dir", ck, "--grad-accum", "0",
           "--no-progress"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--grad-accum"), std::string::npos) << r.out;
}

}  // namespace
