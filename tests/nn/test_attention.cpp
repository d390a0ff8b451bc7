// tests/nn/test_attention.cpp: the attention family against torch (tests/fixtures/
// gen_attention.py builds Raschka's classes after manual_seed(123)): same initial weights,
// same outputs, same gradients; the wrapper and MHLinear equal MultiHeadAttention once the
// weights are copied over; its fused forward equals the composed one it replaced (same
// weights, same dropout draws); gradchecks in double precision; printing; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/attention.txt");
  return fx;
}

// Builds `make()` after manual_seed(123), checks its init against torch's, runs the fixture
// input, and compares the output and every gradient of the weighted-sum loss.
template <class Make>
void check_against_torch(const std::string& name, Make make) {
  const Fixture& fx = fixture();
  manual_seed(123);
  auto m = make();
  for (auto& [pname, p] : m->named_parameters())
    expect_close(p, fx.get(name + "." + pname), 1e-6, 1e-6, name + " init " + pname);
  Tensor x = fx.get(name + ".x").clone().requires_grad_();
  Tensor out = (*m)(x);
  expect_close(out, fx.get(name + ".out"), 1e-5, 1e-5, name + ".out");
  Tensor w = linspace(-1.0, 1.0, out.numel()).reshape(out.shape());
  (out * w).sum().backward();
  expect_close(x.grad(), fx.get(name + ".x.grad"), 1e-5, 1e-5, name + ".x.grad");
  for (auto& [pname, p] : m->named_parameters())
    expect_close(p.grad(), fx.get(name + "." + pname + ".grad"), 1e-5, 1e-5, name + " grad " + pname);
}

TEST(Attention, SelfAttentionMatchesTorch) {
  check_against_torch("self_attention", [] { return std::make_shared<SelfAttention>(3, 2); });
}

TEST(Attention, CausalAttentionMatchesTorch) {
  check_against_torch("causal_attention", [] { return std::make_shared<CausalAttention>(3, 2, 6, 0.0); });
}

TEST(Attention, WrapperMatchesTorchAndTheWalkthroughNotebook) {
  check_against_torch("wrapper", [] { return std::make_shared<MultiHeadAttentionWrapper>(3, 2, 6, 0.0, 2); });
  // the notebook of examples/seeds/seed001_mha_walkthrough.cpp prints, for the first token of
  // the first batch: -0.4519, 0.2216, 0.4772, 0.1063
  auto row = fixture().get("wrapper.out")[0][0].to_vector<float>();
  EXPECT_NEAR(row[0], -0.4519, 1e-4);
  EXPECT_NEAR(row[3], 0.1063, 1e-4);
}

TEST(Attention, MultiHeadAttentionMatchesTorch) {
  check_against_torch("mha", [] { return std::make_shared<MultiHeadAttention>(6, 6, 8, 0.0, 2); });
  check_against_torch("mha_bias", [] { return std::make_shared<MultiHeadAttention>(6, 4, 5, 0.0, 2, true); });
}

// The wrapper's heads stacked into MHA's projections give the same attention; with out_proj
// the identity, the same outputs and the same gradients.
TEST(Attention, WrapperEqualsMultiHeadAttentionWithCopiedWeights) {
  manual_seed(1);
  const int64_t d_in = 5, head_dim = 3, heads = 2, T = 4;
  MultiHeadAttentionWrapper wrapper(d_in, head_dim, T, 0.0, heads, true);
  MultiHeadAttention mha(d_in, heads * head_dim, T, 0.0, heads, true);
  {
    NoGradGuard g;
    for (int64_t h = 0; h < heads; ++h) {
      auto head = wrapper.heads->at<CausalAttention>(h);
      mha.W_query->weight.narrow(0, h * head_dim, head_dim).copy_(head->W_query->weight);
      mha.W_key->weight.narrow(0, h * head_dim, head_dim).copy_(head->W_key->weight);
      mha.W_value->weight.narrow(0, h * head_dim, head_dim).copy_(head->W_value->weight);
      mha.W_query->bias.narrow(0, h * head_dim, head_dim).copy_(head->W_query->bias);
      mha.W_key->bias.narrow(0, h * head_dim, head_dim).copy_(head->W_key->bias);
      mha.W_value->bias.narrow(0, h * head_dim, head_dim).copy_(head->W_value->bias);
    }
    mha.out_proj->weight.copy_(eye(heads * head_dim));
    mha.out_proj->bias.zero_();
  }
  Tensor x = randn({2, T, d_in});
  Tensor x1 = x.clone().requires_grad_();
  Tensor x2 = x.clone().requires_grad_();
  Tensor a = wrapper(x1);
  Tensor b = mha(x2);
  expect_close(a, b, 1e-5, 1e-5, "wrapper vs mha output");
  Tensor w = randn(a.shape());
  (a * w).sum().backward();
  (b * w).sum().backward();
  expect_close(x1.grad(), x2.grad(), 1e-5, 1e-5, "wrapper vs mha input grad");
  for (int64_t h = 0; h < heads; ++h) {
    auto head = wrapper.heads->at<CausalAttention>(h);
    expect_close(head->W_query->weight.grad(), mha.W_query->weight.grad().narrow(0, h * head_dim, head_dim),
                 1e-5, 1e-5, "W_query grad of head " + std::to_string(h));
    expect_close(head->W_value->bias.grad(), mha.W_value->bias.grad().narrow(0, h * head_dim, head_dim), 1e-5,
                 1e-5, "W_value bias grad of head " + std::to_string(h));
  }
}

