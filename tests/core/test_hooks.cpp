// tests/core/test_hooks.cpp: Tensor::register_hook against torch 1.13 (a hook scaling a leaf's
// gradient, and hooks on non-leaves before and after retain_grad()); a leaf's hooks see the
// gradient summed over the pass, once; several hooks in registration order; removal (twice is
// harmless); hooks in autograd::grad; and the errors: a hook changing the shape or dtype, a
// hook on a tensor that does not require grad.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

Tensor leaf_of(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

TEST(Hooks, LeafAndNonLeafWithRetainGradMatchTorch) {
  Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/autograd.txt");
  Tensor x = fx.get("hooks.x").clone().requires_grad_();
  Tensor w = fx.get("hooks.w").clone().requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 3.0; });
  Tensor h = x * w;
  h.register_hook([](const Tensor& g) { return g * 2.0; });
  h.retain_grad();  // after a hook: keeps the doubled gradient
  Tensor g = tanh(h);
  g.retain_grad();  // before any hook: keeps the gradient the hook then multiplies by 5
  g.register_hook([](const Tensor& d) { return d * 5.0; });
  (g * fx.get("hooks.r")).sum().backward();
  expect_close(x.grad(), fx.get("hooks.x_grad"), 1e-5, 1e-6, "x.grad");
  expect_close(w.grad(), fx.get("hooks.w_grad"), 1e-5, 1e-6, "w.grad");
  expect_close(h.grad(), fx.get("hooks.h_grad"), 1e-5, 1e-6, "h.grad");
  expect_close(g.grad(), fx.get("hooks.g_grad"), 1e-5, 1e-6, "g.grad");
}

// torch 1.13 (python): x = ones(2); y = x * 2; y.register_hook(g*3); y.retain_grad();
// y.register_hook(g*5); y.sum().backward() gives y.grad = 15 and x.grad = 30: the retained
// gradient is taken after every hook once one came before retain_grad()
TEST(Hooks, RetainGradBetweenTwoHooksSeesBoth) {
  Tensor x = leaf_of({1.0, 1.0});
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor& g) { return g * 3.0; });
  y.retain_grad();
  y.register_hook([](const Tensor& g) { return g * 5.0; });
  y.sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{15.0, 15.0}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{30.0, 30.0}));
}

TEST(Hooks, ALeafHookSeesTheTotalOnceBeforeAccumulation) {
  Tensor x = leaf_of({1.0, 2.0});
  std::vector<std::vector<double>> seen;
  x.register_hook([&](const Tensor& g) { seen.push_back(g.to_vector<double>()); });  // void: keeps it
  (x * 2.0 + x * 3.0).sum().backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5.0, 5.0}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5.0, 5.0}));
  // a second pass: the hook sees that pass's gradient, .grad accumulates the (replaced) one
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  (x * 2.0).sum().backward();
  EXPECT_EQ(seen.back(), (std::vector<double>{2.0, 2.0}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{25.0, 25.0}));
}

TEST(Hooks, RunInRegistrationOrderAndRemove) {
  Tensor x = leaf_of({1.0});
  Tensor y = x * 1.0;
  std::string order;
  RemovableHandle a = y.register_hook([&](const Tensor& g) {
    order += "a";
    return g + 1.0;
  });
  RemovableHandle b = y.register_hook([&](const Tensor& g) {
    order += "b";
    return g * 10.0;
  });
  y.sum().backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(order, "ab");
  EXPECT_EQ(x.grad().item(), 20.0);  // (1 + 1) * 10
  a.remove();
  a.remove();  // harmless
  RemovableHandle copy = b;
  copy.remove();
  b.remove();  // removed through the copy already: harmless
  x.set_grad(Tensor());
  y.sum().backward();
  EXPECT_EQ(order, "ab");
  EXPECT_EQ(x.grad().item(), 1.0);
  RemovableHandle late;
  {
    Tensor z = leaf_of({1.0});
    late = z.register_hook([](const Tensor& g) { return g; });
  }
  late.remove();  // the tensor is gone: harmless
}

TEST(Hooks, OnTheOutputAndOnALeafOutput) {
  Tensor x = leaf_of({1.0, 2.0});
  Tensor s = (x * 2.0).sum();
  s.register_hook([](const Tensor& g) { return g * 10.0; });
  s.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{20.0, 20.0}));
  Tensor v = leaf_of({1.0, 2.0});
  v.register_hook([](const Tensor& g) { return g * 10.0; });
  v.backward(tensor({1.0, 1.0}, kFloat64));
  EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{10.0, 10.0}));
}

TEST(Hooks, RetainGradAccumulatesOverPassesAsTorch) {
  Tensor x = leaf_of({1.0, 2.0});
  Tensor y = x * 2.0;
  y.retain_grad();
  y.sum().backward(Tensor(), /*retain_graph=*/true);
  y.sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{2.0, 2.0}));
}

TEST(Hooks, RunForAutogradGradWhichLeavesRetainedGradAlone) {
  Tensor x = leaf_of({1.0, 2.0});
  x.register_hook([](const Tensor& g) { return g * 7.0; });
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor& g) { return g * 3.0; });
  y.retain_grad();
  Tensor z = (y * y).sum();  // dz/dy = 2y = (4, 8)
  std::vector<Tensor> g = autograd::grad({z}, {x, y});
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{12.0, 24.0}));    // y's hook ran
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{168.0, 336.0}));  // then x's: 12*2*7
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
}

TEST(Hooks, AReplacementMustKeepShapeAndDtype) {
  Tensor x = leaf_of({1.0, 2.0});
  Tensor y = x * 2.0;
  y.register_hook([](const Tensor&) { return ones({3}, kFloat64); });
  expect_error([&] { y.sum().backward(); }, {"register_hook", "shape [3]", "shape [2]"});
  Tensor v = leaf_of({1.0, 2.0});
  v.register_hook([](const Tensor&) { return ones({2}, kFloat32); });
  expect_error([&] { (v * 2.0).sum().backward(); }, {"register_hook", "float32", "float64"});
  expect_error([&] { ones({2}).register_hook([](const Tensor& g) { return g; }); },
               {"register_hook", "doesn't require gradient"});
}

TEST(Hooks, CostNothingWhenRemovedFromALeaf) {
  // a leaf whose hooks were all removed takes gradients straight into .grad again
  Tensor x = leaf_of({1.0});
  RemovableHandle h = x.register_hook([](const Tensor& g) { return g * 2.0; });
  h.remove();
  (x * 3.0).sum().backward();
  EXPECT_EQ(x.grad().item(), 3.0);
}

}  // namespace
}  // namespace xgrad::testing
