// tests/core/test_inplace_views.cpp: in-place ops through views of tensors in the autograd graph
// (core/src/inplace.cpp). Gradients of every case in inplace_view_cases.h against PyTorch
// (tests/fixtures/inplace_views.txt, from gen_inplace_views.py); grad_fn names as torch 1.13
// shows them (CopySlices on the base, AsStridedBackward0 on a view whose storage was written);
// the errors torch raises (a leaf or a view of one, an expanded view, a view made under
// NoGradGuard) before anything is written; the version counter's error for a tensor saved for
// backward and modified afterwards; retain_graph and freeing through CopySlices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "inplace_view_cases.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

const Fixture& fixture() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/inplace_views.txt");
  return f;
}

class InplaceViewsVsTorch : public ::testing::TestWithParam<InplaceViewCase> {};

TEST_P(InplaceViewsVsTorch, OutputAndGradients) {
  const InplaceViewCase& c = GetParam();
  const Fixture& fx = fixture();
  std::vector<Tensor> leaves;
  const char* keys[] = {"p", "q"};
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor t = fx.get(c.name + "." + keys[i]).clone();
    ASSERT_EQ(t.shape(), c.shapes[i]) << c.name;
    leaves.push_back(t.requires_grad_());
  }
  Tensor out = c.fn(leaves);
  expect_close(out, fx.get(c.name + ".out"), 1e-12, 1e-12, c.name + ".out");
  out.backward(fx.get(c.name + ".w"));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::string key = c.name + "." + keys[i] + ".grad";
    Tensor g = leaves[i].grad().defined() ? leaves[i].grad() : zeros_like(leaves[i]);
    expect_close(g, fx.get(key), 1e-12, 1e-12, key);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, InplaceViewsVsTorch, ::testing::ValuesIn(inplace_view_cases()),
                         [](const ::testing::TestParamInfo<InplaceViewCase>& info) {
                           return info.param.name;
                         });

Tensor leaf34() { return arange(0, 12, 1, kFloat64).reshape({3, 4}).detach().requires_grad_(); }

// ---------------------------------------------------------------- grad_fn names (torch 1.13)
TEST(InplaceViews, GradFnNamesLikeTorch) {
  Tensor p = leaf34();
  Tensor x = p.clone();
  Tensor v = x.slice(0, 0, 1);
  EXPECT_EQ(v.grad_fn_name(), "SliceBackward0");
  v.masked_fill_(tensor({true, false, true, false}), 0.0);
  EXPECT_EQ(x.grad_fn_name(), "CopySlices");
  EXPECT_NE(to_string(x).find("grad_fn=<CopySlices>"), std::string::npos) << to_string(x);
  EXPECT_EQ(v.grad_fn_name(), "AsStridedBackward0");
  EXPECT_EQ(v.grad_fn()->next[0].fn, x.grad_fn());  // the view reads the rebased history
  Tensor s = x[2];
  x.mul_(2.0);  // the base written while a view is held
  EXPECT_EQ(x.grad_fn_name(), "MulBackward0");
  EXPECT_EQ(s.grad_fn_name(), "AsStridedBackward0");
  EXPECT_NE(to_string(x).find("grad_fn=<MulBackward0>"), std::string::npos) << to_string(x);
  EXPECT_NE(to_string(s).find("grad_fn=<AsStridedBackward0>"), std::string::npos) << to_string(s);
  Tensor t = x.slice(1, 0, 2);  // made after the write: keeps its own node
  EXPECT_EQ(t.grad_fn_name(), "SliceBackward0");
  EXPECT_EQ(t.grad_fn_name(), "SliceBackward0");

  // the in-place ops' own nodes, on a tensor that is not a view
  const Tensor q = full({4}, 0.5, kFloat64).requires_grad_();  // broadcasts over x's rows
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> ops = {
      {"MaskedFillBackward0",
       [](Tensor& y) {
         y.masked_fill_(tensor({true, false, false, true}), 1.0);
       }},
      {"AddBackward0", [&q](Tensor& y) { y.add_(q, 2.0); }},
      {"MulBackward0", [](Tensor& y) { y.mul_(2.0); }},
      {"CopyBackwards", [&q](Tensor& y) { y.copy_(q); }},
      {"FillBackward2", [](Tensor& y) { y.fill_(1.0); }},
      {"ZeroBackward0", [](Tensor& y) { y.zero_(); }},
      {"ClampBackward1", [](Tensor& y) { y.clamp_(-0.5, 0.5); }},
      {"UniformBackward0", [](Tensor& y) { y.uniform_(); }},
      {"NormalBackward0", [](Tensor& y) { y.normal_(); }},
      {"BernoulliBackward2", [](Tensor& y) { y.bernoulli_(0.5); }},
  };
  for (const auto& [name, op] : ops) {
    Tensor y = p.clone();
    op(y);
    EXPECT_EQ(y.grad_fn_name(), name);
    Tensor z = p.clone();
    Tensor row = z[1];
    op(row);  // the same op through a view
    EXPECT_EQ(z.grad_fn_name(), "CopySlices") << name;
    EXPECT_EQ(row.grad_fn_name(), "AsStridedBackward0") << name;
  }
}

