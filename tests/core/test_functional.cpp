// tests/core/test_functional.cpp: autograd::functional (torch.autograd.functional) against
// torch: the hessian of a scalar function of a 6-vector in full; vjp, jvp and the jacobian
// of a two-input two-output function; vhp, hvp and the hessian of a two-input scalar
// function. Also create_graph (the results differentiated again), an omitted v, and the
// errors (strict, shapes). Fixtures: tests/fixtures/gen_functional.py (the functions are
// written there with the same ops).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

namespace F = autograd::functional;
using Tensors = std::vector<Tensor>;

const Fixture& fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/functional.txt");
  return fx;
}

Tensor scalar6(const Tensor& x) {
  return (tanh(x) * x.roll(1, 0).pow(2.0)).sum() + exp(x.slice(0, 0, 3) * x.slice(0, 3, 6)).sum() +
         x.pow(3.0).sum() * 0.1;
}

Tensors two_outputs(const Tensors& in) {
  const Tensor &x = in[0], &y = in[1];
  return {x * y, (exp(x) * y).sum(0)};
}

Tensor scalar_xy(const Tensors& in) {
  const Tensor &x = in[0], &y = in[1];
  return (tanh(x * y) * y).sum() + x.pow(2.0).sum() * y.sum();
}

TEST(Functional, HessianOfAScalarFunctionOfASixVectorMatchesTorch) {
  const Fixture& fx = fixture();
  const Tensor x = fx.get("hessian6.x");
  Tensor H = F::hessian(scalar6, x);
  EXPECT_EQ(H.shape(), (Shape{6, 6}));
  expect_close(H, fx.get("hessian6.H"), 1e-10, 1e-10, "H");
  EXPECT_FALSE(H.requires_grad());
  EXPECT_FALSE(x.requires_grad());  // the input is left as it was
}

TEST(Functional, VjpJvpAndJacobianOfSeveralInputsAndOutputsMatchTorch) {
  const Fixture& fx = fixture();
  const Tensors x{fx.get("multi.x"), fx.get("multi.y")};
  auto [out, vjp] = F::vjp(two_outputs, x, {fx.get("multi.vo0"), fx.get("multi.vo1")});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(vjp.size(), 2u);
  auto [out2, jvp] = F::jvp(two_outputs, x, {fx.get("multi.vi0"), fx.get("multi.vi1")});
  ASSERT_EQ(jvp.size(), 2u);
  const std::vector<Tensors> J = F::jacobian(two_outputs, x);
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    expect_close(vjp[i], fx.get("multi.vjp" + n), 1e-12, 1e-12, "vjp" + n);
    expect_close(jvp[i], fx.get("multi.jvp" + n), 1e-12, 1e-12, "jvp" + n);
    for (int j = 0; j < 2; ++j) {
      const std::string m = n + std::to_string(j);
      expect_close(J[i][j], fx.get("multi.J" + m), 1e-12, 1e-12, "J" + m);
    }
  }
  EXPECT_EQ(J[0][1].shape(), (Shape{2, 3, 2, 3}));  // out_0.shape + in_1.shape
}

TEST(Functional, VhpHvpAndHessianOfSeveralInputsMatchTorch) {
  const Fixture& fx = fixture();
  const Tensors x{fx.get("hvp.x"), fx.get("hvp.y")};
  const Tensors v{fx.get("hvp.v0"), fx.get("hvp.v1")};
  auto [out, vhp] = F::vhp(scalar_xy, x, v);
  auto [out2, hvp] = F::hvp(scalar_xy, x, v);
  const std::vector<Tensors> H = F::hessian(scalar_xy, x);
  expect_close(out, fx.get("hvp.f"), 1e-12, 1e-12, "f");
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    expect_close(vhp[i], fx.get("hvp.vhp" + n), 1e-11, 1e-12, "vhp" + n);
    expect_close(hvp[i], fx.get("hvp.hvp" + n), 1e-11, 1e-12, "hvp" + n);
    for (int j = 0; j < 2; ++j) {
      const std::string m = n + std::to_string(j);
      expect_close(H[i][j], fx.get("hvp.H" + m), 1e-10, 1e-12, "H" + m);
    }
  }
}

