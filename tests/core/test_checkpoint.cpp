// tests/core/test_checkpoint.cpp: utils::checkpoint (activation checkpointing) against the same
// computation run without it: the same output and gradient bits (float32 and float64) for MLP
// blocks with dropout whose weights fn uses without receiving them, with an input also used
// outside the blocks, several inputs and outputs, hooks, autograd::grad, retain_graph and a
// Generator of one's own; that the forward keeps fn's activations no longer (the bytes held
// between forward and backward) and the backward's rerun no more than fn's own backward needs;
// and the errors. The GPT's blocks are tested in
// tests/nn/test_gpt_checkpointing.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using utils::checkpoint;

// The bits of every element (so -0.0 and 0.0 differ, and a NaN equals itself).
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to(kFloat64).to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

// A residual MLP block with dropout: x + W2 dropout(gelu(W1 x + b1)) + b2.
struct Block {
  Tensor W1, b1, W2, b2;
  Block(int64_t d, DType dtype)
      : W1((randn({4 * d, d}, nullptr, dtype) * 0.3).requires_grad_()),
        b1((randn({4 * d}, nullptr, dtype) * 0.1).requires_grad_()),
        W2((randn({d, 4 * d}, nullptr, dtype) * 0.3).requires_grad_()),
        b2((randn({d}, nullptr, dtype) * 0.1).requires_grad_()) {}
  Tensor operator()(const Tensor& x) const {
    return x + linear(dropout(gelu(linear(x, W1, b1), "tanh"), 0.3), W2, b2);
  }
  std::vector<Tensor> params() const { return {W1, b1, W2, b2}; }
};

// Two blocks on h = 2 x0, h also used after them; each block optionally checkpointed.
struct TwoBlocks {
  DType dtype;
  bool under_autocast = false;  // the forward under autocast(kBFloat16), backward outside it
  Tensor x0, r1, r2;
  Block a, b;
  explicit TwoBlocks(DType dt)
      : dtype(dt),
        x0(randn({3, 5, 8}, nullptr, dt).requires_grad_()),
        r1(randn({3, 5, 8}, nullptr, dt)),
        r2(randn({3, 5, 8}, nullptr, dt)),
        a(8, dt),
        b(8, dt) {}
  std::vector<Tensor> leaves() const {
    std::vector<Tensor> l{x0};
    for (const Block* blk : {&a, &b})
      for (const Tensor& p : blk->params()) l.push_back(p);
    return l;
  }
  void zero_grad() const {
    for (Tensor t : leaves()) t.impl()->grad.reset();
  }
  // The loss, with the blocks run through checkpoint or not, the dropout masks drawn from seed.
  Tensor loss(bool checkpointed, uint64_t seed) const {
    manual_seed(seed);
    autocast guard(kBFloat16, under_autocast);
    Tensor h = x0 * 2.0;
    auto run = [&](const Block& blk, const Tensor& in) {
      return checkpointed ? checkpoint([&blk](const Tensor& t) { return blk(t); }, in) : blk(in);
    };
    Tensor y = run(b, run(a, h));
    return (y * r1).sum() + (h * r2).sum();
  }
};

// Runs backward on both versions; expects equal loss, gradient and RNG bits.
void expect_same_as_without(const TwoBlocks& m) {
  Tensor plain = m.loss(false, 7);
  plain.backward();
  const std::vector<uint8_t> rng_plain = get_rng_state();
  std::vector<std::vector<uint64_t>> want;
  for (const Tensor& l : m.leaves()) want.push_back(bits(l.grad()));
  m.zero_grad();

  Tensor ck = m.loss(true, 7);
  EXPECT_EQ(ck.grad_fn_name(), plain.grad_fn_name());
  ck.backward();
  EXPECT_EQ(bits(ck), bits(plain));
  const std::vector<Tensor> leaves = m.leaves();
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_EQ(bits(leaves[i].grad()), want[i]) << "leaf " << i;
  // the rerun in backward restored the generator to where it was
  EXPECT_EQ(get_rng_state(), rng_plain);
}

TEST(Checkpoint, MlpBlocksWithDropoutGiveTheSameGradientBitsFloat32) {
  manual_seed(1);
  expect_same_as_without(TwoBlocks(kFloat32));
}