// ---------------------------------------------------------------- gradients, by hand
TEST(InplaceViews, OpsThatOverwriteGiveTheOldValuesZeroGradient) {
  // fill_, zero_, copy_ and the random fills: the overwritten region gets 0, the rest passes,
  // and a source that requires grad (copy_) gets the region's gradient
  for (const char* op : {"fill_", "zero_", "uniform_", "normal_", "bernoulli_", "copy_"}) {
    Tensor p = leaf34();
    Tensor q = full({4}, 3.0, kFloat64).requires_grad_();
    Tensor x = p.clone();
    Tensor row = x[1];
    const std::string name = op;
    if (name == "fill_") row.fill_(7.0);
    if (name == "zero_") row.zero_();
    if (name == "uniform_") row.uniform_();
    if (name == "normal_") row.normal_();
    if (name == "bernoulli_") row.bernoulli_(0.5);
    if (name == "copy_") row.copy_(q);
    (x * arange(1, 13, 1, kFloat64).reshape({3, 4})).sum().backward();
    const std::vector<double> g = p.grad().to_vector<double>();
    for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], (i / 4 == 1) ? 0.0 : i + 1.0) << op << " " << i;
    if (name == "copy_") EXPECT_EQ(q.grad().to_vector<double>(), (std::vector<double>{5, 6, 7, 8}));
  }
}

TEST(InplaceViews, MaskedFillOfARowSliceOfAClone) {
  // x = p0.clone(); x[0:1].masked_fill_(mask, 0.0); (x * w).sum().backward()
  Tensor p0 = leaf34();
  Tensor w = arange(1, 13, 1, kFloat64).reshape({3, 4});
  Tensor x = p0.clone();
  x.slice(0, 0, 1).masked_fill_(tensor({false, true, true, false}), 0.0);
  EXPECT_EQ(x.to_vector<double>()[1], 0.0);
  (x * w).sum().backward();
  EXPECT_EQ(p0.grad().to_vector<double>(), (std::vector<double>{1, 0, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
}

TEST(InplaceViews, WorksWhetherTheBaseOrTheViewHandleIsKept) {
  Tensor w = arange(1, 5, 1, kFloat64);
  {  // only the view is kept: the base lives on through it
    Tensor p = leaf34();
    Tensor v = (p * 1.0).slice(0, 0, 1).squeeze(0);  // p's row 0, (4)
    v.mul_(2.0);
    EXPECT_EQ(v.grad_fn_name(), "AsStridedBackward0");
    (v * w).sum().backward();
    const std::vector<double> g = p.grad().to_vector<double>();
    for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], i < 4 ? 2.0 * (i + 1) : 0.0) << i;
  }
  {  // only the base is kept: the view was a temporary
    Tensor p = leaf34();
    Tensor x = p * 1.0;
    x.slice(0, 0, 1).squeeze(0).mul_(2.0);
    (x[0] * w).sum().backward();
    const std::vector<double> g = p.grad().to_vector<double>();
    for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], i < 4 ? 2.0 * (i + 1) : 0.0) << i;
  }
}

