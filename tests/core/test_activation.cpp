// tests/core/test_activation.cpp: softmax, log_softmax, relu, sigmoid, gelu against PyTorch
// (tests/fixtures/activation_nn.txt from gen_activation_nn.py), fused vs composed, masked
// rows, layouts, and errors. Gradient checks are in gradcheck_rows_activation.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing::act_nn {

// Helpers shared with test_nn_functional.cpp (declared there).
// Runs one fixture case: inputs name.in<i>, output name.out, upstream gradient name.dout
// (absent for scalar outputs) and input gradients name.grad<i>.
void check_fixture_case(const Fixture& fx, const std::string& name, int n_inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& fn, double rtol = 1e-5,
                        double atol = 1e-6) {
  SCOPED_TRACE(name);
  std::vector<Tensor> in;
  for (int i = 0; i < n_inputs; ++i) {
    Tensor t = fx.get(name + ".in" + std::to_string(i)).detach();
    if (fx.has(name + ".grad" + std::to_string(i))) t.requires_grad_();
    in.push_back(t);
  }
  Tensor out = fn(in);
  expect_close(out, fx.get(name + ".out"), rtol, atol, name + ".out");
  if (fx.has(name + ".dout")) out.backward(fx.get(name + ".dout"));
  else out.backward();
  for (int i = 0; i < n_inputs; ++i) {
    const std::string g = name + ".grad" + std::to_string(i);
    if (!fx.has(g)) continue;
    ASSERT_TRUE(in[i].grad().defined()) << g;
    expect_close(in[i].grad(), fx.get(g), rtol, atol, g);
  }
}

const Fixture& activation_nn_fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/activation_nn.txt");
  return fx;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected xgrad::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

namespace {

using V = std::vector<Tensor>;

TEST(Softmax, MatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "softmax_last", 1, [](const V& x) { return softmax(x[0], -1); });
  check_fixture_case(fx, "softmax_mid", 1, [](const V& x) { return softmax(x[0], 1); });
  check_fixture_case(
      fx, "softmax_dim0_f64", 1, [](const V& x) { return softmax(x[0], 0); }, 1e-12, 1e-14);
  check_fixture_case(fx, "softmax_long", 1, [](const V& x) { return x[0].softmax(-1); });
  check_fixture_case(fx, "log_softmax_last", 1, [](const V& x) { return log_softmax(x[0], -1); });
  check_fixture_case(
      fx, "log_softmax_mid_f64", 1, [](const V& x) { return x[0].log_softmax(1); }, 1e-12, 1e-14);
}

TEST(Softmax, MaskedRowsGiveExactZerosAndOnes) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "softmax_masked", 1, [](const V& x) { return softmax(x[0], -1); });
  check_fixture_case(fx, "log_softmax_masked", 1, [](const V& x) { return log_softmax(x[0], -1); });
  const double inf = INFINITY;
  Tensor x = tensor({{0.5, -inf, -inf, -inf}, {-inf, 2.0, -inf, 1.0}}).requires_grad_();
  Tensor y = softmax(x, -1);
  auto v = y.to_vector<float>();
  EXPECT_EQ(v[0], 1.0f);
  for (int i : {1, 2, 3, 4, 6}) EXPECT_EQ(v[i], 0.0f) << i;
  (y * tensor({{1.0, 2.0, 3.0, 4.0}, {5.0, 6.0, 7.0, 8.0}})).sum().backward();
  for (float g : x.grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(x.grad().to_vector<float>()[0], 0.0f);  // a row of one live element is constant
}