TEST(Checkpoint, MlpBlocksWithDropoutGiveTheSameGradientBitsFloat64) {
  manual_seed(2);
  expect_same_as_without(TwoBlocks(kFloat64));
}

// The rerun in backward runs under the autocast state of the forward (torch's checkpoint
// restores it too): the same casts, the same bfloat16 products, the same bits.
TEST(Checkpoint, TheRerunRunsUnderTheForwardsAutocast) {
  manual_seed(4);
  TwoBlocks m(kFloat32);
  m.under_autocast = true;
  {
    autocast guard(kBFloat16);
    EXPECT_EQ(m.a(m.x0).dtype(), kFloat32);  // x + bf16 linear output: promoted
    EXPECT_EQ(linear(m.x0, m.a.W1, m.a.b1).dtype(), kBFloat16);
  }
  expect_same_as_without(m);
  for (const Tensor& l : m.leaves()) EXPECT_EQ(l.grad().dtype(), kFloat32);
}

TEST(Checkpoint, TheRerunDrawsTheForwardsMasks) {
  // without the random state restored, the rerun draws other masks: the gradients differ
  manual_seed(3);
  TwoBlocks m(kFloat32);
  m.loss(false, 7).backward();
  const std::vector<uint64_t> want = bits(m.a.W1.grad());
  m.zero_grad();
  manual_seed(7);
  Tensor h = m.x0 * 2.0;
  Tensor y = checkpoint([&](const Tensor& t) { return m.a(t); }, h, {.preserve_rng_state = false});
  y = m.b(y);
  ((y * m.r1).sum() + (h * m.r2).sum()).backward();
  EXPECT_NE(bits(m.a.W1.grad()), want);
}

TEST(Checkpoint, GivesTheSameAsWithoutThroughAutogradGradAndRetainGraph) {
  manual_seed(4);
  TwoBlocks m(kFloat32);
  Tensor plain = m.loss(false, 11);
  std::vector<Tensor> want = autograd::grad({plain}, {m.a.W2, m.x0}, {}, {.retain_graph = true});
  plain.backward(Tensor(), /*retain_graph=*/true);
  plain.backward();  // twice: .grad holds the sum of two passes
  const std::vector<uint64_t> want_twice = bits(m.b.W1.grad());
  m.zero_grad();

  Tensor ck = m.loss(true, 11);
  std::vector<Tensor> got = autograd::grad({ck}, {m.a.W2, m.x0}, {}, {.retain_graph = true});
  EXPECT_EQ(bits(got[0]), bits(want[0]));
  EXPECT_EQ(bits(got[1]), bits(want[1]));
  for (const Tensor& l : m.leaves()) EXPECT_FALSE(l.grad().defined());
  ck.backward(Tensor(), /*retain_graph=*/true);
  ck.backward();
  EXPECT_EQ(bits(m.b.W1.grad()), want_twice);
}

TEST(Checkpoint, SeveralInputsAndOutputs) {
  manual_seed(5);
  Tensor a = randn({4, 6}).requires_grad_(), b = randn({4, 6}).requires_grad_();
  Tensor W = randn({6, 6}).requires_grad_();
  Tensor c = randn({4, 6});  // does not require grad
  Tensor r = randn({4, 6}), s = randn({4, 6});
  // outputs: two computed inside (one from a and W only), b returned as is, and one that needs
  // no gradient; b is also used after the checkpoint
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor u = dropout(tanh(matmul(in[0], W)) * in[1], 0.2);
    Tensor v = sigmoid(matmul(in[0], W));
    return std::vector<Tensor>{u, v, in[1], in[2] * 2.0};
  };
  auto run = [&](bool checkpointed) {
    manual_seed(9);
    std::vector<Tensor> o = checkpointed ? checkpoint(fn, {a, b, c}) : fn({a, b, c});
    EXPECT_FALSE(o[3].requires_grad());
    EXPECT_EQ(o[2].unsafe_impl(), b.unsafe_impl());  // returned unchanged
    ((o[0] * r).sum() + (o[1] * s).sum() + (o[0] * o[1]).sum() + (o[2] * b).sum()).backward();
    std::vector<std::vector<uint64_t>> g{bits(a.grad()), bits(b.grad()), bits(W.grad())};
    for (Tensor t : {a, b, W}) t.impl()->grad.reset();
    return g;
  };
  EXPECT_EQ(run(true), run(false));

  // only one output reaches the loss: the other's node does not run
  Tensor ref_grad = autograd::grad({(fn({a, b, c})[1] * s).sum()}, {W})[0];
  std::vector<Tensor> o = checkpoint(fn, {a, b, c});
  EXPECT_EQ(bits(autograd::grad({(o[1] * s).sum()}, {W})[0]), bits(ref_grad));
}