TEST(InplaceViews, ViewOfALeafWrittenUnderNoGradReadsTheLeaf) {
  // an optimizer-style update of a leaf while a view of it is held
  Tensor p = leaf34();
  Tensor v = p.t();
  {
    NoGradGuard g;
    p.add_(ones({3, 4}, kFloat64));
  }
  EXPECT_EQ(v.grad_fn_name(), "AsStridedBackward0");
  (v * 2.0).sum().backward();
  EXPECT_EQ(p.grad().to_vector<double>(), std::vector<double>(12, 2.0));
}

TEST(InplaceViews, ABufferThatNeededNoGradStartsNeedingIt) {
  Tensor a = full({3}, 2.0, kFloat64).requires_grad_();
  Tensor buf = zeros({2, 3}, kFloat64);
  Tensor other = buf[1];  // made before the write
  EXPECT_FALSE(other.requires_grad());
  buf[0].copy_(a);
  EXPECT_EQ(buf.grad_fn_name(), "CopySlices");
  EXPECT_FALSE(buf.is_leaf());
  EXPECT_TRUE(other.requires_grad());
  EXPECT_EQ(other.grad_fn_name(), "AsStridedBackward0");
  (buf * tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64)).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 2, 3}));
}

TEST(InplaceViews, RetainGraphRunsCopySlicesTwice) {
  Tensor p = leaf34();
  Tensor x = p.clone();
  x.select(1, 0).mul_(3.0);
  Tensor loss = x.sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  const std::vector<double> g = p.grad().to_vector<double>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], i % 4 == 0 ? 6.0 : 2.0) << i;
  EXPECT_THROW(loss.backward(), Error);  // the graph was freed by the second
}

TEST(InplaceViews, RebasedGraphsAreFreed) {
  Tensor p = leaf34();
  std::weak_ptr<Node> copy_slices, view_node;
  {
    Tensor x = p.clone();
    Tensor v = x.slice(1, 1, 3);
    v.add_(ones({3, 2}, kFloat64));
    copy_slices = x.grad_fn();
    view_node = v.grad_fn();
    EXPECT_FALSE(copy_slices.expired());
  }
  EXPECT_TRUE(copy_slices.expired());
  EXPECT_TRUE(view_node.expired());
}

// x.grad is the gradient of x's values after the write (torch 2 does the same; torch 1.13 gives
// the old values' gradient, 6 in row 0, when the write went through a view)
TEST(InplaceViews, RetainGradOnARebasedBase) {
  Tensor p = leaf34();
  Tensor x = p * 1.0;
  x.retain_grad();
  x[0].mul_(2.0);
  (x * 3.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), std::vector<double>(12, 3.0));
  const std::vector<double> g = p.grad().to_vector<double>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], i < 4 ? 6.0 : 3.0) << i;
  // the same without a view: torch 1.13 agrees
  Tensor y = p * 1.0;
  y.retain_grad();
  y.mul_(2.0);
  (y * 3.0).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), std::vector<double>(12, 3.0));
}

TEST(InplaceViews, OutputsLaidOverAnOpsOwnBufferAreNotViews) {
  // matmul with a 1-D operand and scaled_dot_product_attention return make_view()s of a buffer
  // they allocated: an in-place op on the output must rebase the output, not that buffer
  Tensor a = leaf34();
  Tensor b = full({4}, 0.5, kFloat64).requires_grad_();
  Tensor y = matmul(a, b);  // (3)
  y.mul_(2.0);
  EXPECT_EQ(y.grad_fn_name(), "MulBackward0");
  y.sum().backward();
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{24, 30, 36, 42}));
  Tensor q = full({1, 2, 3, 4}, 0.1, kFloat64).requires_grad_();
  Tensor o = scaled_dot_product_attention(q, q, q, 0.0, true);
  o.mul_(3.0);
  EXPECT_EQ(o.grad_fn_name(), "MulBackward0");
  o.sum().backward();
  ASSERT_TRUE(q.grad().defined());
  // all values equal: the attention weights are uniform and o = v, so d(sum 3 o)/dq = 0 and
  // the gradient is 3 per use of v, summed over the queries attending to each key
  EXPECT_NEAR(q.grad().to_vector<double>()[0], 3.0 * (1.0 + 1.0 / 2 + 1.0 / 3), 1e-9);
}

