// tests/core/test_autograd.cpp: the tape. Gradients of small graphs (diamonds, reuse, views),
// accumulation across backward calls, retain_graph and the second-backward error, NoGradGuard,
// detach, retain_grad, in-place ops (recorded; through views: test_inplace_views.cpp) and the
// version counter, and that graphs are freed: weak pointers to dropped nodes expire and 1,000
// forwards in a loop keep memory flat.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <fstream>

#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

Tensor leaf(std::initializer_list<double> v) { return tensor(v, kFloat64).requires_grad_(); }

std::vector<double> grad_of(const Tensor& t) { return t.grad().to_vector<double>(); }

TEST(Autograd, ChainRuleThroughADiamond) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor a = x * 2.0;  // shared by two consumers
  Tensor b = x * x;
  Tensor c = (a * b).sum();  // 2x^3 -> 6x^2
  c.backward();
  auto g = grad_of(x);
  EXPECT_DOUBLE_EQ(g[0], 6.0);
  EXPECT_DOUBLE_EQ(g[1], 24.0);
  EXPECT_DOUBLE_EQ(g[2], 54.0);
  EXPECT_EQ(c.grad_fn_name(), "SumBackward0");
}

TEST(Autograd, GradientsFlowThroughViews) {
  Tensor x = arange(0, 6, 1, kFloat64).requires_grad_();
  Tensor y = x.view({2, 3}).transpose(0, 1).slice(0, 1, 3);  // (2, 2) view of elements 1,4,2,5
  (y * y).sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{0, 2, 4, 0, 8, 10}));
  EXPECT_EQ(y.grad_fn_name(), "SliceBackward0");
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1.0, -1.0});
  (x * 3.0).sum().backward();
  (x * 3.0).sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{6.0, 6.0}));
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2]"), std::string::npos) << e.what();
  }
  y.backward(tensor({1.0, 10.0}, kFloat64));
  EXPECT_EQ(grad_of(x), (std::vector<double>{2.0, 20.0}));
  EXPECT_THROW(y.backward(ones({3}, kFloat64)), Error);  // wrong gradient shape
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({2.0});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: the first kept the graph
  EXPECT_EQ(grad_of(x), (std::vector<double>{8.0}));
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Autograd, BackwardOnATensorWithoutGradThrows) { EXPECT_THROW(ones({1}).backward(), Error); }

TEST(Autograd, NoGradGuardAndDetachStopRecording) {
  Tensor x = leaf({1.0, 2.0});
  {
    NoGradGuard guard;
    Tensor y = x * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(GradMode::is_enabled());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  Tensor z = x.detach() * 2.0;
  EXPECT_FALSE(z.requires_grad());
  Tensor w = x * 2.0;
  EXPECT_TRUE(w.requires_grad());
  EXPECT_FALSE(w.is_leaf());
  EXPECT_THROW(w.requires_grad_(false), Error);
  EXPECT_THROW(tensor({1, 2}).requires_grad_(), Error);  // int64 cannot require grad
}

TEST(Autograd, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = x * 3.0;
  h.retain_grad();
  (h * h).sum().backward();
  EXPECT_EQ(grad_of(h), (std::vector<double>{6.0, 12.0}));
  EXPECT_FALSE((x * 2.0).grad().defined());
}

TEST(Autograd, LeafGradIsNotAliasedWithOtherBuffers) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = leaf({3.0, 4.0});
  (x + y).sum().backward();  // both receive the same upstream gradient
  {
    NoGradGuard g;
    x.grad().mul_(10.0);
  }
  EXPECT_EQ(grad_of(y), (std::vector<double>{1.0, 1.0}));
}

// A residual add hands its dout to both branches; the branch's fresh gradient then takes the
// sum in place (autograd.cpp's accumulate). The shared gradient, here the caller's own, must
// stay untouched, and the sum must be right whichever of the two arrives first.
TEST(Autograd, AFreshGradientTakesTheSumLeavingTheSharedOneAlone) {
  Tensor x = leaf({1.0, -2.0, 0.5});
  Tensor h = x * 1.0;
  Tensor y = h + h * 2.0;  // dy/dh = 1 (shared dout) + 2 (fresh)
  Tensor g = tensor({1.0, 10.0, 100.0}, kFloat64);
  y.backward(g);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1.0, 10.0, 100.0}));
  EXPECT_EQ(grad_of(x), (std::vector<double>{3.0, 30.0, 300.0}));
  Tensor x2 = leaf({1.0, -2.0, 0.5});
  Tensor h2 = x2 * 1.0;
  Tensor y2 = h2 * 2.0 + h2;  // the other order of arrival
  y2.backward(g);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1.0, 10.0, 100.0}));
  EXPECT_EQ(grad_of(x2), (std::vector<double>{3.0, 30.0, 300.0}));
}

TEST(Autograd, InPlaceOnASavedTensorMakesBackwardThrow) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor a = x * 1.0;
  Tensor b = a * a;  // saves a
  a.masked_fill_(tensor({true, false, false}), 0.0);
  try {
    b.sum().backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an in-place operation"), std::string::npos) << e.what();
  }
}

TEST(Autograd, InPlaceOnANonLeafIsRecordedOnALeafRefused) {
  Tensor x = leaf({1.0, 2.0});
  Tensor a = x * 2.0;
  a.mul_(2.0);
  EXPECT_EQ(a.grad_fn_name(), "MulBackward0");
  a.sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{4.0, 4.0}));
  EXPECT_THROW(x.add_(ones({2}, kFloat64)), Error);
}