TEST(Softmax, AllMaskedRowIsNanLikeTorch) {
  // torch.softmax(tensor([-inf, -inf, -inf]), -1) is nan: exp(x - max) = exp(-inf + inf)
  const double inf = INFINITY;
  Tensor y = softmax(tensor({{-inf, -inf, -inf}, {0.0, 0.0, -inf}}), -1);
  auto v = y.to_vector<float>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(v[i]));
  EXPECT_FLOAT_EQ(v[3], 0.5f);
  EXPECT_EQ(v[5], 0.0f);
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  Tensor y = softmax(tensor({1000.0, 1001.0, -1000.0}), 0);
  auto v = y.to_vector<float>();
  EXPECT_NEAR(v[0], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_EQ(v[2], 0.0f);
  Tensor l = log_softmax(tensor({1000.0, 1001.0}), 0);
  EXPECT_NEAR(l.to_vector<float>()[1], -std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(Softmax, FusedMatchesComposition) {
  Generator g(3);
  Tensor x = randn({4, 3, 6}, &g, kFloat64);
  for (int64_t d : {0, 1, 2}) {
    SCOPED_TRACE(d);
    Tensor a = x.detach().requires_grad_(), b = x.detach().requires_grad_();
    Tensor w = randn({4, 3, 6}, &g, kFloat64);
    Tensor fused = softmax(a, d);
    Tensor e = exp(b - amax(b, {d}, true).detach());
    Tensor composed = e / e.sum({d}, true);
    expect_close(fused, composed, 1e-12, 1e-14, "value");
    (fused * w).sum().backward();
    (composed * w).sum().backward();
    expect_close(a.grad(), b.grad(), 1e-10, 1e-12, "grad");
    Tensor ls = log_softmax(x, d);
    expect_close(ls, log(softmax(x, d)), 1e-12, 1e-12, "log_softmax");
  }
}

TEST(Softmax, AnyLayoutAndDim) {
  Generator g(5);
  Tensor base = randn({3, 5, 4}, &g);
  Tensor nc = base.transpose(0, 2);  // (4, 5, 3), non-contiguous
  for (int64_t d : {-1, 0, 1}) {
    expect_close(softmax(nc, d), softmax(nc.contiguous(), d), 0, 0, "softmax");
    expect_close(log_softmax(nc, d), log_softmax(nc.contiguous(), d), 0, 0, "log_softmax");
  }
  // a 0-d tensor is one row of one element, and an empty tensor stays empty
  EXPECT_EQ(softmax(scalar_tensor(3.0), 0).item(), 1.0);
  EXPECT_EQ(softmax(zeros({0, 4}), 1).numel(), 0);
}

TEST(Softmax, GradFnNamesAndErrors) {
  Tensor x = randn({2, 3}).requires_grad_();
  EXPECT_EQ(softmax(x, 1).grad_fn_name(), "SoftmaxBackward0");
  EXPECT_EQ(log_softmax(x, 1).grad_fn_name(), "LogSoftmaxBackward0");
  expect_error([&] { softmax(x, 2); }, {"softmax", "dimension 2", "[2, 3]"});
  expect_error([&] { log_softmax(x, -3); }, {"log_softmax", "[2, 3]"});
  expect_error([&] { softmax(arange(4), 0); }, {"softmax", "int64"});
}

TEST(Activations, MatchTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "relu", 1, [](const V& x) { return relu(x[0]); });
  check_fixture_case(fx, "sigmoid", 1, [](const V& x) { return sigmoid(x[0]); });
  check_fixture_case(fx, "gelu_none", 1, [](const V& x) { return gelu(x[0]); });
  check_fixture_case(fx, "gelu_tanh", 1, [](const V& x) { return gelu(x[0], "tanh"); });
  check_fixture_case(
      fx, "gelu_none_f64", 1, [](const V& x) { return gelu(x[0], "none"); }, 1e-12, 1e-14);
  check_fixture_case(
      fx, "gelu_tanh_f64", 1, [](const V& x) { return gelu(x[0], "tanh"); }, 1e-12, 1e-14);
  check_fixture_case(fx, "gelu_tanh_long", 1, [](const V& x) { return gelu(x[0], "tanh"); });
}

TEST(Activations, GeluTanhIsGpt2Formula) {
  Tensor x = linspace(-5, 5, 41, kFloat64);
  Tensor ref = 0.5 * x * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * pow(x, 3.0))));
  expect_close(gelu(x, "tanh"), ref, 1e-13, 1e-15, "gelu tanh");
}

// float32 runs the tanh form as x / (1 + exp(-2u)) on a polynomial exp (vec::gelu_tanh): its
// value and gradient against the float64 composition of GPT-2's formula, over a range that
// reaches the clamped exp, at lengths with and without a scalar tail.
TEST(Activations, GeluTanhFloatMatchesTheComposedFormula) {
  for (int64_t n : {1024, 1003}) {
    SCOPED_TRACE("n " + std::to_string(n));
    Tensor x64 = linspace(-12, 12, n, kFloat64);
    Tensor x = x64.to(kFloat32).requires_grad_();
    Tensor xd = x.detach().to(kFloat64).requires_grad_();
    Tensor ref = 0.5 * xd * (1.0 + tanh(std::sqrt(2.0 / M_PI) * (xd + 0.044715 * pow(xd, 3.0))));
    Tensor y = gelu(x, "tanh");
    expect_close(y.to(kFloat64), ref.detach(), 2e-6, 1e-6, "value");
    y.backward(ones_like(y));
    ref.backward(ones_like(ref));
    expect_close(x.grad().to(kFloat64), xd.grad(), 2e-5, 2e-6, "grad");
  }
}

