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

namespace {
// a leaf with t's values, stored with all dims reversed (seen through permute), or for 1-D
// (and shapes whose reversal is still contiguous) every other element of a longer buffer
// from element 1; undefined when t cannot be laid out differently (fewer than 2 elements)
Tensor strided_leaf(const Tensor& t) {
  NoGradGuard guard;
  const int64_t nd = t.dim();
  if (t.numel() < 2) return Tensor();
  if (nd >= 2) {
    Shape rev(t.shape().rbegin(), t.shape().rend()), perm(static_cast<std::size_t>(nd));
    for (int64_t d = 0; d < nd; ++d) perm[d] = nd - 1 - d;
    Tensor s = zeros(rev, t.dtype()).permute(perm);
    if (!s.is_contiguous()) {
      s.copy_(t);
      return s.detach().requires_grad_();
    }
  }
  int64_t last = nd - 1;
  while (t.size(last) == 1) --last;
  Shape wide = t.shape();
  wide[last] = 2 * t.size(last) + 1;
  Tensor s = zeros(wide, t.dtype()).slice(last, 1, wide[last], 2);
  s.copy_(t);
  return s.detach().requires_grad_();
}

// t's first slice along its first dim longer than 1 (keepdim), as a leaf; undefined if none
Tensor first_slice_leaf(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) return t.detach().narrow(d, 0, 1).clone().requires_grad_();
  return Tensor();
}
}  // namespace

std::vector<InputLayout> input_layouts(const GradcheckRow& row) {
  std::vector<InputLayout> out;
  out.push_back({"as made", row.make_inputs(), row.fn});

  bool changed = false;
  if (row.strided_inputs) {
    std::vector<Tensor> strided = row.make_inputs();
    for (Tensor& t : strided) {
      if (!t.requires_grad() || !t.is_contiguous()) continue;
      Tensor s = strided_leaf(t);
      if (s.defined()) t = s, changed = true;
    }
    if (changed) out.push_back({"strided", strided, row.fn});
  }

  if (!row.broadcast_inputs) return out;
  std::vector<Tensor> small = row.make_inputs();
  std::vector<Shape> shapes;
  changed = false;
  for (Tensor& t : small) {
    shapes.push_back(t.shape());
    if (!t.requires_grad()) continue;
    Tensor s = first_slice_leaf(t);
    if (s.defined()) t = s, changed = true;
  }
  if (changed)
    out.push_back({"broadcast", small, [fn = row.fn, shapes](const std::vector<Tensor>& x) {
                     std::vector<Tensor> big;
                     for (std::size_t i = 0; i < x.size(); ++i)
                       big.push_back(x[i].shape() == shapes[i] ? x[i] : x[i].expand(shapes[i]));
                     return fn(big);
                   }});
  return out;
}

