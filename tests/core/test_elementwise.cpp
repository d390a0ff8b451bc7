// tests/core/test_elementwise.cpp: values, gradients and errors of the elementwise ops,
// compared with torch (tests/fixtures/elementwise_reduce.txt from gen_elementwise_reduce.py).
// Gradients by finite differences are in gradcheck_rows_elementwise.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "error_message.h"
#include "fixture_reader.h"
#include "gradcheck_table.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/elementwise_reduce.txt");
  return f;
}

// A fixture input as a fresh leaf that requires grad.
Tensor leaf(const std::string& name) { return fx().get(name).clone().detach().requires_grad_(); }

// ---------------------------------------------------------------- torch chains

class Chains : public ::testing::TestWithParam<std::string> {};

TEST_P(Chains, Chain1MatchesTorch) {  // ((a*b + c).exp().log() / d).sum(dim=1).mean()
  const std::string c = "chain1." + GetParam();
  const double tol = GetParam() == "f64" ? 1e-12 : 2e-6;
  Tensor a = leaf(c + ".a"), b = leaf(c + ".b"), cc = leaf(c + ".c"), d = leaf(c + ".d");
  Tensor out = ((a * b + cc).exp().log() / d).sum({1}).mean();
  expect_close(out, fx().get(c + ".out"), tol, tol, c + ".out");
  out.backward();
  expect_close(a.grad(), fx().get(c + ".a.grad"), tol, tol, "a.grad");
  expect_close(b.grad(), fx().get(c + ".b.grad"), tol, tol, "b.grad");
  expect_close(cc.grad(), fx().get(c + ".c.grad"), tol, tol, "c.grad");
  expect_close(d.grad(), fx().get(c + ".d.grad"), tol, tol, "d.grad");
}

TEST_P(Chains, Chain2UnaryMathAndScalarsMatchTorch) {
  const std::string c = "chain2." + GetParam();
  const double tol = GetParam() == "f64" ? 1e-12 : 1e-5;
  Tensor x = leaf(c + ".x"), y = leaf(c + ".y"), w = leaf(c + ".w");
  Tensor out = (((x - y).tanh() * (x.abs() + 1.0).sqrt() + (x * x + 1.0).rsqrt() + x.clamp(-0.5, 0.5) * 2.0 -
                 (y.abs() + 0.5).pow(1.7) + 2.0 / (x.abs() + 1.0) - x / 3.0 + (1.0 - y) * x.pow(2.0)) *
                w)
                   .sum();
  expect_close(out, fx().get(c + ".out"), tol, tol, "out");
  out.backward();
  expect_close(x.grad(), fx().get(c + ".x.grad"), tol, tol, "x.grad");
  expect_close(y.grad(), fx().get(c + ".y.grad"), tol, tol, "y.grad");
  expect_close(w.grad(), fx().get(c + ".w.grad"), tol, tol, "w.grad");
}

TEST_P(Chains, Chain3TensorPowMatchesTorch) {
  const std::string c = "chain3." + GetParam();
  const double tol = GetParam() == "f64" ? 1e-12 : 1e-5;
  Tensor a = leaf(c + ".a"), b = leaf(c + ".b"), w = leaf(c + ".w");
  Tensor out = ((pow(a, b) - (-a)).mean({-1}, true) * w).sum();
  expect_close(out, fx().get(c + ".out"), tol, tol, "out");
  out.backward();
  expect_close(a.grad(), fx().get(c + ".a.grad"), tol, tol, "a.grad");
  expect_close(b.grad(), fx().get(c + ".b.grad"), tol, tol, "b.grad");
  expect_close(w.grad(), fx().get(c + ".w.grad"), tol, tol, "w.grad");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Chains, ::testing::Values("f64", "f32"));

TEST(Elementwise, MaximumMinimumTiesSplitTheGradientLikeTorch) {
  Tensor a = leaf("maxmin.a"), b = leaf("maxmin.b"), w = leaf("maxmin.w"), v = leaf("maxmin.v");
  Tensor out = (maximum(a, b) * w + minimum(a, b) * v + where(a > b, a * 2.0, b.exp())).sum();
  expect_close(out, fx().get("maxmin.out"), 1e-12, 1e-12, "out");
  out.backward();
  expect_close(a.grad(), fx().get("maxmin.a.grad"), 1e-12, 1e-12, "a.grad");
  expect_close(b.grad(), fx().get("maxmin.b.grad"), 1e-12, 1e-12, "b.grad");
}