// Past |x| = 10, float's tanh-GELU is torch's exactly: 0.5 (1 + tanh(u)) is 1 or 0 there, so
// y = x or -0 and dy/dx = 1 or 0, with NaN where torch's formulas give one (y at -inf, dy/dx
// where x^2 overflows). Each x fills a tensor of 37, so it runs in whole vectors and in the
// scalar tail. torch 1.13's numbers, float32, printed by
//   python3 -c "import torch; x = torch.full((37,), v, requires_grad=True);
//     y = torch.nn.functional.gelu(x, approximate='tanh'); y.backward(torch.ones(37));
//     print(y[36].item(), x.grad[36].item())"
TEST(Activations, GeluTanhFloatSaturatesLikeTorch) {
  const float inf = INFINITY, nan = NAN;
  struct Row {
    float x, y, dx;
  };
  const Row rows[] = {
      {1e12f, 1e12f, 1.0f}, {-1e12f, -0.0f, 0.0f},  // the clamped exp gave dy/dx 4.86 and -3.86
      {1e38f, 1e38f, nan},  {-1e38f, -0.0f, nan},   // x^2 overflows: torch's dy/dx is NaN
      {inf, inf, nan},      {-inf, nan, nan},      {nan, nan, nan},
      {10.0f, 10.0f, 1.0f}, {-10.0f, -0.0f, 0.0f},  // the first saturated values
      {9.99f, 9.99f, 1.0f}, {-9.99f, -0.0f, 0.0f},  // below 10: the formula, within 1e-30
  };
  // a equals torch's b: the same bits (the sign of a zero too), any NaN for NaN; below |x| = 10,
  // where float keeps its own rounding, within 1e-30
  auto same = [](float a, float b, float x) {
    if (std::isnan(b)) return std::isnan(a);
    if (std::fabs(x) < 10.0f) return std::fabs(a - b) <= 1e-30f;
    return a == b && std::signbit(a) == std::signbit(b);
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(::testing::Message() << "x " << r.x);
    Tensor x = full({37}, r.x).requires_grad_();
    Tensor y = gelu(x, "tanh");
    y.backward(ones_like(y));
    const std::vector<float> ys = y.to_vector<float>(), dxs = x.grad().to_vector<float>();
    for (std::size_t i = 0; i < ys.size(); ++i) {  // the first difference of each
      if (!same(ys[i], r.y, r.x)) {
        ADD_FAILURE() << "y[" << i << "] = " << ys[i] << ", torch " << r.y;
        break;
      }
    }
    for (std::size_t i = 0; i < dxs.size(); ++i) {
      if (!same(dxs[i], r.dx, r.x)) {
        ADD_FAILURE() << "dx[" << i << "] = " << dxs[i] << ", torch " << r.dx;
        break;
      }
    }
  }
}

// GeluBackward0 saves its input, as torch's does (the backward evaluates gelu' from x): an
// in-place change of x after the forward makes the backward throw instead of using stale values.
TEST(Activations, GeluSavesItsInput) {
  Tensor leaf = randn({4, 5}).requires_grad_();
  Tensor x = leaf * 1.0;
  Tensor y = gelu(x, "tanh");
  x.mul_(2.0);
  expect_error([&] { y.sum().backward(); }, {"modified by an in-place operation"});
}

TEST(Activations, NonContiguousInputs) {
  Generator g(9);
  Tensor nc = randn({6, 5}, &g).t();
  expect_close(relu(nc), relu(nc.contiguous()), 0, 0, "relu");
  expect_close(sigmoid(nc), sigmoid(nc.contiguous()), 0, 0, "sigmoid");
  expect_close(gelu(nc), gelu(nc.contiguous()), 0, 0, "gelu");
}

TEST(Activations, NamesAndErrors) {
  Tensor x = randn({2, 3}).requires_grad_();
  EXPECT_EQ(relu(x).grad_fn_name(), "ReluBackward0");
  EXPECT_EQ(sigmoid(x).grad_fn_name(), "SigmoidBackward0");
  EXPECT_EQ(gelu(x).grad_fn_name(), "GeluBackward0");
  EXPECT_EQ(gelu(x, "tanh").grad_fn_name(), "GeluBackward0");
  expect_error([&] { gelu(x, "erf"); }, {"gelu", "\"erf\"", "none", "tanh"});
  expect_error([&] { relu(arange(3)); }, {"relu", "int64"});
  EXPECT_TRUE(std::isnan(relu(tensor({NAN})).item()));  // NaN propagates, as in torch
}

}  // namespace
}  // namespace xgrad::testing::act_nn