TEST(Checkpoint, HooksRunOnceWithTheTotalAsWithout) {
  manual_seed(6);
  TwoBlocks m(kFloat32);
  auto run = [&](bool checkpointed) {
    std::vector<std::vector<uint64_t>> seen;
    auto h1 = m.a.W1.register_hook([&](const Tensor& g) { seen.push_back(bits(g)); });
    auto h2 = m.x0.register_hook([&](const Tensor& g) { seen.push_back(bits(g)); });
    manual_seed(8);
    Tensor h = m.x0 * 2.0;
    Tensor y = m.b(h);
    auto fn = [&](const Tensor& t) {
      Tensor z = m.a(t);
      z.register_hook([&](const Tensor& g) { seen.push_back(bits(g)); });  // inside fn
      return z * 3.0;
    };
    Tensor out = checkpointed ? checkpoint(fn, y) : fn(y);
    out.register_hook([&](const Tensor& g) { return g * 0.5; });  // on the output: changes it
    ((out * m.r1).sum() + (h * m.r2).sum()).backward();
    h1.remove();
    h2.remove();
    seen.push_back(bits(m.a.W1.grad()));
    seen.push_back(bits(m.b.W2.grad()));
    m.zero_grad();
    return seen;
  };
  const auto want = run(false);
  EXPECT_EQ(want.size(), 5u);  // the hook inside fn, W1's, x0's, then two .grads
  EXPECT_EQ(run(true), want);
}

TEST(Checkpoint, AGeneratorOfOnesOwnIsRestoredWhenGiven) {
  manual_seed(12);
  Tensor x = randn({16, 16}).requires_grad_();
  Generator gen(99);
  auto fn = [&](const Tensor& t) { return dropout(t.exp(), 0.5, true, &gen); };
  auto grad_of = [&](bool checkpointed, bool pass_generator) {
    gen.manual_seed(5);
    Tensor y = !checkpointed    ? fn(x)
               : pass_generator ? checkpoint(fn, x, {.generators = {&gen}})
                                : checkpoint(fn, x);
    return bits(autograd::grad({(y * y).sum()}, {x})[0]);
  };
  const auto want = grad_of(false, false);
  EXPECT_EQ(grad_of(true, true), want);
  EXPECT_NE(grad_of(true, false), want);  // the rerun drew gen's next mask
}

// The bytes held between forward and backward by a chain of blocks; *grads gets the bits of
// the weights' gradients.
int64_t bytes_held(bool checkpointed, std::vector<uint64_t>* grads) {
  manual_seed(13);
  const int64_t d = 64;
  std::vector<Block> blocks;
  for (int i = 0; i < 4; ++i) blocks.emplace_back(d, kFloat32);
  Tensor x = randn({64, d});
  const int64_t before = memory_stats().current_bytes;
  for (const Block& blk : blocks)
    x = checkpointed ? checkpoint([&blk](const Tensor& t) { return blk(t); }, x) : blk(x);
  Tensor loss = (x * x).sum();
  const int64_t held = memory_stats().current_bytes - before;
  loss.backward();
  for (const Block& blk : blocks)
    for (const Tensor& p : blk.params()) {
      std::vector<uint64_t> b = bits(p.grad());
      grads->insert(grads->end(), b.begin(), b.end());
    }
  return held;
}

TEST(Checkpoint, TheForwardKeepsOnlyInputsAndOutputs) {
  std::vector<uint64_t> g_plain, g_ck;
  const int64_t plain = bytes_held(false, &g_plain);
  const int64_t ck = bytes_held(true, &g_ck);
  // Without checkpointing each block keeps its (64, 256) hidden activations several times
  // (linear's output, gelu's, the dropout mask); with it, the (64, 64) input and output.
  const int64_t per_block_io = 2 * 64 * 64 * 4;
  EXPECT_GT(plain, 4 * 4 * per_block_io);
  EXPECT_LE(ck, 4 * per_block_io + 4096);
  EXPECT_EQ(g_ck, g_plain);
}