TEST(Elementwise, ComparisonsMatchTorch) {
  Tensor x = fx().get("compare.x"), y = fx().get("compare.y");
  const std::vector<Tensor> got{x == 0.1, x < y, x >= y, x != y, !(x > 0.2), x <= 0.3};
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::string name = i == 0 ? "compare.out" : "compare.out" + std::to_string(i);
    EXPECT_EQ(got[i].dtype(), kBool) << name;
    expect_close(got[i], fx().get(name), 0, 0, name);
    EXPECT_FALSE(got[i].requires_grad());
  }
}

TEST(Elementwise, Int64ArithmeticMatchesTorch) {
  Tensor i = fx().get("int64.i"), j = fx().get("int64.j");
  Tensor s = i + j, d = i * 2.0 - j;
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(d.dtype(), kInt64);
  expect_close(s, fx().get("int64.out"), 0, 0, "i + j");
  expect_close(d, fx().get("int64.out1"), 0, 0, "i * 2 - j");
  Tensor half = i / 2.0;  // true division, as torch
  EXPECT_EQ(half.dtype(), kFloat32);
  expect_close(half, fx().get("int64.out5"), 0, 0, "i / 2");
  EXPECT_EQ((i + 1.5).dtype(), kFloat32);
  EXPECT_EQ((i * std::numeric_limits<double>::infinity()).dtype(), kFloat32);  // no int64 overflow
  EXPECT_EQ((i - 1.0).dtype(), kInt64);
  EXPECT_EQ((i * j).to_vector<int64_t>(), (std::vector<int64_t>{2, 10, 3, 14, 0, 2}));
}

// ---------------------------------------------------------------- behaviour

TEST(Elementwise, GradFnNamesMatchTorch) {
  Tensor x = inputs({{3, 4}})[0], y = inputs({{4}})[0];
  Tensor cond = x.detach() > 0.0;
  const std::vector<std::pair<Tensor, std::string>> cases{{x + y, "AddBackward0"},
                                                          {x + 2.0, "AddBackward0"},
                                                          {x - y, "SubBackward0"},
                                                          {2.0 - x, "RsubBackward1"},
                                                          {x * y, "MulBackward0"},
                                                          {x / y, "DivBackward0"},
                                                          {2.0 / x, "MulBackward0"},
                                                          {-x, "NegBackward0"},
                                                          {pow(x, 2.0), "PowBackward0"},
                                                          {pow(x, y), "PowBackward1"},
                                                          {exp(x), "ExpBackward0"},
                                                          {log(x), "LogBackward0"},
                                                          {sqrt(x), "SqrtBackward0"},
                                                          {rsqrt(x), "RsqrtBackward0"},
                                                          {tanh(x), "TanhBackward0"},
                                                          {abs(x), "AbsBackward0"},
                                                          {clamp(x, 0.0), "ClampBackward1"},
                                                          {maximum(x, y), "MaximumBackward0"},
                                                          {minimum(x, y), "MinimumBackward0"},
                                                          {where(cond, x, y), "WhereBackward0"}};
  for (const auto& [t, name] : cases) EXPECT_EQ(t.grad_fn_name(), name);
}

TEST(Elementwise, SumToSameShapeIsTheInputItself) {
  Tensor g = randn({4, 5});
  Tensor r = sum_to(g, {4, 5});
  EXPECT_EQ(r.impl(), g.impl());  // no copy on the common path
  EXPECT_EQ(sum_to(g, {5}).shape(), (Shape{5}));
  EXPECT_EQ(sum_to(g, {4, 1}).to_vector<float>(), g.sum({1}, true).to_vector<float>());
  EXPECT_EQ(sum_to(ones({1, 3}), {3}).to_vector<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(Elementwise, BroadcastingOperandOrderDoesNotMatter) {
  Tensor a = randn({2, 3, 4}), b = randn({3, 1});
  EXPECT_EQ((a * b).to_vector<float>(), (b * a).to_vector<float>());
  EXPECT_EQ((a + b).shape(), (Shape{2, 3, 4}));
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ((a * s).to_vector<float>(), (a * 2.0).to_vector<float>());
}

TEST(Elementwise, NaNPropagatesThroughMaximumAndClamp) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = from_vector(std::vector<double>{nan, 1.0, 2.0}, {3});
  Tensor b = from_vector(std::vector<double>{0.0, nan, 1.0}, {3});
  auto m = maximum(a, b).to_vector<double>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_EQ(m[2], 2.0);
  auto c = clamp(a, 0.0, 1.5).to_vector<double>();
  EXPECT_TRUE(std::isnan(c[0]));
  EXPECT_EQ(c[2], 1.5);
  EXPECT_EQ(clamp(a, 3.0, 2.0).to_vector<double>()[1], 2.0);  // min > max gives max, as torch
}

TEST(Elementwise, ClampGradientPassesAtTheBoundsLikeTorch) {
  Tensor x = tensor({-1.0, 0.0, 0.5, 1.0, 2.0}, kFloat64).requires_grad_();
  clamp(x, 0.0, 1.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 1, 1, 1, 0}));
}

