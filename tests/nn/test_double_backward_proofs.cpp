// tests/nn/test_double_backward_proofs.cpp: differentiating through gradients, against torch
// (tests/fixtures/gen_double_backward_proofs.py writes double_backward_proofs.txt and says what
// each computation is):
//   - WGAN-GP: a critic MLP with LayerNorm and GELU, the gradient penalty on interpolated
//     inputs; the critic's parameter gradients;
//   - the Hessian-vector product of the tiny GPT's loss with respect to all its parameters
//     (through the fused attention's double backward);
//   - one MAML step on a small MLP: the meta-gradient with respect to the initial weights.
// Each runs in float64 and in float32. A result is within `rel` of torch's, relative to the
// largest entry of the whole gradient (every tensor of the proof together): 1e-10 in float64,
// 1e-5 in float32 (elementwise relative errors of tiny entries measure rounding, not the
// gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/double_backward_proofs.txt");
  return fx;
}

struct Proof {
  DType dtype;
  const char* suffix;  // the fixture's ".f64" / ".f32"
  double rel;
};
const Proof kProofs[] = {{kFloat64, ".f64", 1e-10}, {kFloat32, ".f32", 1e-5}};

// fixture tensor `name` in dtype dt
Tensor get(const std::string& name, DType dt) { return fixture().get(name).to(dt); }

// Each actual tensor equals its expected one within rel * (the largest |expected| of them all).
void expect_proof_close(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                        const std::vector<std::string>& names, double rel) {
  ASSERT_EQ(actual.size(), expected.size());
  double scale = 0.0;
  for (const Tensor& e : expected)
    for (double v : e.to_vector<double>()) scale = std::max(scale, std::fabs(v));
  ASSERT_GT(scale, 0.0);
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_TRUE(actual[i].defined()) << names[i];
    ASSERT_EQ(actual[i].shape(), expected[i].shape()) << names[i];
    const std::vector<double> a = actual[i].to_vector<double>(), e = expected[i].to_vector<double>();
    double worst = 0.0;
    for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::fabs(a[k] - e[k]));
    EXPECT_LE(worst, rel * scale) << names[i] << ": largest error " << worst << ", scale " << scale;
  }
}

// ---------------------------------------------------------------- WGAN-GP
std::shared_ptr<Sequential> critic(DType dt) {
  auto d = std::make_shared<Sequential>();
  d->push_back(std::make_shared<Linear>(4, 16));
  d->push_back(std::make_shared<LayerNorm>(16));
  d->push_back(std::make_shared<GELU>());
  d->push_back(std::make_shared<Linear>(16, 16));
  d->push_back(std::make_shared<LayerNorm>(16));
  d->push_back(std::make_shared<GELU>());
  d->push_back(std::make_shared<Linear>(16, 1));
  StateDict sd;
  for (const auto& [key, t] : d->state_dict()) sd.insert(key, fixture().get("wgan.param." + key));
  d->load_state_dict(sd);
  d->to(dt);
  return d;
}

TEST(DoubleBackwardProofs, WganGradientPenaltyCriticGradientsMatchTorch) {
  for (const Proof& p : kProofs) {
    SCOPED_TRACE(p.suffix);
    auto d = critic(p.dtype);
    const Tensor real = get("wgan.real", p.dtype), fake = get("wgan.fake", p.dtype);
    const Tensor eps = get("wgan.eps", p.dtype);                        // (8, 1)
    Tensor x_hat = (eps * real + (1.0 - eps) * fake).requires_grad_();  // (8, 4)
    const Tensor grad_x = autograd::grad({(*d)(x_hat).sum()}, {x_hat}, {}, {.create_graph = true})[0];
    EXPECT_TRUE(grad_x.requires_grad());
    const Tensor gp = (norm(grad_x, 2.0, 1) - 1.0).pow(2.0).mean();
    const Tensor loss = (*d)(fake).mean() - (*d)(real).mean() + 10.0 * gp;
    loss.backward();
    xgrad::testing::expect_close(gp, get("wgan.gp" + std::string(p.suffix), p.dtype), p.rel, 0.0, "gp");
    xgrad::testing::expect_close(loss, get("wgan.loss" + std::string(p.suffix), p.dtype), p.rel, 0.0, "loss");
    std::vector<Tensor> actual, expected;
    std::vector<std::string> names;
    for (const auto& [name, t] : d->named_parameters()) {
      actual.push_back(t.grad());
      expected.push_back(get("wgan.grad." + name + p.suffix, p.dtype));
      names.push_back(name);
    }
    expect_proof_close(actual, expected, names, p.rel);
  }
}