// The bytes alive when the backward reaches fn's output (a hook registered inside fn), with
// fn's output used by the loss only through a product that has already run by then.
int64_t bytes_when_the_backward_reaches_fn(bool checkpointed, std::vector<uint64_t>* grads) {
  manual_seed(15);
  const int64_t n = int64_t{1} << 18;  // 1 MiB of float32 each
  Tensor a = randn({n}).requires_grad_(), b = randn({n}).requires_grad_();
  const Tensor x = randn({n}), r = randn({n});
  int64_t live = -1;
  auto fn = [&](const Tensor& t) {
    Tensor y = t * a + t * b;  // the sum saves nothing, so y is released once y * r has run
    y.register_hook([&live](const Tensor&) { live = memory_stats().current_bytes; });
    return y;
  };
  Tensor loss = ((checkpointed ? checkpoint(fn, x) : fn(x)) * r).sum();
  loss.backward();
  for (const Tensor& p : {a, b}) {
    std::vector<uint64_t> g = bits(p.grad());
    grads->insert(grads->end(), g.begin(), g.end());
  }
  return live;
}

TEST(Checkpoint, TheRerunsOutputIsReleasedBeforeItsBackward) {
  std::vector<uint64_t> g_plain, g_ck;
  const int64_t plain = bytes_when_the_backward_reaches_fn(false, &g_plain);
  const int64_t ck = bytes_when_the_backward_reaches_fn(true, &g_ck);
  ASSERT_GT(plain, 0);
  ASSERT_GT(ck, 0);
  // the rerun recomputes fn's output (1 MiB) for its graph only: no more is alive than without
  // the checkpoint, but for the stand-ins' single floats
  EXPECT_LE(ck, plain + 4096);
  EXPECT_EQ(g_ck, g_plain);
}

TEST(Checkpoint, OutputsCarryTheCheckpointNodes) {
  manual_seed(14);
  Block blk(4, kFloat32);
  Tensor x = randn({2, 4});  // no input requires grad: the weights still get gradients
  Tensor y = checkpoint([&](const Tensor& t) { return blk(t); }, x);
  EXPECT_EQ(y.grad_fn_name(), "CheckpointOutputBackward");
  ASSERT_EQ(y.grad_fn()->next.size(), 1u);
  const Node& recompute = *y.grad_fn()->next[0].fn;
  EXPECT_EQ(recompute.name, "CheckpointBackward");
  EXPECT_EQ(recompute.next.size(), 4u);  // the four weights; x is no edge
  y.sum().backward();
  for (const Tensor& p : blk.params()) EXPECT_TRUE(p.grad().defined());

  // grad mode off, or nothing that requires grad: fn just runs
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(checkpoint([&](const Tensor& t) { return blk(t); }, x).requires_grad());
  }
  EXPECT_FALSE(checkpoint([](const Tensor& t) { return t.exp(); }, x).requires_grad());
}

TEST(Checkpoint, Errors) {
  Tensor x = randn({3}).requires_grad_();
  expect_error([&] { checkpoint([](const Tensor&) { return Tensor(); }, x); },
               {"utils::checkpoint", "undefined tensor as output 0"});
  expect_error([&] { checkpoint([](const Tensor& t) { return t; }, Tensor()); },
               {"utils::checkpoint", "input 0 is an undefined tensor"});
  // a rerun that records another graph
  int calls = 0;
  Tensor y = checkpoint([&](const Tensor& t) { return ++calls == 1 ? t.exp() : t.exp().exp(); }, x);
  expect_error([&] { y.sum().backward(); }, {"utils::checkpoint", "different graph"});
  Tensor w = randn({3}).requires_grad_();
  y = checkpoint([&](const Tensor& t) { return ++calls == 3 ? t * 2.0 : t * w; }, x);
  expect_error([&] { y.sum().backward(); }, {"utils::checkpoint", "different graph"});
  // double backward through a checkpoint
  Tensor z = checkpoint([](const Tensor& t) { return t * t; }, x);
  expect_error([&] { autograd::grad({z.sum()}, {x}, {}, {.create_graph = true}); },
               {"utils::checkpoint", "create_graph"});
}

}  // namespace
}  // namespace xgrad::testing
