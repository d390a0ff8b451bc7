// tests/core/test_gradcheck.cpp: the shared OpGradcheck test (rows live in
// gradcheck_rows_*.cpp), the helpers rows use, and the checks on the checker itself: it must
// reject a wrong backward, and backward must add into pre-filled gradients.
#include <cmath>

#include "gradcheck_table.h"

namespace xgrad::testing {

std::vector<Tensor> inputs(const std::vector<Shape>& shapes, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> out;
  for (const Shape& s : shapes) out.push_back(randn(s, &gen, kFloat64).requires_grad_());
  return out;
}

Tensor noncontig(const Shape& shape, uint64_t seed) {
  if (shape.size() < 2) {
    Generator gen(seed);  // a strided 1-D view: every other element of a longer vector
    Tensor base = randn({shape.empty() ? 2 : shape[0] * 2}, &gen, kFloat64);
    return base.slice(0, 0, base.size(0), 2).detach().requires_grad_();
  }
  Shape swapped = shape;
  std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
  Generator gen(seed);
  Tensor base = randn(swapped, &gen, kFloat64);
  Tensor t = base.transpose(-1, -2).detach().requires_grad_();
  return t;
}

Tensor positive(const Shape& shape, double lo, double hi, uint64_t seed) {
  Generator gen(seed);
  Tensor t = rand(shape, &gen, kFloat64);
  return (t * (hi - lo) + lo).detach().requires_grad_();
}

std::string row_name(const ::testing::TestParamInfo<GradcheckRow>& info) {
  std::string s;
  for (char c : info.param.name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s + "_" + std::to_string(info.index);
}

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  const GradcheckRow& row = GetParam();
  GradcheckOptions opt;
  opt.name = row.name;
  opt.atol = row.atol;
  opt.rtol = row.rtol;
  GradcheckResult r = gradcheck(row.fn, row.make_inputs(), opt);
  EXPECT_TRUE(r.ok) << r.message;
}

// ---- the checker itself

// x * x whose backward is off by 1% in one element: the checker must notice.
static Tensor square_with_bad_backward(const Tensor& x) {
  Tensor out = empty(x.shape(), x.dtype());
  {
    NoGradGuard g;
    out.copy_(x * x);
  }
  return record("BadSquareBackward", out, {x}, [xs = save(x)](const Tensor& dout, Grads& grads) {
    Tensor dx = (dout * xs.get() * 2.0).contiguous();
    dx.data_ptr<double>()[1] *= 1.01;  // the deliberate bug
    grads.add(0, dx);
  });
}

TEST(Gradcheck, RejectsAWrongBackward) {
  auto x = inputs({{2, 3}});
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return square_with_bad_backward(in[0]); },
                                x, {.name = "bad_square"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("bad_square"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("input 0"), std::string::npos) << r.message;
}

TEST(Gradcheck, AcceptsTheSameOpWithACorrectBackward) {
  auto x = inputs({{2, 3}});
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, x,
                                {.name = "square"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Gradcheck, LeavesExistingGradientsAlone) {
  auto x = inputs({{3}});
  x[0].set_grad(full({3}, 5.0, kFloat64));
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return in[0] * 2.0; }, x);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(x[0].grad().to_vector<double>(), std::vector<double>(3, 5.0));
}

TEST(Autograd, BackwardAddsIntoPrefilledGradients) {
  auto x = inputs({{2, 2}})[0];
  Tensor pre = full({2, 2}, 10.0, kFloat64);
  x.set_grad(pre.clone());
  (x * 3.0).sum().backward();
  for (double g : x.grad().to_vector<double>()) EXPECT_DOUBLE_EQ(g, 13.0);
  (x * x).sum().backward();  // accumulates again: 13 + 2x
  auto xv = x.to_vector<double>();
  auto gv = x.grad().to_vector<double>();
  for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(gv[i], 13.0 + 2.0 * xv[i], 1e-12);
}

}  // namespace xgrad::testing