TEST(Elementwise, PowSpecialExponentsAgreeWithStdPow) {
  Tensor x = tensor({0.5, 1.5, 3.0}, kFloat64);
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.0, 0.0, 2.5}) {
    auto got = pow(x, e).to_vector<double>();
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], std::pow(x.to_vector<double>()[i], e), 1e-14) << e;
  }
}

TEST(Elementwise, ComparisonsWorkOnInt64AndBool) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_EQ((i > 1.5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ((i == tensor({1, 0, 3})).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  Tensor m = tensor({true, false});
  EXPECT_EQ((!m).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ((m == tensor({true, true})).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(logical_not(tensor({0.0, 2.0})).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(Elementwise, WhereWorksOnInt64AndGivesNoGradToTheCondition) {
  Tensor cond = tensor({true, false, true});
  EXPECT_EQ(where(cond, tensor({1, 2, 3}), tensor({7, 8, 9})).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 8, 3}));
  Tensor a = ones({3}).requires_grad_(), b = zeros({1}).requires_grad_();
  where(cond, a, b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(b.grad().to_vector<float>(), (std::vector<float>{1}));
}

TEST(Elementwise, MulSavesOnlyWhatTheGradientNeeds) {
  Tensor w = randn({3}).requires_grad_();
  Tensor x = randn({3});  // no grad: only w's gradient (x) is needed
  Tensor y = w * x;
  x.mul_(2.0);  // x was saved (w needs it): backward must notice
  EXPECT_THROW(y.sum().backward(), Error);
  Tensor x2 = randn({3});
  Tensor y2 = w * x2;
  w.detach().mul_(2.0);  // w is not needed by anyone's gradient (x2 needs none)
  EXPECT_NO_THROW(y2.sum().backward());
}

// ---------------------------------------------------------------- errors

TEST(ElementwiseErrors, BroadcastMismatchNamesTheOpAndBothShapes) {
  expect_error([] { add(zeros({2, 3}), zeros({4})); }, {"add", "[2, 3]", "[4]"});
  expect_error([] { mul(zeros({2, 3}), zeros({3, 3})); }, {"mul", "[2, 3]", "[3, 3]"});
  expect_error([] { where(tensor({true, false}), zeros({3}), zeros({3})); }, {"where", "[2]", "[3]"});
  expect_error([] { lt(zeros({5}), zeros({2})); }, {"lt", "[5]", "[2]"});
}

TEST(ElementwiseErrors, DtypeMismatchIsRejectedNotPromoted) {
  expect_error([] { add(zeros({2}), zeros({2}, kFloat64)); }, {"add", "float32", "float64", "[2]"});
  expect_error([] { div(zeros({2}, kFloat64), zeros({2})); }, {"div", "float64", "float32"});
  expect_error([] { maximum(zeros({2}), zeros({2}, kInt64)); }, {"maximum", "float32", "int64"});
  expect_error([] { eq(zeros({2}), zeros({2}, kInt64)); }, {"eq", "dtype"});
}

TEST(ElementwiseErrors, MathOnIntegerTensorsIsRejected) {
  expect_error([] { pow(tensor({1, 2}), 2.0); }, {"pow", "int64"});
  expect_error([] { exp(tensor({1, 2})); }, {"exp", "int64"});
  expect_error([] { log(tensor({true})); }, {"log", "bool"});
  expect_error([] { add(tensor({true}), tensor({true})); }, {"add", "bool"});
}

TEST(ElementwiseErrors, BadArguments) {
  expect_error([] { clamp(zeros({2, 2}), std::nullopt, std::nullopt); }, {"clamp", "[2, 2]"});
  expect_error([] { where(ones({2}), zeros({2}), zeros({2})); }, {"where", "bool", "float32"});
  expect_error([] { sum_to(zeros({2, 3}), {4}); }, {"sum_to", "[2, 3]", "[4]"});
  expect_error([] { sum_to(zeros({3}), {2, 3}); }, {"sum_to", "[3]", "[2, 3]"});
  expect_error([] { add(Tensor(), zeros({1})); }, {"undefined"});
}

}  // namespace
}  // namespace xgrad::testing
