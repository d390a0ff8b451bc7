// tests/nn/test_generate.cpp: GPTModel::generate with a KV cache against the full recompute
// (the logits of every generated position, also past context_length where the window slides),
// the cached forward against the plain one, sampling (greedy, top-k, top-p, seeds), the
// restored mode, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_error;

const GPTConfig kCfg{.vocab_size = 40,
                     .context_length = 12,
                     .emb_dim = 32,
                     .n_heads = 4,
                     .n_layers = 2,
                     .drop_rate = 0.1,
                     .qkv_bias = true};

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

// Every step's (b, vocab) logits of one generate() call.
std::vector<Tensor> logits_of(GPTModel& model, const Tensor& idx, int64_t n, GenerateOptions o,
                              Tensor* out = nullptr) {
  std::vector<Tensor> all;
  Generator gen(11);
  Tensor ids = model.generate(idx, n, o, gen, [&](const Tensor& l) { all.push_back(l.clone()); });
  if (out) *out = ids;
  return all;
}

TEST(Generate, CachedLogitsEqualTheFullRecomputeAlsoPastTheContext) {
  manual_seed(3);
  GPTModel model(kCfg);
  Tensor prompt = tensor<int64_t>({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}});
  const int64_t n = 20;  // 5 + 20 tokens: the window slides past context_length 12
  for (double temperature : {0.0, 1.0}) {
    GenerateOptions with{.temperature = temperature}, without = with;
    without.use_kv_cache = false;
    Tensor ids_with, ids_without;
    auto a = logits_of(model, prompt, n, with, &ids_with);
    auto b = logits_of(model, prompt, n, without, &ids_without);
    ASSERT_EQ(a.size(), size_t(n));
    ASSERT_EQ(b.size(), size_t(n));
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(a[i].shape(), (Shape{2, 40}));
      worst = std::max(worst, max_abs_diff(a[i], b[i]));
    }
    EXPECT_LE(worst, 1e-5) << "temperature " << temperature;
    EXPECT_EQ(ids_with.shape(), (Shape{2, 25}));
    EXPECT_EQ(ids_with.to_vector<int64_t>(), ids_without.to_vector<int64_t>());
    // and the recompute is what it says: the last context_length tokens through forward()
    Tensor window = ids_without.slice(1, 25 - 1 - kCfg.context_length, 25 - 1);
    NoGradGuard g;
    model.eval();
    Tensor full = model(window).select(1, kCfg.context_length - 1);
    model.train();
    EXPECT_LE(max_abs_diff(full, b[n - 1]), 1e-6);
  }
  EXPECT_TRUE(model.is_training());  // the mode is restored
}

TEST(Generate, CachedForwardInChunksEqualsForward) {
  manual_seed(4);
  GPTModel model(kCfg);
  model.eval();
  NoGradGuard g;
  Tensor ids = randint(0, 40, {2, 12});
  Tensor full = model(ids);
  KVCache cache;
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t len : {5, 1, 3, 1, 2}) {  // a prefill, single tokens, and chunks after a cache
    parts.push_back(model.forward(ids.slice(1, at, at + len), cache));
    at += len;
    EXPECT_EQ(cache.size(), at);
  }
  EXPECT_LE(max_abs_diff(cat(parts, 1), full), 1e-5);
  expect_error([&] { model.forward(ids.slice(1, 0, 1), cache); },
               {"after 12 cached ones but context_length is 12", "reset the cache"});
  cache.reset();
  EXPECT_EQ(cache.size(), 0);
}

TEST(Generate, SamplingSeedsTopKAndTopP) {
  manual_seed(5);
  GPTModel model(kCfg);
  Tensor prompt = tensor<int64_t>({{1, 2, 3}});
  GenerateOptions o{.temperature = 1.0, .seed = 42};
  Tensor a = model.generate(prompt, 8, o), b = model.generate(prompt, 8, o);
  EXPECT_EQ(a.to_vector<int64_t>(), b.to_vector<int64_t>());  // same seed, same text
  o.seed = 43;
  EXPECT_NE(model.generate(prompt, 8, o).to_vector<int64_t>(), a.to_vector<int64_t>());
  // top_k 1 and a tiny top_p both leave only the most likely token: greedy
  const auto greedy = model.generate(prompt, 8).to_vector<int64_t>();
  EXPECT_EQ(model.generate(prompt, 8, {.temperature = 1.0, .top_k = 1, .seed = 1}).to_vector<int64_t>(),
            greedy);
  EXPECT_EQ(model.generate(prompt, 8, {.temperature = 1.0, .top_p = 1e-9, .seed = 1}).to_vector<int64_t>(),
            greedy);
  // with top_k 3 every sampled token is one of the 3 most likely
  std::vector<Tensor> steps;
  Generator gen(9);
  Tensor ids = model.generate(prompt, 8, {.temperature = 2.0, .top_k = 3}, gen,
                              [&](const Tensor& l) { steps.push_back(l.clone()); });
  for (int64_t i = 0; i < 8; ++i) {
    auto row = steps[i].select(0, 0).to_vector<float>();
    const float tok = row[ids.to_vector<int64_t>()[3 + i]];
    int larger = 0;
    for (float v : row) larger += v > tok;
    EXPECT_LT(larger, 3) << i;
  }
  EXPECT_EQ(model.generate(prompt, 0).to_vector<int64_t>(), prompt.to_vector<int64_t>());
}

TEST(Generate, Errors) {
  GPTModel model(kCfg);
  Tensor prompt = tensor<int64_t>({{1, 2, 3}});
  expect_error([&] { model.generate(prompt, 2, {.temperature = -1}); }, {"generate: temperature -1"});
  expect_error([&] { model.generate(prompt, 2, {.temperature = 1e-310}); }, {"subnormal"});
  expect_error([&] { model.generate(prompt, 2, {.top_k = -2}); }, {"top_k -2"});
  expect_error([&] { model.generate(prompt, 2, {.top_p = 0}); }, {"top_p 0 must be in (0, 1]"});
  expect_error([&] { model.generate(prompt, -1); }, {"max_new_tokens must be >= 0"});
  expect_error([&] { model.generate(tensor({{1.0f}}), 2); }, {"int64", "[1, 1]"});
  expect_error([&] { model.generate(tensor<int64_t>({{1, 99}}), 2); }, {"index 99", "num_embeddings 40"});
  EXPECT_TRUE(model.is_training());  // restored after an error too
}

}  // namespace
}  // namespace xgrad::nn