// In-place ops through views of graph tensors (torch's CopySlices): the cases, their fixtures
// and errors are in test_inplace_views.cpp; these are the two directions in brief.
TEST(Autograd, InPlaceThroughAViewRebasesTheBase) {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  Tensor y = x * 1.0;
  Tensor v = y.view({2, 2}).t();
  v.masked_fill_(tensor({{true, false}, {false, false}}), 0.0);  // y[0]
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0.0, 2.0, 3.0, 4.0}));
  EXPECT_EQ(y.grad_fn_name(), "CopySlices");
  (y * tensor({10.0, 20.0, 30.0, 40.0}, kFloat64)).sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{0.0, 20.0, 30.0, 40.0}));
}

TEST(Autograd, AViewHeldWhileItsBaseIsWrittenReadsTheNewHistory) {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  Tensor y = x * 1.0;
  Tensor v = y.slice(0, 0, 2);
  y.masked_fill_(tensor({true, false, false, false}), 0.0);
  EXPECT_EQ(v.to_vector<double>(), (std::vector<double>{0.0, 2.0}));
  (v * v).sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{0.0, 4.0, 0.0, 0.0}));
}

TEST(Autograd, InPlaceIsFineOnceTheViewsAreGoneOrOutsideTheGraph) {
  Tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  Tensor y = x * 1.0;
  { Tensor v = y.slice(0, 0, 2); }
  y.masked_fill_(tensor({true, false, false, false}), 0.0);
  (y * 2.0).sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{0.0, 2.0, 2.0, 2.0}));
  Tensor plain = zeros({2, 2});
  plain.t().masked_fill_(tensor({{true, false}, {false, false}}), 5.0);  // no grad: allowed
  EXPECT_EQ(plain.to_vector<float>()[0], 5.0f);
  EXPECT_FALSE(plain.requires_grad());
}

TEST(Autograd, MaskedFillInPlaceAfterMatmulIsLegal) {
  // the seeds: attn_scores = queries @ keys.T; attn_scores.masked_fill_(mask, -inf)
  Tensor q = arange(0, 6, 1, kFloat64).reshape({3, 2}).requires_grad_();
  Tensor k = (arange(0, 6, 1, kFloat64).reshape({3, 2}) * 0.1).requires_grad_();
  Tensor scores = matmul(q, k.t());
  Tensor mask = triu(ones({3, 3}), 1).to(kBool);
  scores.masked_fill_(mask, -INFINITY);
  EXPECT_EQ(scores.grad_fn_name(), "MaskedFillBackward0");
  Tensor w = softmax(scores, -1);
  (w * arange(0, 9, 1, kFloat64).reshape({3, 3})).sum().backward();
  ASSERT_TRUE(q.grad().defined());
  auto gq = grad_of(q);
  EXPECT_DOUBLE_EQ(gq[0], 0.0);  // row 0 attends only to itself: softmax is constant 1
  EXPECT_DOUBLE_EQ(gq[1], 0.0);
  EXPECT_NE(gq[2], 0.0);
}

TEST(Autograd, DroppedGraphsAreFreed) {
  Tensor x = randn({4, 4}).requires_grad_();
  std::weak_ptr<Node> node;
  {
    Tensor y = (x * 2.0).exp().sum();
    node = y.grad_fn();
    EXPECT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());
}

long resident_kb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(Autograd, ThousandForwardsKeepMemoryFlat) {
  Tensor w = randn({128, 128}).requires_grad_();
  Tensor x = randn({64, 128});
  auto forward = [&] { return softmax(matmul(x, w).tanh(), -1).sum(); };
  for (int i = 0; i < 50; ++i) forward();  // warm up the allocator
  const int64_t live_before = memory_stats().current_bytes;
  const long before = resident_kb();
  for (int i = 0; i < 1000; ++i) {
    Tensor loss = forward();  // dropped without backward
  }
  // every storage the forwards made is gone again
  EXPECT_EQ(memory_stats().current_bytes, live_before);
#ifndef XGRAD_ADDRESS_SANITIZER  // ASan's quarantine keeps freed memory resident on purpose
  const long after = resident_kb();
  // each forward allocates ~200 KB; a leak would grow by ~200 MB
  EXPECT_LT(after - before, 20 * 1024)
      << "resident memory grew from " << before << " KB to " << after << " KB";
#else
  (void)before;
#endif
}

TEST(Autograd, LongChainsDoNotOverflowTheStack) {
  Tensor x = leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 3000; ++i) y = y + 1.0;
  y.sum().backward();
  EXPECT_EQ(grad_of(x), (std::vector<double>{1.0}));
}

}  // namespace
}  // namespace xgrad

namespace xgrad {
namespace {
// to(dtype) between float types is differentiable (ToCopyBackward0): the gradient comes back
// converted to the input's dtype. Exact values: a float32 round trip is too coarse for finite
// differences, so this is checked analytically rather than in the gradcheck table.
TEST(Autograd, ToDtypeCarriesTheGradientBackConverted) {
  Tensor x = tensor({1.5, -2.0, 0.25}).requires_grad_();  // float32 leaf
  Tensor w = tensor({0.1, 3.0, -7.0}, kFloat64);
  Tensor y = x.to(kFloat64);
  EXPECT_EQ(y.grad_fn_name(), "ToCopyBackward0");
  (y * w).sum().backward();
  ASSERT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0.1f, 3.0f, -7.0f}));
  EXPECT_FALSE(tensor({1, 2}).to(kFloat32).requires_grad());  // int64 -> float: a new leaf
  Tensor same = x.to(kFloat32);
  EXPECT_EQ(same.unsafe_impl(), x.unsafe_impl());  // no-op conversion returns the tensor itself
}
}  // namespace
}  // namespace xgrad