// MHLinear's fused projection equals W_query's, split into heads.
TEST(Attention, MHLinearEqualsTheQueryProjectionSplitIntoHeads) {
  manual_seed(0);
  const int64_t heads = 2, d_in = 3, d_k = 2;
  MHLinear mhl(heads, d_in, d_k);
  MultiHeadAttention mha(d_in, heads * d_k, 5, 0.0, heads);
  {
    NoGradGuard g;
    mha.W_query->weight.copy_(mhl.weights.view({d_in, heads * d_k}).t());
  }
  Tensor x = randn({2, 5, d_in});
  Tensor a = mhl(x);  // (B, H, N, d_k)
  Tensor b = (*mha.W_query)(x).view({2, 5, heads, d_k}).transpose(1, 2);
  expect_close(a, b, 1e-6, 1e-6, "MHLinear vs W_query");
  EXPECT_TRUE(a.is_contiguous());
  // examples/seeds/seed004_mhlinear.cpp's notebook prints w_Q after manual_seed(0):
  // [[-0.0043, 0.3097], [-0.4752, -0.4249]], ...
  manual_seed(0);
  MHLinear seeded(2, 3, 2);
  auto wv = seeded.weights.to_vector<float>();
  EXPECT_NEAR(wv[0], -0.0043, 1e-4);
  EXPECT_NEAR(wv[1], 0.3097, 1e-4);
  EXPECT_NEAR(wv[2], -0.4752, 1e-4);
}

TEST(Attention, GradcheckInDoublePrecision) {
  manual_seed(3);
  auto mha = std::make_shared<MultiHeadAttention>(4, 4, 6, 0.2, 2, true);
  mha->to(kFloat64);
  Tensor x = randn({2, 5, 4}, nullptr, kFloat64).requires_grad_();
  std::vector<Tensor> leaves{x};
  for (auto& p : mha->parameters()) leaves.push_back(p);
  auto fn = [mha](const std::vector<Tensor>& in) {
    manual_seed(99);  // the same dropout mask on every evaluation
    return (*mha)(in[0]);
  };
  GradcheckResult r = gradcheck(fn, leaves, {.name = "MultiHeadAttention(dropout 0.2)"});
  EXPECT_TRUE(r.ok) << r.message;

  manual_seed(4);
  auto wrapper = std::make_shared<MultiHeadAttentionWrapper>(3, 2, 4, 0.0, 2);
  wrapper->to(kFloat64);
  Tensor y = randn({1, 4, 3}, nullptr, kFloat64).requires_grad_();
  std::vector<Tensor> wl{y};
  for (auto& p : wrapper->parameters()) wl.push_back(p);
  r = gradcheck([wrapper](const std::vector<Tensor>& in) { return (*wrapper)(in[0]); }, wl,
                {.name = "MultiHeadAttentionWrapper"});
  EXPECT_TRUE(r.ok) << r.message;

  auto mhl = std::make_shared<MHLinear>(2, 3, 2);
  mhl->to(kFloat64);
  Tensor z = randn({2, 3, 3}, nullptr, kFloat64).requires_grad_();
  r = gradcheck([mhl](const std::vector<Tensor>& in) { return (*mhl)(in[0]); }, {z, mhl->weights},
                {.name = "MHLinear"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Attention, DropoutOnlyInTrainingMode) {
  manual_seed(5);
  MultiHeadAttention mha(4, 4, 6, 0.5, 2);
  Tensor x = randn({1, 6, 4});
  mha.eval();
  Tensor a = mha(x), b = mha(x);
  expect_close(a, b, 0, 0, "eval is deterministic");
  mha.train();
  Tensor c = mha(x);
  EXPECT_GT((c - a).abs().max().item(), 1e-4);
}

TEST(Attention, NamesBuffersAndPrinting) {
  MultiHeadAttention mha(6, 6, 8, 0.1, 2);
  std::vector<std::string> names;
  for (auto& [n, p] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"W_query.weight", "W_key.weight", "W_value.weight",
                                             "out_proj.weight", "out_proj.bias"}));
  auto bufs = mha.named_buffers();
  ASSERT_EQ(bufs.size(), 1u);
  EXPECT_EQ(bufs[0].first, "mask");
  EXPECT_EQ(bufs[0].second.dtype(), kBool);
  EXPECT_TRUE(mha.state_dict().contains("mask"));

  std::ifstream in(XGRAD_FIXTURES_DIR "/attention_repr.txt");
  std::map<std::string, std::string> reprs;
  std::string line, key;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      key = line.substr(4);
      continue;
    }
    reprs[key] += (reprs[key].empty() ? "" : "\n") + line;
  }
  EXPECT_EQ(to_string(mha), reprs["mha"]);
  MultiHeadAttentionWrapper wrapper(3, 2, 6, 0.0, 2);
  EXPECT_EQ(to_string(wrapper), reprs["wrapper"]);
}