TEST(InplaceViews, AViewAnOpMadeUnderItsOwnNoGradGuardIsAnOrdinaryViewOnceRecorded) {
  // extension style: the forward runs under NoGradGuard, then record() attaches the node
  Tensor p = leaf34();
  Tensor x = p.clone();
  Tensor top;
  {
    NoGradGuard g;
    top = x.slice(0, 0, 2);
  }
  top = record("TopRowsBackward", top, {x}, [](const Tensor& dout, Grads& grads) {
    Tensor dx = zeros({3, 4}, kFloat64);
    dx.slice(0, 0, 2).copy_(dout);
    grads.add(0, dx);
  });
  top.mul_(2.0);  // not refused: rebases x
  EXPECT_EQ(x.grad_fn_name(), "CopySlices");
  (x * 1.0).sum().backward();
  const std::vector<double> g = p.grad().to_vector<double>();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(g[i], i < 8 ? 2.0 : 1.0) << i;
}

// ---------------------------------------------------------------- errors
TEST(InplaceViews, ALeafOrAViewOfOneIsRefusedBeforeWriting) {
  Tensor p = leaf34();
  const std::vector<double> before = p.to_vector<double>();
  std::string m = error_of([&] { p.mul_(2.0); });
  EXPECT_MESSAGE_HAS(m, "mul_");
  EXPECT_MESSAGE_HAS(m, "leaf tensor that requires grad");
  m = error_of([&] { p[0].masked_fill_(tensor({true, true, true, true}), 0.0); });
  EXPECT_MESSAGE_HAS(m, "masked_fill_");
  EXPECT_MESSAGE_HAS(m, "a view (shape [4]) of a leaf tensor that requires grad (shape [3, 4])");
  for (std::string op : {"add_", "copy_", "fill_", "zero_", "clamp_", "uniform_"}) {
    m = error_of([&] {
      Tensor v = p.t().slice(0, 1, 3);
      if (op == "add_") v.add_(ones({2, 3}, kFloat64));
      if (op == "copy_") v.copy_(ones({2, 3}, kFloat64));
      if (op == "fill_") v.fill_(1.0);
      if (op == "zero_") v.zero_();
      if (op == "clamp_") v.clamp_(0.0, 1.0);
      if (op == "uniform_") v.uniform_();
    });
    EXPECT_MESSAGE_HAS(m, op);
    EXPECT_MESSAGE_HAS(m, "of a leaf tensor that requires grad");
  }
  EXPECT_EQ(p.to_vector<double>(), before);  // nothing was written
  {
    NoGradGuard g;  // allowed, like torch.no_grad()
    p[0].mul_(2.0);
    p.add_(ones({3, 4}, kFloat64));
  }
  EXPECT_EQ(p.to_vector<double>()[1], 3.0);
  EXPECT_TRUE(p.is_leaf());
}

TEST(InplaceViews, AnExpandedViewIsRefused) {
  Tensor p = leaf34();
  Tensor x = p.clone();
  Tensor e = x.slice(0, 0, 1).expand({3, 4});
  for (std::string op : {"mul_", "add_", "copy_", "clamp_", "masked_fill_", "uniform_", "normal_",
                         "bernoulli_", "fill_", "zero_"}) {
    std::string m = error_of([&] {
      if (op == "mul_") e.mul_(2.0);
      if (op == "add_") e.add_(ones({3, 4}, kFloat64));
      if (op == "copy_") e.copy_(ones({3, 4}, kFloat64));
      if (op == "clamp_") e.clamp_(0.0);
      if (op == "masked_fill_") e.masked_fill_(tensor({true, false, false, false}), 0.0);
      if (op == "uniform_") e.uniform_();
      if (op == "normal_") e.normal_();
      if (op == "bernoulli_") e.bernoulli_(0.5);
      if (op == "fill_") e.fill_(1.0);  // recorded: its backward would write one place twice
      if (op == "zero_") e.zero_();
    });
    EXPECT_MESSAGE_HAS(m, op);
    EXPECT_MESSAGE_HAS(m, "[3, 4]");
    EXPECT_MESSAGE_HAS(m, ".clone()");
  }
  EXPECT_EQ(x.grad_fn_name(), "CloneBackward0");  // nothing was recorded
  EXPECT_EQ(x.to_vector<double>(), p.to_vector<double>());
  // without autograd: ops writing one value are fine (as in torch), the others are not
  Tensor plain = zeros({1, 4}, kFloat64).expand({3, 4});
  plain.fill_(2.0);
  plain.zero_();
  EXPECT_THROW(plain.mul_(2.0), Error);
  {
    NoGradGuard g;
    EXPECT_THROW(e.add_(ones({3, 4}, kFloat64)), Error);
    e.fill_(5.0);
  }
  EXPECT_EQ(x.to_vector<double>()[3], 5.0);
}

