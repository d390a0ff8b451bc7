// tests/core/test_cross_entropy_bf16.cpp: cross_entropy and cross_entropy_last_dim on bfloat16
// logits, which compute in float32 by widening a block of rows at a time. Against their
// composed twin, the float32 op on logits.to(kFloat32) (its loss cast back to bfloat16 outside
// autocast, kept float32 inside), bit for bit: the loss, and the gradient that reaches the
// bfloat16 logits through the cast. Row blocks of many rows, of one row (more classes than a
// block holds), thread splits that cut blocks, every reduction, label smoothing, ignored rows,
// the class-dim-1 layout, create_graph; and the memory: no float32 copy of the logits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "thread_count.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_close;

struct Case {
  std::string name;
  Shape logits;  // classes last: (..., C)
  CrossEntropyOptions options;
};

// targets in [0, C), every fifth ignored
Tensor targets_for(const Shape& tshape, int64_t C, uint64_t seed) {
  Generator g(seed);
  Tensor t = randint(0, C, tshape, &g);
  std::vector<int64_t> v = t.to_vector<int64_t>();
  for (std::size_t i = 0; i < v.size(); i += 5) v[i] = -100;
  return from_vector(v, tshape);
}

Tensor bf16_logits(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return (randn(shape, &g) * 4.0).to(kBFloat16);
}

// The loss and the logits' gradient of one run, given a float32 or bfloat16 upstream gradient.
struct LossAndGrad {
  Tensor loss, grad;
};

template <class Loss>
LossAndGrad run(const Tensor& logits, const Tensor& upstream_f32, Loss&& loss_of) {
  const Tensor x = logits.detach().requires_grad_();
  LossAndGrad r;
  r.loss = loss_of(x);
  r.loss.backward(upstream_f32.to(r.loss.dtype()));
  r.grad = x.grad();
  return r;
}

void expect_same(const LossAndGrad& fused, const LossAndGrad& twin, const std::string& what) {
  ASSERT_EQ(fused.loss.dtype(), twin.loss.dtype()) << what;
  ASSERT_EQ(fused.grad.dtype(), kBFloat16) << what;
  expect_close(fused.loss, twin.loss, 0, 0, what + " loss");
  expect_close(fused.grad.to(kFloat32), twin.grad.to(kFloat32), 0, 0, what + " grad");
}

std::vector<Case> cases() {
  CrossEntropyOptions sum, none, smooth, smooth_none;
  sum.reduction = "sum";
  none.reduction = "none";
  smooth.label_smoothing = 0.1;
  smooth_none.label_smoothing = 0.25;
  smooth_none.reduction = "none";
  return {
      {"few classes, many rows a block", {37, 11}, {}},
      {"blocks cut by the thread split", {45, 3001}, {}},  // 21 rows a block
      {"more classes than a block", {5, 70001}, sum},      // one row a block
      {"none", {2, 9, 700}, none},
      {"label smoothing", {31, 257}, smooth},
      {"label smoothing, none", {6, 4000}, smooth_none},
  };
}

// Outside autocast the loss is bfloat16, as torch's; inside it is float32 (autocast's list).
TEST(CrossEntropyBFloat16, HasTheBitsOfTheFloat32OpOnAWidenedCopy) {
  uint64_t seed = 100;
  for (const Case& c : cases()) {
    const int64_t C = c.logits.back();
    const Shape tshape(c.logits.begin(), c.logits.end() - 1);
    const Tensor logits = bf16_logits(c.logits, ++seed), t = targets_for(tshape, C, ++seed);
    Generator g(++seed);
    const Tensor upstream =
        c.options.reduction == "none" ? randn(tshape, &g) : tensor<float>({1.5f}).reshape({});
    for (bool in_autocast : {false, true}) {
      const std::string what = c.name + (in_autocast ? ", autocast" : "");
      const LossAndGrad twin = run(logits, upstream, [&](const Tensor& x) {
        Tensor loss = cross_entropy_last_dim(x.to(kFloat32), t, c.options);
        return in_autocast ? loss : loss.to(kBFloat16);
      });
      for (int threads : {1, 2, 3}) {
        testing::ThreadCount tc(threads);
        const LossAndGrad fused = run(logits, upstream, [&](const Tensor& x) {
          autocast guard(kBFloat16, in_autocast);
          return cross_entropy_last_dim(x, t, c.options);
        });
        expect_same(fused, twin, what + ", " + std::to_string(threads) + " threads");
      }
    }
  }
}

