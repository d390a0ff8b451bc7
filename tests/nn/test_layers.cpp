// tests/nn/test_layers.cpp: Linear, Embedding, LayerNorm, GELU, Dropout, FeedForward:
// torch's initial weights after manual_seed(123) (tests/fixtures/gpt.txt, gen_gpt.py),
// forward values, errors, and gradchecks of each module's forward with respect to its input
// and its parameters in double precision (module.to(kFloat64), parameters passed to
// gradcheck as inputs: it perturbs them in place).
#include <gtest/gtest.h>

#include <cmath>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& gpt_fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/gpt.txt");
  return fx;
}

// Gradcheck of `module` on `x` w.r.t. x (when it requires grad) and every parameter.
GradcheckResult check_module(Module& module, const Tensor& x, const std::string& name, double atol = 1e-6) {
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  return gradcheck([&](const std::vector<Tensor>& in) { return module(in[0]); }, inputs,
                   {.name = name, .atol = atol});
}

TEST(Layers, LinearInitMatchesTorch) {
  const Fixture& fx = gpt_fixture();
  manual_seed(123);
  Linear lin(6, 6);
  expect_close(lin.weight, fx.get("init.linear6.weight"), 0, 0, "Linear(6, 6).weight");
  expect_close(lin.bias, fx.get("init.linear6.bias"), 0, 0, "Linear(6, 6).bias");
  manual_seed(123);
  Linear nobias(3, 2, false);
  EXPECT_FALSE(nobias.bias.defined());
  expect_close(nobias.weight, fx.get("init.linear3x2.weight"), 0, 0, "Linear(3, 2).weight");
  manual_seed(123);
  Linear wide(16, 64);
  expect_close(wide.weight, fx.get("init.linear16x64.weight"), 0, 0, "Linear(16, 64).weight");
  expect_close(wide.bias, fx.get("init.linear16x64.bias"), 0, 0, "Linear(16, 64).bias");
  EXPECT_EQ(wide.weight.shape(), (Shape{64, 16}));
}

TEST(Layers, EmbeddingInitMatchesTorchAndTheAttentionArticle) {
  manual_seed(123);
  Embedding emb(5, 4);
  expect_close(emb.weight, gpt_fixture().get("init.embedding5x4.weight"), 1e-6, 1e-7,
               "Embedding(5, 4).weight");
  // the article of examples/seeds/seed002_attention_article.cpp prints 0.3374, -0.1778,
  // -0.3035, -0.5880 for the first row
  std::vector<float> w = emb.weight.to_vector<float>();
  EXPECT_NEAR(w[0], 0.3374, 1e-4);
  EXPECT_NEAR(w[1], -0.1778, 1e-4);
  EXPECT_NEAR(w[2], -0.3035, 1e-4);
  EXPECT_NEAR(w[3], -0.5880, 1e-4);
}