// ---------------------------------------------------------------- GPT Hessian-vector product
TEST(DoubleBackwardProofs, GptLossHessianVectorProductMatchesTorch) {
  const GPTConfig small{.vocab_size = 32,
                        .context_length = 8,
                        .emb_dim = 16,
                        .n_heads = 2,
                        .n_layers = 2,
                        .drop_rate = 0.0,
                        .qkv_bias = false};
  const Tensor in_idx = fixture().get("gpt.in_idx"), targets = fixture().get("gpt.targets");
  for (const Proof& p : kProofs) {
    SCOPED_TRACE(p.suffix);
    manual_seed(123);  // torch's initial weights (GPT.InitMatchesTorchAfterManualSeed)
    GPTModel model(small);
    model.to(p.dtype);
    const std::vector<Tensor> params = model.parameters();
    Generator gen(2024);  // v: one randn per parameter, torch's stream
    std::vector<Tensor> v;
    double v_sum = 0.0, v_sumsq = 0.0;
    for (const Tensor& w : params) {
      v.push_back(randn(w.shape(), &gen, kFloat64));
      for (double x : v.back().to_vector<double>()) v_sum += x, v_sumsq += x * x;
    }
    EXPECT_NEAR(v_sum, fixture().get("gpt.v_sum").item(), 1e-9);
    EXPECT_NEAR(v_sumsq, fixture().get("gpt.v_sumsq").item(), 1e-9);

    const Tensor loss = cross_entropy(model(in_idx).flatten(0, 1), targets.flatten());
    xgrad::testing::expect_close(loss, get("gpt.loss" + std::string(p.suffix), p.dtype), p.rel, 0.0, "loss");
    const std::vector<Tensor> g = autograd::grad({loss}, params, {}, {.create_graph = true});
    Tensor dot = zeros({}, p.dtype);
    for (std::size_t i = 0; i < g.size(); ++i) dot = dot + (g[i] * v[i].to(p.dtype)).sum();
    const std::vector<Tensor> hv = autograd::grad({dot}, params);
    std::vector<Tensor> expected;
    std::vector<std::string> names;
    for (const auto& [name, t] : model.named_parameters()) {
      expected.push_back(get("gpt.hv." + name + p.suffix, p.dtype));
      names.push_back(name);
    }
    expect_proof_close(hv, expected, names, p.rel);
  }
}

// ---------------------------------------------------------------- MAML
Tensor mlp(const Tensor& x, const std::vector<Tensor>& w) {
  return linear(sigmoid(linear(x, w[0], w[1])), w[2], w[3]);
}

TEST(DoubleBackwardProofs, MamlMetaGradientMatchesTorch) {
  const std::vector<std::string> names{"W1", "b1", "W2", "b2"};
  for (const Proof& p : kProofs) {
    SCOPED_TRACE(p.suffix);
    std::vector<Tensor> theta;
    for (const std::string& n : names) theta.push_back(get("maml." + n, p.dtype).clone().requires_grad_());
    Tensor meta_loss = zeros({}, p.dtype);
    for (int k = 0; k < 2; ++k) {
      auto task = [&](const char* what) {
        return get("maml.task" + std::to_string(k) + "." + what, p.dtype);
      };
      const Tensor inner = mse_loss(mlp(task("xs"), theta), task("ys"));
      const std::vector<Tensor> g = autograd::grad({inner}, theta, {}, {.create_graph = true});
      std::vector<Tensor> adapted;  // one inner SGD step, lr 0.1, kept on the graph
      for (std::size_t i = 0; i < theta.size(); ++i) adapted.push_back(theta[i] - 0.1 * g[i]);
      meta_loss = meta_loss + mse_loss(mlp(task("xq"), adapted), task("yq"));
    }
    meta_loss.backward();
    xgrad::testing::expect_close(meta_loss, get("maml.meta_loss" + std::string(p.suffix), p.dtype), p.rel,
                                 0.0, "meta_loss");
    std::vector<Tensor> actual, expected;
    for (std::size_t i = 0; i < theta.size(); ++i) {
      actual.push_back(theta[i].grad());
      expected.push_back(get("maml.grad." + names[i] + p.suffix, p.dtype));
    }
    expect_proof_close(actual, expected, names, p.rel);
  }
}

}  // namespace
}  // namespace xgrad::nn