// cross_entropy's classes in dim 1: (N, C) as is, (N, C, d) through its permuted copy.
TEST(CrossEntropyBFloat16, ClassesInDimOneAsTheFloat32Op) {
  const Tensor logits2 = bf16_logits({9, 300}, 7), t2 = targets_for({9}, 300, 8);
  const Tensor logits3 = bf16_logits({4, 300, 6}, 9), t3 = targets_for({4, 6}, 300, 10);
  const Tensor one = tensor<float>({1.0f}).reshape({});
  for (bool in_autocast : {false, true}) {
    for (const auto& logits_and_targets : {std::pair{logits2, t2}, std::pair{logits3, t3}}) {
      const Tensor &x = logits_and_targets.first, &t = logits_and_targets.second;
      const LossAndGrad twin = run(x, one, [&](const Tensor& v) {
        Tensor loss = cross_entropy(v.to(kFloat32), t);
        return in_autocast ? loss : loss.to(kBFloat16);
      });
      const LossAndGrad fused = run(x, one, [&](const Tensor& v) {
        autocast guard(kBFloat16, in_autocast);
        return cross_entropy(v, t);
      });
      expect_same(fused, twin,
                  "dim 1, " + std::to_string(x.dim()) + "-d" + (in_autocast ? ", autocast" : ""));
    }
  }
}

// backward(create_graph): the recorded float32 formula on the widened logits, rounded once,
// so the gradient and its own gradient are those of the twin.
TEST(CrossEntropyBFloat16, CreateGraphAsTheFloat32Op) {
  const Tensor logits = bf16_logits({6, 40}, 11), t = targets_for({6}, 40, 12);
  auto grads = [&](bool twin) {
    const Tensor x = logits.detach().requires_grad_();
    autocast guard(kBFloat16);
    const Tensor loss = twin ? cross_entropy_last_dim(x.to(kFloat32), t) : cross_entropy_last_dim(x, t);
    const Tensor gx = autograd::grad({loss}, {x}, {}, {.create_graph = true})[0];
    const Tensor ggx = autograd::grad({(gx.to(kFloat32) * gx.to(kFloat32)).sum()}, {x})[0];
    return std::pair{gx, ggx};
  };
  const auto [gx, ggx] = grads(false);
  const auto [gx_twin, ggx_twin] = grads(true);
  EXPECT_TRUE(gx.requires_grad());
  expect_close(gx.to(kFloat32), gx_twin.to(kFloat32), 0, 0, "grad");
  expect_close(ggx.to(kFloat32), ggx_twin.to(kFloat32), 0, 0, "grad of grad");
}

// Under autocast a step's loss holds the bfloat16 logits and writes a bfloat16 gradient; a
// float32 copy of the logits (or of their gradient) alone would be twice the logits' bytes.
TEST(CrossEntropyBFloat16, MakesNoFloat32CopyOfTheLogits) {
  const int64_t N = 64, C = 50000;
  const Tensor x = bf16_logits({N, C}, 13).requires_grad_(), t = targets_for({N}, C, 14);
  const int64_t logits_bytes = N * C * 2;
  reset_peak_memory_stats();
  const int64_t before = memory_stats().current_bytes;
  {
    autocast guard(kBFloat16);
    cross_entropy_last_dim(x, t).backward();
  }
  const int64_t extra = memory_stats().peak_bytes - before;
  EXPECT_GE(extra, logits_bytes);  // the gradient
  EXPECT_LT(extra, logits_bytes + logits_bytes / 2) << "a float32 copy would add " << 2 * logits_bytes;
}

}  // namespace
}  // namespace xgrad