TEST(Layers, ForwardValues) {
  manual_seed(0);
  Linear lin(3, 2);
  Tensor x = randn({4, 3});
  expect_close(lin(x), matmul(x, lin.weight.t()) + lin.bias, 1e-6, 1e-6, "Linear");
  Tensor x3 = randn({2, 4, 3});
  EXPECT_EQ(lin(x3).shape(), (Shape{2, 4, 2}));

  Embedding emb(10, 3);
  Tensor ids = tensor({{1, 0}, {9, 1}});
  Tensor e = emb(ids);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  expect_close(e.select(0, 1).select(0, 0), emb.weight.select(0, 9), 0, 0, "Embedding row 9");

  LayerNorm ln(3);
  Tensor y = ln(x).detach();
  // each row has mean 0 and biased variance 1 (up to eps)
  expect_close(mean(y, {-1}), zeros({4}), 0, 1e-6, "LayerNorm mean");
  expect_close(var(y, {-1}, /*unbiased=*/false), ones({4}), 1e-4, 1e-4, "LayerNorm var");
  EXPECT_EQ(ln.weight.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(ln.bias.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(LayerNorm(3, 1e-5, false).named_parameters().size(), 0u);

  GELU g("tanh");
  expect_close(g(x), gelu(x, "tanh"), 0, 0, "GELU");
  Identity id;
  EXPECT_EQ(id(x).unsafe_impl(), x.unsafe_impl());
}

TEST(Layers, BadArgumentsThrow) {
  EXPECT_THROW(Linear(-1, 2), Error);
  EXPECT_THROW(Dropout(1.5), Error);
  EXPECT_THROW(Dropout(-0.1), Error);
  EXPECT_THROW(GELU("fast"), Error);
  EXPECT_THROW(Embedding(-2, 3), Error);
  EXPECT_THROW(LayerNorm(0), Error);
  Linear lin(3, 2);
  try {
    lin(ones({4, 5}));
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in_features=3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[4, 5]"), std::string::npos) << e.what();
  }
  Embedding emb(4, 2);
  EXPECT_THROW(emb(ones({2})), Error);       // float ids
  EXPECT_THROW(emb(tensor({0, 4})), Error);  // out of range
}

TEST(Layers, DropoutModule) {
  Dropout drop(0.5);
  Tensor x = ones({1000});
  manual_seed(123);
  Tensor y = drop(x);
  // the same mask torch draws: bernoulli_(1 - p) on the default generator, scaled by 2
  manual_seed(123);
  Tensor mask = empty({1000});
  mask.bernoulli_(0.5);
  expect_close(y, mask * 2.0, 0, 0, "Dropout mask");
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
  Dropout zero(0.0);
  EXPECT_EQ(zero(x).to_vector<float>(), x.to_vector<float>());
}

TEST(Layers, LossModules) {
  manual_seed(8);
  Tensor logits = randn({2, 5, 3});  // (N, C, d1), as torch's nn.CrossEntropyLoss
  Tensor targets = tensor({{0, 4, -100}, {2, 2, 1}});
  CrossEntropyLoss criterion;
  EXPECT_EQ(criterion(logits, targets).item(), cross_entropy(logits, targets).item());
  CrossEntropyLoss smoothed({.reduction = "none", .label_smoothing = 0.1});
  expect_close(smoothed(logits, targets),
               cross_entropy(logits, targets, {.reduction = "none", .label_smoothing = 0.1}), 0, 0,
               "options");
  Tensor a = randn({4}), b = randn({4});
  EXPECT_EQ(MSELoss()(a, b).item(), mse_loss(a, b).item());
  EXPECT_EQ(criterion.name(), "CrossEntropyLoss");
}

TEST(LayersGradcheck, Linear) {
  manual_seed(1);
  Linear lin(4, 3);
  lin.to(kFloat64);
  Tensor x = randn({2, 5, 4}, nullptr, kFloat64).requires_grad_();
  auto r = check_module(lin, x, "Linear");
  EXPECT_TRUE(r.ok) << r.message;
  Linear nobias(4, 2, false);
  nobias.to(kFloat64);
  r = check_module(nobias, x, "Linear(bias=False)");
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LayersGradcheck, LayerNorm) {
  manual_seed(2);
  LayerNorm ln(6);
  ln.to(kFloat64);
  {  // non-trivial affine parameters
    NoGradGuard g;
    ln.weight.normal_();
    ln.bias.normal_();
  }
  Tensor x = randn({3, 6}, nullptr, kFloat64).requires_grad_();
  auto r = check_module(ln, x, "LayerNorm");
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LayersGradcheck, EmbeddingWrtWeight) {
  manual_seed(3);
  Embedding emb(6, 3);
  emb.to(kFloat64);
  Tensor ids = tensor({{0, 5, 2}, {2, 2, 1}});  // repeated ids accumulate
  auto r =
      gradcheck([&](const std::vector<Tensor>&) { return emb(ids); }, {emb.weight}, {.name = "Embedding"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LayersGradcheck, FeedForwardAndGELU) {
  manual_seed(4);
  GPTConfig cfg{
      .vocab_size = 10, .context_length = 4, .emb_dim = 4, .n_heads = 2, .n_layers = 1, .drop_rate = 0.0};
  FeedForward ff(cfg);
  EXPECT_EQ(ff.layers->size(), 3u);
  ff.to(kFloat64);
  Tensor x = randn({2, 3, 4}, nullptr, kFloat64).requires_grad_();
  auto r = check_module(ff, x, "FeedForward");
  EXPECT_TRUE(r.ok) << r.message;
  GELU g("tanh");
  r = check_module(g, x, "GELU(tanh)");
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace xgrad::nn
