// tests/core/test_double_backward.cpp: gradients of gradients (torch's create_graph=True).
// Tensor::backward and autograd::grad with create_graph record the backward, so the
// gradients they give carry grad_fns and can be differentiated again: x.grad()'s history,
// d2/dx2 x^3 = 6x, a gradient penalty through a Linear against torch, a third derivative
// against torch, a saved output re-attached to its node (without a reference cycle), the
// graph kept by default, and the errors without create_graph. Fixtures:
// tests/fixtures/gen_double_backward.py.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using autograd::grad;

Tensor leaf_from(const Tensor& t) { return t.detach().clone().requires_grad_(); }
Tensor leaf64(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

const Fixture& fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/double_backward.txt");
  return fx;
}

TEST(DoubleBackward, BackwardWithCreateGraphGivesAGradWithHistory) {
  Tensor x = leaf64({1.0, 2.0, 3.0});
  x.pow(3.0).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  // torch's AccumulateGrad with grad mode on: a recorded copy, then a recorded sum
  EXPECT_EQ(x.grad().grad_fn_name(), "CopyBackwards");
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3.0, 12.0, 27.0}));
  x.pow(3.0).sum().backward(Tensor(), std::nullopt, true);
  EXPECT_EQ(x.grad().grad_fn_name(), "AddBackward0");
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{6.0, 24.0, 54.0}));
  // d/dx sum(2 * 3x^2) = 12x
  std::vector<Tensor> g = grad({x.grad().sum()}, {x});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{12.0, 24.0, 36.0}));
  x.set_grad(Tensor());  // .grad() refers back to x through its history, as in torch
}

TEST(DoubleBackward, SecondDerivativeOfACubeIsSixX) {
  Tensor x = leaf64({-1.5, 0.5, 2.0});
  Tensor g = grad({x.pow(3.0).sum()}, {x}, {}, {.create_graph = true})[0];
  EXPECT_EQ(g.grad_fn_name(), "MulBackward0");  // dout * (3 x^2), as torch names it
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{6.75, 0.75, 12.0}));
  g.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{-9.0, 3.0, 12.0}));
  EXPECT_FALSE(x.grad().grad_fn());  // the second backward did not create a graph
}

// out = tanh(linear(x, W, b)), gx = d sum(out * r) / dx, penalty = mean((|gx|_row - 1)^2)
void check_penalty(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& linear_fn) {
  const Fixture& fx = fixture();
  Tensor x = leaf_from(fx.get("penalty.x")), W = leaf_from(fx.get("penalty.W"));
  Tensor b = leaf_from(fx.get("penalty.b"));
  Tensor out = tanh(linear_fn(x, W, b));
  Tensor s = (out * fx.get("penalty.r")).sum();
  Tensor gx = grad({s}, {x}, {}, {.create_graph = true})[0];
  expect_close(gx, fx.get("penalty.gx"), 1e-12, 1e-12, "gx");
  Tensor penalty = (gx.pow(2.0).sum(-1).sqrt() - 1.0).pow(2.0).mean();
  expect_close(penalty, fx.get("penalty.penalty"), 1e-12, 1e-12, "penalty");
  std::vector<Tensor> d = grad({penalty}, {W, b, x});
  expect_close(d[0], fx.get("penalty.dW"), 1e-10, 1e-12, "dW");
  expect_close(d[1], fx.get("penalty.db"), 1e-10, 1e-12, "db");
  expect_close(d[2], fx.get("penalty.dx"), 1e-10, 1e-12, "dx");
}

TEST(DoubleBackward, GradientPenaltyThroughALinearMatchesTorch) {
  check_penalty([](const Tensor& x, const Tensor& W, const Tensor& b) { return linear(x, W, b); });
}

TEST(DoubleBackward, GradientPenaltyThroughAComposedLinearMatchesTorch) {
  // x W^T + b as a broadcast product summed over in_features: (4, 1, 3) * (2, 3) -> (4, 2)
  check_penalty(
      [](const Tensor& x, const Tensor& W, const Tensor& b) { return (x.unsqueeze(1) * W).sum(-1) + b; });
}

TEST(DoubleBackward, ThirdDerivativeMatchesTorch) {
  const Fixture& fx = fixture();
  Tensor x = leaf_from(fx.get("third.x"));
  Tensor y = (tanh(x) * x.pow(3.0) + exp(x / 2.0)).sum();
  Tensor g1 = grad({y}, {x}, {}, {.create_graph = true})[0];
  Tensor g2 = grad({g1.sum()}, {x}, {}, {.create_graph = true})[0];
  Tensor g3 = grad({g2.sum()}, {x})[0];
  expect_close(g1, fx.get("third.g1"), 1e-12, 1e-12, "g1");
  expect_close(g2, fx.get("third.g2"), 1e-11, 1e-12, "g2");
  expect_close(g3, fx.get("third.g3"), 1e-10, 1e-12, "g3");
}

TEST(DoubleBackward, ASavedOutputIsReattachedToItsNode) {
  Tensor x = leaf64({-0.5, 0.25, 1.0});
  Tensor s;
  {
    Tensor y = exp(x);  // ExpBackward0 saves y; y itself is dropped before backward
    s = (y * 3.0).sum();
  }
  Tensor g = grad({s}, {x}, {}, {.create_graph = true})[0];  // 3 exp(x), through the saved y
  std::vector<Tensor> gg = grad({g.sum()}, {x});
  std::vector<double> want;
  for (double v : x.to_vector<double>()) want.push_back(3.0 * std::exp(v));
  const std::vector<double> got = gg[0].to_vector<double>();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-14) << i;
}

TEST(DoubleBackward, SavingAnOutputMakesNoReferenceCycle) {
  Tensor x = leaf64({1.0, 2.0});
  std::weak_ptr<Node> node;
  {
    Tensor y = exp(x);  // saves its own output
    node = y.grad_fn();
    ASSERT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());
}