TEST(InplaceViews, AViewMadeUnderNoGradIsRefusedWithGradModeOn) {
  Tensor p = leaf34();
  Tensor x = p.clone();
  Tensor v;
  {
    NoGradGuard g;
    v = x[0];
    v.mul_(2.0);  // both inside: allowed, not recorded
  }
  std::string m = error_of([&] { v.mul_(2.0); });
  EXPECT_MESSAGE_HAS(m, "mul_");
  EXPECT_MESSAGE_HAS(m, "NoGradGuard");
  EXPECT_EQ(x.to_vector<double>()[1], 2.0);  // 1 * 2, once
  EXPECT_FALSE(v.requires_grad());           // a constant, not a view of x's history
}

// An extension's in-place op that records nothing guards itself with check_inplace().
void halve_unrecorded_(const Tensor& t) {
  check_inplace("halve_unrecorded_", t);
  double* d = t.contiguous().data_ptr<double>();  // the tests pass contiguous float64 tensors
  for (int64_t i = 0; i < t.numel(); ++i) d[i] *= 0.5;
  ++t.impl()->storage->version;
}

TEST(InplaceViews, AnUnrecordedInPlaceOpIsRefusedInTheGraph) {
  Tensor p = leaf34();
  Tensor x = p.clone();
  std::string m = error_of([&] { halve_unrecorded_(x); });
  EXPECT_MESSAGE_HAS(m, "halve_unrecorded_");
  EXPECT_MESSAGE_HAS(m, "CloneBackward0");
  EXPECT_THROW(halve_unrecorded_(x[1]), Error);  // a view of it requires grad too
  EXPECT_THROW(halve_unrecorded_(p), Error);
  Tensor plain = p.detach().clone();
  halve_unrecorded_(plain);  // outside the graph: fine
  EXPECT_EQ(plain.to_vector<double>()[2], 1.0);
  {
    NoGradGuard g;
    halve_unrecorded_(x);
  }
  EXPECT_EQ(x.to_vector<double>()[2], 1.0);
}

TEST(InplaceViews, ATensorSavedForBackwardAndModifiedAfterwardsStillThrows) {
  auto expect_version_error = [](const Tensor& loss) {
    std::string m = error_of([&] { loss.backward(); });
    EXPECT_MESSAGE_HAS(m, "modified by an in-place operation");
  };
  Tensor p = leaf34();
  {  // the view was saved (by mul), then written through
    Tensor x = p.clone();
    Tensor s = x.slice(0, 1, 3);
    Tensor z = s * s;
    s.mul_(2.0);
    expect_version_error(z.sum());
  }
  {  // the base was saved, then a view of it was written
    Tensor x = p.clone();
    Tensor z = x * x;
    x[0].add_(ones({4}, kFloat64));
    expect_version_error(z.sum());
  }
  {  // a view was saved, then its base was written
    Tensor x = p.clone();
    Tensor v = x.select(1, 2);
    Tensor z = v * v;
    x.mul_(3.0);
    expect_version_error(z.sum());
  }
  {  // an output saved by its op (tanh keeps y) then written through a view
    Tensor y = p.tanh();
    y.t()[1].zero_();
    expect_version_error(y.sum());
  }
  {  // but a saved tensor of another storage is untouched: fine
    Tensor x = p.clone();
    Tensor z = p * x.slice(0, 0, 3);  // saves p and the view
    Tensor y = x.clone();
    y[0].mul_(2.0);
    (z.sum() + y.sum()).backward();
    EXPECT_TRUE(p.grad().defined());
  }
}

}  // namespace
}  // namespace xgrad::testing
