// tests/core/test_autograd_grad.cpp: autograd::grad (torch.autograd.grad) against torch on a
// small MLP (weights and an intermediate, a non-scalar output with grad_outputs); that it
// leaves every .grad alone and runs only the nodes on a path to an input; its errors (an input
// the outputs do not reach, a non-scalar output without grad_outputs, bad inputs); and anomaly
// mode (autograd::DetectAnomalyGuard) on core ops. The module path in anomaly errors is
// tested in tests/nn/test_module_hooks.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using autograd::grad;

Tensor leaf_from(const Tensor& t) { return t.detach().clone().requires_grad_(); }

struct Mlp {
  Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/autograd.txt");
  Tensor x = fx.get("mlp.x"), t = fx.get("mlp.t");
  Tensor W1 = leaf_from(fx.get("mlp.W1")), b1 = leaf_from(fx.get("mlp.b1"));
  Tensor W2 = leaf_from(fx.get("mlp.W2")), b2 = leaf_from(fx.get("mlp.b2"));
  Tensor h = tanh(linear(x, W1, b1));  // (4, 5)
  Tensor out = linear(h, W2, b2);      // (4, 2)
  Tensor loss = (out - t).pow(2.0).mean();
};

TEST(AutogradGrad, MlpWeightsAndAnIntermediateMatchTorch) {
  Mlp m;
  m.h.retain_grad();
  expect_close(m.loss, m.fx.get("mlp.loss"), 1e-6, 1e-7, "loss");
  std::vector<Tensor> g = grad({m.loss}, {m.W1, m.b1, m.W2, m.h}, {}, {.retain_graph = true});
  ASSERT_EQ(g.size(), 4u);
  expect_close(g[0], m.fx.get("mlp.dW1"), 1e-5, 1e-7, "dW1");
  expect_close(g[1], m.fx.get("mlp.db1"), 1e-5, 1e-7, "db1");
  expect_close(g[2], m.fx.get("mlp.dW2"), 1e-5, 1e-7, "dW2");
  expect_close(g[3], m.fx.get("mlp.dh"), 1e-5, 1e-7, "dh");
  // no .grad was touched: not the leaves', not the retained intermediate's
  for (const Tensor& p : {m.W1, m.b1, m.W2, m.b2, m.h}) EXPECT_FALSE(p.grad().defined());
  // the non-scalar output with its grad_output
  std::vector<Tensor> r = grad({m.out}, {m.W1}, {m.fx.get("mlp.r")});
  expect_close(r[0], m.fx.get("mlp.r_dW1"), 1e-5, 1e-7, "r_dW1");
  EXPECT_FALSE(m.W1.grad().defined());
}

TEST(AutogradGrad, GivesWhatBackwardAccumulates) {
  Mlp m;
  std::vector<Tensor> g = grad({m.loss}, {m.W1, m.b1, m.W2, m.b2}, {}, {.retain_graph = true});
  m.loss.backward();
  const std::vector<Tensor> params{m.W1, m.b1, m.W2, m.b2};
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(g[i].to_vector<double>(), params[i].grad().to_vector<double>()) << i;
}

TEST(AutogradGrad, RunsOnlyTheNodesOnAPathToAnInput) {
  Mlp m;
  std::weak_ptr<Node> below = m.h.grad_fn();      // tanh: between h and W1, not needed for dh
  std::weak_ptr<Node> above = m.loss.grad_fn();   // on the path from loss to h
  std::vector<Tensor> g = grad({m.loss}, {m.h});  // retain_graph false: frees what ran
  expect_close(g[0], m.fx.get("mlp.dh"), 1e-5, 1e-7, "dh");
  EXPECT_TRUE(above.lock()->released);
  EXPECT_FALSE(below.lock()->released);
  EXPECT_FALSE(m.W2.grad().defined());  // W2's node ran; its gradient was not wanted
  // h's own history is intact: its gradient can still be taken with respect to W1
  std::vector<Tensor> gw = grad({m.h}, {m.W1}, {g[0]});
  expect_close(gw[0], m.fx.get("mlp.dW1"), 1e-5, 1e-7, "dW1 through dh");
}

TEST(AutogradGrad, RepeatedInputsOutputsAndLeafOutputs) {
  Tensor x = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor y = x * x;
  std::vector<Tensor> g = grad({y.sum()}, {x, x}, {}, {.retain_graph = true});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2.0, 4.0, 6.0}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{2.0, 4.0, 6.0}));
  // the gradient of y with respect to itself is its grad_output
  Tensor gy = tensor({5.0, 6.0, 7.0}, kFloat64);
  EXPECT_EQ(grad({y}, {y}, {gy})[0].to_vector<double>(), gy.to_vector<double>());
  // a leaf as the output
  EXPECT_EQ(grad({x}, {x}, {gy})[0].to_vector<double>(), gy.to_vector<double>());
  // two outputs: the gradients add
  Tensor two = grad({y.sum(), (x * 3.0).sum()}, {x})[0];
  EXPECT_EQ(two.to_vector<double>(), (std::vector<double>{5.0, 7.0, 9.0}));
  EXPECT_FALSE(x.grad().defined());
}