// f(x) = sum(x^4) / 12: the gradient x^3 / 3, H = diag(x^2), H v = x^2 v, and with
// create_graph, d/dx sum(H v) = 2 x v.
TEST(Functional, CreateGraphMakesTheResultsDifferentiable) {
  Tensor x = tensor({1.0, -2.0, 0.5}, kFloat64).requires_grad_();
  const Tensor v = tensor({3.0, 1.0, -2.0}, kFloat64);
  auto f = [](const Tensor& t) { return t.pow(4.0).sum() / 12.0; };
  auto [y, hv] = F::hvp(f, x, v, {.create_graph = true});
  EXPECT_EQ(hv.to_vector<double>(), (std::vector<double>{3.0, 4.0, -0.5}));
  ASSERT_TRUE(hv.requires_grad());
  std::vector<Tensor> d = autograd::grad({hv.sum()}, {x});
  EXPECT_EQ(d[0].to_vector<double>(), (std::vector<double>{6.0, -4.0, -2.0}));
  // without it the results carry no history
  auto [y2, hv2] = F::hvp(f, x, v);
  EXPECT_FALSE(hv2.requires_grad());
  EXPECT_FALSE(y2.requires_grad());
}

TEST(Functional, OmittedVIsOneForSingleElements) {
  const Tensor x = tensor({2.0}, kFloat64);
  auto f = [](const Tensor& t) { return t.pow(3.0).sum(); };  // f' = 3x^2, f'' = 6x
  EXPECT_EQ(F::vjp(f, x).second.to_vector<double>(), (std::vector<double>{12.0}));
  EXPECT_EQ(F::jvp(f, x).second.to_vector<double>(), (std::vector<double>{12.0}));
  EXPECT_EQ(F::vhp(f, x).second.to_vector<double>(), (std::vector<double>{12.0}));
  EXPECT_EQ(F::hvp(f, x).second.to_vector<double>(), (std::vector<double>{12.0}));
  EXPECT_EQ(F::jacobian(f, x).shape(), (Shape{1}));  // 0-d output, input (1,)
  expect_error(
      [&] {
        F::vjp([](const Tensor& t) { return t * 2.0; }, tensor({1.0, 2.0}, kFloat64));
      },
      {"vjp", "v can only be omitted", "[2]"});
}

TEST(Functional, IndependentInputsGiveZerosOrAnErrorWithStrict) {
  const Tensors x{tensor({1.0, 2.0}, kFloat64), tensor({3.0}, kFloat64)};
  auto f = [](const Tensors& in) { return Tensors{in[0] * 2.0}; };  // ignores in[1]
  auto [out, g] = F::vjp(f, x, {ones({2}, kFloat64)});
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{0.0}));
  const std::vector<Tensors> J = F::jacobian(f, x);
  EXPECT_EQ(J[0][1].shape(), (Shape{2, 1}));
  EXPECT_EQ(J[0][1].to_vector<double>(), (std::vector<double>{0.0, 0.0}));
  expect_error([&] { F::vjp(f, x, {ones({2}, kFloat64)}, {.strict = true}); }, {"vjp", "input", "strict"});
  expect_error([&] { F::jacobian(f, x, {.strict = true}); },
               {"jacobian", "independent of input 1", "strict"});
  // a linear function has a zero hessian: strict refuses it (its jacobian has no history)
  auto linear_fn = [](const Tensor& t) { return (t * 3.0).sum(); };
  EXPECT_EQ(F::hessian(linear_fn, tensor({1.0, 2.0}, kFloat64)).to_vector<double>(),
            std::vector<double>(4, 0.0));
  expect_error([&] { F::hvp(linear_fn, tensor({1.0}, kFloat64), Tensor(), {.strict = true}); },
               {"hvp", "independent of input 0"});
}

TEST(Functional, ErrorsNameTheFunctionAndTheShapes) {
  const Tensor x = tensor({1.0, 2.0}, kFloat64);
  auto f = [](const Tensor& t) { return t * 2.0; };
  expect_error([&] { F::vjp(f, x, ones({3}, kFloat64)); },
               {"vjp", "v[0] of shape [3]", "output 0 of shape [2]"});
  expect_error([&] { F::jvp(f, x, ones({2, 1}, kFloat64)); }, {"jvp", "[2, 1]", "input 0"});
  expect_error([&] { F::hessian(f, x); }, {"hessian", "single element", "[2]"});
  expect_error([&] { F::vjp(f, tensor({1, 2})); }, {"vjp", "int64", "floating-point"});
}

}  // namespace
}  // namespace xgrad::testing