TEST_P(OpGradcheck, MatchesFiniteDifferences) {
  const GradcheckRow& row = GetParam();
  GradcheckOptions opt;
  opt.atol = row.atol;
  opt.rtol = row.rtol;
  for (const InputLayout& layout : input_layouts(row)) {
    opt.name = row.name + " [" + layout.name + " inputs]";
    GradcheckResult r = gradcheck(layout.fn, layout.inputs, opt);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// The op's backward differentiated again: gradgradcheck on the inputs as made, with the
// grad_output non-contiguous (the first-order douts' layouts are covered above).
TEST_P(OpGradcheck, SecondDerivativesMatchFiniteDifferences) {
  const GradcheckRow& row = GetParam();
  if (!row.no_gradgradcheck.empty()) GTEST_SKIP() << "no gradgradcheck: " << row.no_gradgradcheck;
  GradgradcheckOptions opt;
  opt.name = row.name;
  opt.atol = row.atol;
  opt.rtol = row.rtol;
  opt.contiguous_grad_outputs = false;
  opt.dout_layouts = false;
  GradcheckResult r = gradgradcheck(row.fn, row.make_inputs(), opt);
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

// 2 * x whose backward reads dout's buffer as if it were contiguous (the bug a missing
// contig(dout) makes): right for a contiguous or offset dout only.
static Tensor twice_reading_dout_as_laid_out(const Tensor& x) {
  Tensor out = empty(x.shape(), x.dtype());
  {
    NoGradGuard g;
    out.copy_(x * 2.0);
  }
  return record("BadTwiceBackward", out, {x}, [](const Tensor& dout, Grads& grads) {
    Tensor dx = empty(dout.shape(), dout.dtype());
    const double* dy = dout.data_ptr<double>();  // the deliberate bug: no contig(dout)
    for (int64_t i = 0; i < dx.numel(); ++i) dx.data_ptr<double>()[i] = 2.0 * dy[i];
    grads.add(0, dx);
  });
}

TEST(Gradcheck, RejectsABackwardThatIgnoresDoutStrides) {
  auto x = inputs({{3, 4}});
  auto fn = [](const std::vector<Tensor>& in) { return twice_reading_dout_as_laid_out(in[0]); };
  GradcheckResult r = gradcheck(fn, x, {.name = "bad_twice"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("transposed dout"), std::string::npos) << r.message;
  // the contiguous upstream gradient alone (dout_layouts off) misses it
  GradcheckResult only_contiguous = gradcheck(fn, x, {.name = "bad_twice", .dout_layouts = false});
  EXPECT_TRUE(only_contiguous.ok) << only_contiguous.message;
}

TEST(Gradcheck, HandsBackwardEveryDoutLayout) {
  auto x = inputs({{3, 4}});
  GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, x);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.layouts,
            (std::vector<std::string>{"contiguous", "offset", "transposed", "step-sliced", "expanded"}));
  // 1-D: no transpose; 0-d: no step or stride 0 either
  auto v = inputs({{5}});
  r = gradcheck([](const std::vector<Tensor>& in) { return in[0] * 3.0; }, v);
  EXPECT_EQ(r.layouts, (std::vector<std::string>{"contiguous", "offset", "step-sliced", "expanded"}));
  r = gradcheck([](const std::vector<Tensor>& in) { return sum(in[0]); }, v);
  EXPECT_EQ(r.layouts, (std::vector<std::string>{"contiguous", "offset"}));
}

TEST(Gradcheck, InputLayoutsAreStridedAndBroadcast) {
  GradcheckRow row{"mul",
                   [] {
                     return inputs({{3, 4}, {4}});
                   },
                   [](const std::vector<Tensor>& x) { return mul(x[0], x[1]); }};
  std::vector<InputLayout> layouts = input_layouts(row);
  ASSERT_EQ(layouts.size(), 3u);
  EXPECT_EQ(layouts[1].name, "strided");
  for (const Tensor& t : layouts[1].inputs) {
    EXPECT_FALSE(t.is_contiguous());
    EXPECT_TRUE(t.is_leaf() && t.requires_grad());
  }
  auto same = [](const Tensor& a, const Tensor& b) { return a.to_vector<double>() == b.to_vector<double>(); };
  EXPECT_TRUE(same(layouts[1].inputs[0], layouts[0].inputs[0]));
  EXPECT_TRUE(same(layouts[1].inputs[1], layouts[0].inputs[1]));
  EXPECT_EQ(layouts[2].name, "broadcast");
  EXPECT_EQ(layouts[2].inputs[0].shape(), (Shape{1, 4}));
  EXPECT_EQ(layouts[2].inputs[1].shape(), (Shape{1}));
  Tensor y = layouts[2].fn(layouts[2].inputs);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  row.broadcast_inputs = false;
  EXPECT_EQ(input_layouts(row).size(), 2u);
  row.strided_inputs = false;
  EXPECT_EQ(input_layouts(row).size(), 1u);
}

// x * x with a right first-order backward that is not differentiable: computed by a kernel
// (no history), or with x detached (history through dout only).
static Tensor square_with_backward(const Tensor& x, bool detach_x) {
  Tensor out = empty(x.shape(), x.dtype());
  {
    NoGradGuard g;
    out.copy_(x * x);
  }
  return record("SquareBackward", out, {x}, [xs = save(x), detach_x](const Tensor& dout, Grads& grads) {
    if (detach_x) return grads.add(0, dout * xs.get().detach() * 2.0);
    NoGradGuard raw;  // the deliberate bug: the gradient carries no history
    grads.add(0, dout * xs.get() * 2.0);
  });
}

TEST(Gradgradcheck, RejectsABackwardThatDoesNotRecord) {
  auto x = inputs({{2, 3}});
  auto raw = [](const std::vector<Tensor>& in) { return square_with_backward(in[0], false); };
  EXPECT_TRUE(gradcheck(raw, x).ok);  // the first order is right
  GradcheckResult r = gradgradcheck(raw, x, {.name = "raw_square"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("gradgradcheck(raw_square)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("has no history"), std::string::npos) << r.message;
}

TEST(Gradgradcheck, RejectsAWrongSecondDerivative) {
  auto x = inputs({{2, 3}});
  auto detached = [](const std::vector<Tensor>& in) { return square_with_backward(in[0], true); };
  EXPECT_TRUE(gradcheck(detached, x).ok);
  GradcheckResult r = gradgradcheck(detached, x, {.name = "detached_square"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("input 0"), std::string::npos) << r.message;  // d/dx of dx is wrong
}

TEST(Gradgradcheck, AcceptsRecordedBackwardsWithEveryGradOutputLayout) {
  auto x = inputs({{3, 4}, {4}});
  GradcheckResult r = gradgradcheck(
      [](const std::vector<Tensor>& in) { return tanh(in[0] * in[1]).pow(3.0) / (in[1].exp() + 1.0); }, x);
  EXPECT_TRUE(r.ok) << r.message;
  ASSERT_FALSE(r.layouts.empty());
  EXPECT_EQ(r.layouts.front(), "contiguous v, contiguous");
  EXPECT_EQ(r.layouts.back(), "non-contiguous v, expanded");
  // a function whose first-order gradient is zero (no history) has nothing to differentiate
  r = gradgradcheck([](const std::vector<Tensor>& in) { return in[0].pow(0.0); }, x);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Gradcheck, AcceptsTheSameOpWithACorrectBackward) {
  auto x = inputs({{2, 3}});
  GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, x, {.name = "square"});
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