TEST(AutogradGrad, ThroughAnInPlaceOpOnAView) {
  // CopySlices runs the in-place op's backward on the view's region: grad() must ask it for
  // the gradient of the view's old values even though that edge is private to CopySlices
  auto run = [](bool use_grad) {
    Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, kFloat64).requires_grad_();
    Tensor w = tensor({0.5, -1.0}, kFloat64).requires_grad_();
    Tensor y = x * 1.0;
    y.slice(0, 1, 3).add_(w);  // y[1:3] += w
    Tensor loss = (y * y).sum();
    if (use_grad) return grad({loss}, {x, w});
    loss.backward();
    return std::vector<Tensor>{x.grad(), w.grad()};
  };
  const std::vector<Tensor> g = run(true), b = run(false);
  EXPECT_EQ(g[0].to_vector<double>(), b[0].to_vector<double>());
  EXPECT_EQ(g[1].to_vector<double>(), b[1].to_vector<double>());
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2.0, 5.0, 4.0, 8.0}));  // 2y
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{5.0, 4.0}));
}

TEST(AutogradGrad, AnInputTheOutputsDoNotReachIsAnErrorUnlessAllowed) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor w = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor loss = (x * 2.0).sum();
  expect_error([&] { grad({loss}, {x, w}); }, {"autograd::grad", "input 1 (shape [3])", "allow_unused"});
  // the error came before anything ran: the graph is still there
  EXPECT_FALSE(loss.grad_fn()->released);
  std::vector<Tensor> g = grad({loss}, {x, w}, {}, {.allow_unused = true});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{2.0, 2.0}));
  EXPECT_FALSE(g[1].defined());
}

TEST(AutogradGrad, ErrorsAsTorch) {
  Tensor x = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = x * 2.0;
  // a non-scalar output without grad_outputs
  expect_error([&] { grad({y}, {x}); },
               {"autograd::grad", "grad can be implicitly created only for one-element outputs", "[2]"});
  expect_error([&] { grad({y}, {x}, {ones({3}, kFloat64)}); }, {"gradient 0 of shape [3]", "[2]"});
  expect_error([&] { grad({y.sum()}, {ones({2})}); }, {"input 0 (shape [2]) does not require grad"});
  expect_error([&] { grad({ones({1}).sum()}, {x}); }, {"output 0", "does not require grad"});
  expect_error([&] { grad({y.sum(), y.sum()}, {x}, {Tensor()}); }, {"1 grad_outputs for 2 outputs"});
  // without retain_graph the second call finds the graph freed
  Tensor s = y.sum();
  grad({s}, {x});
  EXPECT_THROW(grad({s}, {x}), Error);
}

// ---------------------------------------------------------------- anomaly mode
TEST(Anomaly, NamesTheNodeThatReturnedNan) {
  autograd::DetectAnomalyGuard guard;
  Tensor x = tensor({0.0, 4.0}, kFloat64).requires_grad_();
  Tensor y = (x * 0.0).sqrt();  // sqrt'(0) = inf, and inf * 0 = nan in MulBackward0
  expect_error([&] { y.sum().backward(); },
               {"MulBackward0 returned nan in its 0th output", "forward op mul", "outside any module"});
  // the failed pass left nothing behind: with the NaN gone, a fresh graph gives the right answer
  Tensor z = (x * 2.0).sum();
  z.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2.0, 2.0}));
}

TEST(Anomaly, OffNanPassesSilentlyAndGuardsNest) {
  EXPECT_FALSE(autograd::AnomalyMode::is_enabled());
  {
    autograd::DetectAnomalyGuard outer;
    {
      autograd::DetectAnomalyGuard inner;
      EXPECT_TRUE(autograd::AnomalyMode::is_enabled());
    }
    EXPECT_TRUE(autograd::AnomalyMode::is_enabled());
  }
  EXPECT_FALSE(autograd::AnomalyMode::is_enabled());
  Tensor x = tensor({0.0}, kFloat64).requires_grad_();
  (x * 0.0).sqrt().sum().backward();  // as torch: a NaN gradient, no error
  EXPECT_TRUE(std::isnan(x.grad().item()));
}

TEST(Anomaly, ForwardOutsideTheGuardSaysSo) {
  Tensor x = tensor({0.0}, kFloat64).requires_grad_();
  Tensor y = (x * 0.0).sqrt().sum();
  autograd::DetectAnomalyGuard guard;
  expect_error([&] { y.backward(); }, {"MulBackward0 returned nan", "no forward information was recorded"});
}

}  // namespace
}  // namespace xgrad::testing