TEST(DoubleBackward, CreateGraphKeepsTheGraphUnlessToldNot) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor y = exp(x).sum();
  grad({y}, {x}, {}, {.create_graph = true});
  grad({y}, {x}, {}, {.create_graph = true});  // retain_graph followed create_graph
  y.backward(Tensor(), std::nullopt, true);
  y.backward(Tensor(), false, true);  // the last pass: frees the graph
  expect_error([&] { y.backward(); }, {"backward through the graph a second time", "retain_graph"});
  x.set_grad(Tensor());
}

TEST(DoubleBackward, WithoutCreateGraphAGradientHasNoHistory) {
  Tensor x = leaf64({1.0, 2.0});
  x.pow(3.0).sum().backward();
  EXPECT_FALSE(x.grad().grad_fn());
  expect_error([&] { x.grad().pow(2.0).sum().backward(); }, {"does not require grad", "no grad_fn"});
  Tensor g = grad({x.pow(3.0).sum()}, {x})[0];
  EXPECT_FALSE(g.requires_grad());
}

TEST(DoubleBackward, AnInPlaceChangeToASavedTensorStillThrows) {
  Tensor x = leaf64({1.0, 2.0});
  Tensor h = x * 2.0;
  Tensor y = (h * h).sum();
  h.add_(ones({2}, kFloat64));
  expect_error([&] { grad({y}, {x}, {}, {.create_graph = true}); }, {"modified by an in-place operation"});
}

// A grad_output that requires grad: the double-vjp trick for a Jacobian-vector product.
// y = x^2 (elementwise): u^T J = 2 x u, and d/du <2 x u, v> = 2 x v = J v.
TEST(DoubleBackward, GradOutputsThatRequireGradAreDifferentiable) {
  Tensor x = leaf64({1.0, -2.0, 0.5});
  Tensor u = zeros({3}, kFloat64).requires_grad_();
  Tensor v = tensor({1.0, 2.0, 3.0}, kFloat64);
  Tensor vjp = grad({x.pow(2.0)}, {x}, {u}, {.create_graph = true})[0];
  Tensor jv = grad({vjp}, {u}, {v})[0];
  EXPECT_EQ(jv.to_vector<double>(), (std::vector<double>{2.0, -8.0, 3.0}));
}

// Each recorded backward gives the same first-order gradient as its fused path (the gradcheck
// table checks both against finite differences; this pins that they agree with each other).
TEST(DoubleBackward, TheRecordedBackwardAgreesWithTheFusedOne) {
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"div", [](const Tensor& a, const Tensor& b) { return a / b + 2.0 / a; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a.abs(), b) + a.pow(2.0) + a.pow(1.5); }},
      {"sqrt/rsqrt/tanh", [](const Tensor& a, const Tensor&) { return a.sqrt() + a.rsqrt() + a.tanh(); }},
      {"abs/clamp", [](const Tensor& a, const Tensor& b) { return (a - b).abs() + a.clamp(1.0, 1.5); }},
      {"maximum/minimum",
       [](const Tensor& a, const Tensor& b) { return maximum(a, b) + minimum(a, b.slice(0, 0, 1)); }},
      {"where", [](const Tensor& a, const Tensor& b) { return where(a > b, a, b * 2.0); }},
      {"var/std", [](const Tensor& a, const Tensor& b) { return a.var(-1).unsqueeze(-1) + (a * b).std(0); }},
      {"slice/select/roll",
       [](const Tensor& a, const Tensor& b) {
         return a.slice(1, 1, 3) * b.select(0, 1).roll(1).slice(0, 0, 2);
       }},
      {"gather/scatter_add",
       [](const Tensor& a, const Tensor& b) {
         const Tensor index = tensor({{2, 0}, {1, 1}});
         return a.gather(1, index).scatter_add(1, tensor({{1, 0}, {0, 0}}), b.slice(1, 0, 2));
       }},
      {"index_select/masked_select/topk/max",
       [](const Tensor& a, const Tensor& b) {
         return cat({a.index_select(1, tensor({2, 2, 0})).reshape({-1}), b.masked_select(b > 0.5),
                     a.topk(2, -1).values.reshape({-1}), b.max(0).values});
       }},
      {"tril/masked_fill/index_put",
       [](const Tensor& a, const Tensor& b) {
         return a.tril().masked_fill(b < 0.0, 0.5).index_put({tensor({1, 0})}, b.slice(0, 0, 1) * 3.0);
       }},
  };
  const Tensor a0 = tensor({{0.5, 1.25, 2.0}, {1.5, 0.75, 1.0}}, kFloat64);
  const Tensor b0 = tensor({{0.75, 1.25, -1.0}, {3.0, 0.25, 2.5}}, kFloat64);
  for (const auto& [name, fn] : fns) {
    Tensor a = leaf_from(a0), b = leaf_from(b0);
    const Tensor y = fn(a, b);
    const Tensor w = (arange(y.numel(), kFloat64) * 0.37 + 0.1).sin().reshape(y.shape());
    std::vector<Tensor> fused = grad({(fn(a, b) * w).sum()}, {a, b}, {}, {.allow_unused = true});
    std::vector<Tensor> recorded =
        grad({(fn(a, b) * w).sum()}, {a, b}, {}, {.create_graph = true, .allow_unused = true});
    for (std::size_t k = 0; k < 2; ++k) {
      ASSERT_EQ(fused[k].defined(), recorded[k].defined()) << name << " " << k;
      if (!fused[k].defined()) continue;
      expect_close(recorded[k], fused[k], 1e-14, 1e-15, name);
    }
  }
}

}  // namespace
}  // namespace xgrad::testing
