// tests/core/test_cross_entropy_reuse.cpp: cross_entropy's backward writes the logits' gradient
// over the saved logits when nothing can read them again (Grads::reuse_saved): the caller kept
// no handle on them and the pass frees the graph. The gradients are the same bits either way;
// the logits a caller kept, or a retained graph still needs, are never overwritten; and the
// step's peak holds the logits once, not the logits and their gradient.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_close;

Tensor leaf(const Shape& shape, uint64_t seed, DType dtype = kFloat32) {
  Generator g(seed);
  return (randn(shape, &g) * 3.0).to(dtype).requires_grad_();
}

Tensor targets(int64_t N, int64_t C, uint64_t seed) {
  Generator g(seed);
  Tensor t = randint(0, C, {N}, &g);
  std::vector<int64_t> v = t.to_vector<int64_t>();
  v[1] = -100;  // an ignored row
  return from_vector(v, {N});
}

// logits made from the leaf by an op (so they are a fresh non-leaf the caller may drop), the
// loss, and the leaf's gradient; `keep` holds the logits until after backward.
Tensor grad_of_leaf(Tensor x, const Tensor& t, bool keep, const CrossEntropyOptions& o = {},
                    Tensor* kept = nullptr) {
  x.set_grad(Tensor());
  Tensor logits = x * 1.0;
  const Tensor loss = cross_entropy_last_dim(keep ? logits : std::move(logits), t, o);
  if (kept) *kept = logits;
  loss.backward(o.reduction == "none" ? ones(loss.shape(), loss.dtype()) : Tensor());
  return x.grad().clone();
}

TEST(CrossEntropyReuse, TheGradientHasTheSameBitsWhetherOrNotTheLogitsAreKept) {
  const Tensor t = targets(6, 300, 2);
  CrossEntropyOptions none, smooth;
  none.reduction = "none";
  smooth.label_smoothing = 0.1;
  for (DType dtype : {kFloat32, kFloat64, kBFloat16})
    for (const CrossEntropyOptions& o : {CrossEntropyOptions{}, none, smooth}) {
      Tensor x = leaf({2, 3, 300}, 1, dtype);
      const std::string what = std::string(dtype_name(dtype)) + ", " + o.reduction;
      expect_close(grad_of_leaf(x, t.reshape({2, 3}), false, o).to(kFloat64),
                   grad_of_leaf(x, t.reshape({2, 3}), true, o).to(kFloat64), 0, 0, what);
    }
}

TEST(CrossEntropyReuse, LogitsTheCallerKeptAreNotOverwritten) {
  Tensor x = leaf({5, 40}, 3);
  const Tensor t = targets(5, 40, 4);
  Tensor kept;
  (void)grad_of_leaf(x, t, true, {}, &kept);
  expect_close(kept, x.detach() * 1.0, 0, 0, "kept logits");
  // a view kept alive is a handle on the buffer too
  x.set_grad(Tensor());
  Tensor logits = x * 1.0;
  const Tensor row = logits[0];
  const Tensor before = row.clone();
  const Tensor loss = cross_entropy_last_dim(std::move(logits), t);
  loss.backward();
  expect_close(row, before, 0, 0, "a view of the logits");
}

TEST(CrossEntropyReuse, ARetainedGraphKeepsItsLogits) {
  Tensor x = leaf({4, 30}, 5);
  const Tensor t = targets(4, 30, 6);
  const Tensor loss = cross_entropy_last_dim(x * 1.0, t);
  loss.backward(Tensor(), /*retain_graph=*/true);
  const Tensor first = x.grad().clone();
  x.set_grad(Tensor());
  loss.backward();  // reads the saved logits again
  expect_close(x.grad(), first, 0, 0, "second backward");
}

// With create_graph the backward is recorded ops that read the saved logits, and the gradient
// is differentiated again: the same bits whether the caller kept the logits or not.
TEST(CrossEntropyReuse, CreateGraphDoesNotReuse) {
  Tensor x = leaf({4, 30}, 7);
  const Tensor t = targets(4, 30, 8);
  auto grads = [&](bool keep) {
    Tensor logits = x * 1.0;
    const Tensor loss = cross_entropy_last_dim(keep ? logits : std::move(logits), t);
    const Tensor gx = autograd::grad({loss}, {x}, {}, {.create_graph = true})[0];
    return std::pair{gx, autograd::grad({(gx * gx).sum()}, {x})[0]};
  };
  const auto [gx, ggx] = grads(false);
  const auto [gx_kept, ggx_kept] = grads(true);
  expect_close(gx, gx_kept, 0, 0, "grad");
  expect_close(ggx, ggx_kept, 0, 0, "grad of grad");
  expect_close(gx.detach(), grad_of_leaf(x, t, true), 1e-5, 0, "grad against the kernel's");
}

// The peak of a loss step on logits the caller dropped is the logits alone: their gradient
// takes their buffer. (The leaf is one row, expanded, so its own gradient is small.)
TEST(CrossEntropyReuse, TheStepHoldsTheLogitsOnce) {
  const int64_t N = 64, C = 20000;
  Tensor x = leaf({1, C}, 9);
  const Tensor t = targets(N, C, 10);
  const int64_t bytes = N * C * 4;
  for (bool keep : {false, true}) {
    x.set_grad(Tensor());
    reset_peak_memory_stats();
    const int64_t before = memory_stats().current_bytes;
    {
      Tensor logits = x.expand({N, C}).contiguous();
      const Tensor loss = cross_entropy_last_dim(keep ? logits : std::move(logits), t);
      loss.backward();
    }
    const int64_t extra = memory_stats().peak_bytes - before;
    if (keep) EXPECT_GE(extra, 2 * bytes);  // the logits and their gradient
    else EXPECT_LT(extra, bytes + bytes / 2) << "a gradient buffer of the logits' size would add " << bytes;
  }
}

}  // namespace
}  // namespace xgrad