// MultiHeadAttention's forward before scaled_dot_product_attention, op for op, on mha's own
// weights, mask buffer and Dropout module (the default generator).
Tensor composed_mha_forward(MultiHeadAttention& mha, const Tensor& x) {
  auto [b, T, d_in] = x.shape3();
  const int64_t H = mha.num_heads, D = mha.head_dim;
  Tensor keys = mha.W_key(x).view({b, T, H, D}).transpose(1, 2);  // (b, H, T, D)
  Tensor queries = mha.W_query(x).view({b, T, H, D}).transpose(1, 2);
  Tensor values = mha.W_value(x).view({b, T, H, D}).transpose(1, 2);
  Tensor attn_scores = matmul(queries, keys.transpose(2, 3));  // (b, H, T, T)
  attn_scores.masked_fill_(mha.mask.slice(0, 0, T).slice(1, 0, T), -INFINITY);
  Tensor attn_weights = softmax(attn_scores / std::sqrt(double(D)), -1);
  attn_weights = mha.dropout(attn_weights);
  Tensor context_vec = matmul(attn_weights, values).transpose(1, 2).contiguous().view({b, T, mha.d_out});
  return mha.out_proj(context_vec);  // (b, T, d_out)
}

TEST(Attention, FusedForwardEqualsTheComposedOne) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    manual_seed(21);
    MultiHeadAttention mha(12, 12, 40, 0.3, 3, true);
    training ? mha.train() : mha.eval();
    Tensor x = randn({3, 33, 12}).requires_grad_();
    Tensor g = randn({3, 33, 12});
    std::vector<Tensor> fused_grads;
    manual_seed(5);
    Tensor fused = mha(x);
    fused.backward(g);
    const uint64_t after_fused = default_generator().random();
    fused_grads.push_back(x.grad());
    for (auto& p : mha.parameters()) fused_grads.push_back(p.grad());
    mha.zero_grad(true);  // new grad tensors: fused_grads keeps the fused ones
    x.set_grad(Tensor());
    manual_seed(5);
    Tensor composed = composed_mha_forward(mha, x);
    composed.backward(g);
    EXPECT_EQ(after_fused, default_generator().random()) << "a different number of draws";
    expect_close(fused, composed, 1e-5, 1e-6, "out");
    expect_close(fused_grads[0], x.grad(), 1e-5, 1e-6, "x.grad");
    std::size_t i = 1;
    for (auto& [name, p] : mha.named_parameters())
      expect_close(fused_grads[i++], p.grad(), 1e-4, 1e-5, name + ".grad");
  }
}

TEST(Attention, BadInputThrowsClearErrors) {
  try {
    MultiHeadAttention bad(6, 5, 8, 0.0, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("divisible"), std::string::npos) << e.what();
  }
  MultiHeadAttention mha(4, 4, 6, 0.0, 2);
  try {
    mha(randn({1, 7, 4}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context_length"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mha(randn({1, 6, 3})), Error);
  EXPECT_THROW(mha(randn({6, 4})), Error);
  EXPECT_THROW(CausalAttention(3, 2, 0, 0.0), Error);
  EXPECT_THROW(MultiHeadAttentionWrapper(3, 2, 4, 0.0, 0), Error);
  EXPECT_THROW(MHLinear(2, 3, 2)(randn({2, 3, 4})), Error);
}

}  // namespace
}  // namespace xgrad::nn
