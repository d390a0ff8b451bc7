// tests/core/test_autocast.cpp: xgrad::autocast (torch.autocast("cpu", dtype=torch.bfloat16)):
// the guard's state (nesting, enabled = false, thread-locality), the two cast policies, output
// dtypes of the listed ops inside / outside / nested / disabled regions, gradients reaching
// float32 parameters in float32, the weight cast cache (torch's rule, and the two places xgrad
// is stricter), and a GPT-like block against torch 1.13 under autocast
// (tests/fixtures/autocast.txt, from gen_autocast.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/fixture_reader.h"
#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_close;
using testing::Fixture;
using testing::read_fixture;

Tensor param(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, &g).requires_grad_();
}

// ---------------------------------------------------------------- the guard's state

TEST(Autocast, GuardSetsAndRestoresState) {
  EXPECT_FALSE(autocast::is_enabled());
  {
    autocast outer(kBFloat16);
    EXPECT_TRUE(autocast::is_enabled());
    EXPECT_EQ(autocast::get_dtype(), kBFloat16);
    {
      autocast off(kBFloat16, /*enabled=*/false);
      EXPECT_FALSE(autocast::is_enabled());
      {
        autocast inner(kBFloat16);
        EXPECT_TRUE(autocast::is_enabled());
      }
      EXPECT_FALSE(autocast::is_enabled());
    }
    EXPECT_TRUE(autocast::is_enabled());
    {
      autocast no_cache(kBFloat16, true, /*cache_enabled=*/false);
      EXPECT_FALSE(autocast::is_cache_enabled());
    }
    EXPECT_TRUE(autocast::is_cache_enabled());
  }
  EXPECT_FALSE(autocast::is_enabled());
}

TEST(Autocast, OnlyBFloat16) {
  testing::expect_error([] { autocast guard(kFloat64); }, {"autocast", "bfloat16, got float64"});
  EXPECT_FALSE(autocast::is_enabled());  // the failed guard changed nothing
}

TEST(Autocast, StateIsPerThread) {
  autocast guard(kBFloat16);
  bool other = true;
  std::thread([&] { other = autocast::is_enabled(); }).join();
  EXPECT_FALSE(other);
  EXPECT_TRUE(autocast::is_enabled());
}

// ---------------------------------------------------------------- the policies

TEST(Autocast, PoliciesCastOnlyEligibleDtypes) {
  const Tensor f32 = ones({2}), f64 = ones({2}, kFloat64), i64 = ones({2}, kInt64);
  const Tensor b16 = ones({2}, kBFloat16);
  EXPECT_FALSE(autocast::wants_lower(f32));  // outside a region nothing is cast
  EXPECT_EQ(autocast::lower(f32).unsafe_impl(), f32.unsafe_impl());
  autocast guard(kBFloat16);
  EXPECT_TRUE(autocast::wants_lower(f32, b16));
  EXPECT_FALSE(autocast::wants_lower(b16, f64, i64, Tensor()));
  EXPECT_EQ(autocast::lower(f32).dtype(), kBFloat16);
  EXPECT_EQ(autocast::lower(f64).dtype(), kFloat64);  // float64 is never cast (torch: not eligible)
  EXPECT_EQ(autocast::lower(i64).dtype(), kInt64);
  EXPECT_FALSE(autocast::lower(Tensor()).defined());
  EXPECT_TRUE(autocast::wants_fp32(f32, b16));
  EXPECT_FALSE(autocast::wants_fp32(f32, f64));
  auto [a, b] = autocast::to_fp32(b16, f64);
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(b.dtype(), kFloat64);
}

// ---------------------------------------------------------------- output dtypes

TEST(Autocast, FloatListOpsRunInFloat32Inside) {
  const Tensor logits = randn({4, 5}).to(kBFloat16), target = tensor<int64_t>({0, 1, 2, 3});
  const Tensor y = randn({4, 5}).to(kBFloat16);
  const Tensor q = randn({1, 2, 3, 4}).to(kBFloat16);
  {
    autocast guard(kBFloat16);
    EXPECT_EQ(cross_entropy(logits, target).dtype(), kFloat32);
    EXPECT_EQ(cross_entropy_last_dim(logits, target).dtype(), kFloat32);
    EXPECT_EQ(mse_loss(logits, y).dtype(), kFloat32);
    EXPECT_EQ(scaled_dot_product_attention(q, q, q, 0.0, true).dtype(), kFloat32);
    // the cast is the only difference: the same numbers as casting by hand
    expect_close(cross_entropy(logits, target), cross_entropy(logits.to(kFloat32), target), 0, 0, "ce");
    autocast off(kBFloat16, false);
    EXPECT_EQ(cross_entropy(logits, target).dtype(), kBFloat16);  // as its input, as torch's
  }
}

// One cast per float32 input, and the op itself once: the re-call with the cast inputs finds
// nothing left to cast, and the cast (Tensor::to) is on no list. A weight used again in the
// region is not cast again.
TEST(Autocast, EachInputIsCastOnceAndTheOpRunsOnce) {
  const Tensor x = randn({3, 4}), w = param({5, 4}, 10), b = param({5}, 11);
  autocast guard(kBFloat16);
  auto calls = [](const profiler::profile& prof, const std::string& name) {  // not nested in an op
    int64_t n = 0;
    for (const profiler::Event& e : prof.events()) n += e.name == name && e.depth == 0;
    return n;
  };
  profiler::profile prof;
  (void)linear(x, w, b);
  (void)linear(x, w, b);
  prof.stop();
  EXPECT_EQ(calls(prof, "to"), 3 + 1);  // x, w, b; then x again (w and b come from the cache)
  EXPECT_EQ(calls(prof, "linear"), 2);
}

// ---------------------------------------------------------------- gradients

TEST(Autocast, LowerListOpsRunInBFloat16Inside) {
  const Tensor x = randn({3, 4}), w = param({5, 4}, 1), b = param({5}, 2);
  {
    autocast guard(kBFloat16);
    EXPECT_EQ(linear(x, w, b).dtype(), kBFloat16);
    EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
    EXPECT_EQ(matmul(x.to(kFloat64), w.t().to(kFloat64)).dtype(), kFloat64);
    {
      autocast off(kBFloat16, false);
      EXPECT_EQ(linear(x, w, b).dtype(), kFloat32);
      autocast on_again(kBFloat16);
      EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
    }
    // the same numbers as casting every input by hand and running the op outside
    const Tensor by_hand = [&] {
      autocast off(kBFloat16, false);
      return linear(x.to(kBFloat16), w.to(kBFloat16), b.to(kBFloat16));
    }();
    expect_close(linear(x, w, b).to(kFloat32), by_hand.to(kFloat32), 0, 0, "linear");
  }
  EXPECT_EQ(linear(x, w, b).dtype(), kFloat32);
}

// ---------------------------------------------------------------- gradients

TEST(Autocast, GradientsReachFloat32ParametersInFloat32) {
  const Tensor x = randn({6, 4}), target = tensor<int64_t>({0, 1, 2, 3, 4, 0});
  const Tensor w = param({5, 4}, 3), b = param({5}, 4);
  Tensor loss;
  {
    autocast guard(kBFloat16);
    loss = cross_entropy(linear(x, w, b), target);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  // the same graph spelled with explicit casts: bit-identical gradients
  const Tensor w2 = w.detach().requires_grad_(), b2 = b.detach().requires_grad_();
  cross_entropy(linear(x.to(kBFloat16), w2.to(kBFloat16), b2.to(kBFloat16)).to(kFloat32), target).backward();
  expect_close(w.grad(), w2.grad(), 0, 0, "dw");
  expect_close(b.grad(), b2.grad(), 0, 0, "db");
}

// ---------------------------------------------------------------- the weight cast cache

TEST(Autocast, CachesTheCastOfAParameterWithinARegion) {
  const Tensor w = param({4, 4}, 5);
  Tensor first;  // held, so a fresh cast cannot reuse its address
  {
    autocast guard(kBFloat16);
    first = autocast::lower(w);
    EXPECT_EQ(autocast::lower(w).unsafe_impl(), first.unsafe_impl());
    EXPECT_EQ(autocast::cache_size(), 1u);
    {
      autocast inner(kBFloat16);  // an inner region shares the cache and leaves it on exit
      EXPECT_EQ(autocast::lower(w).unsafe_impl(), first.unsafe_impl());
    }
    { autocast off(kBFloat16, false); }
    EXPECT_EQ(autocast::lower(w).unsafe_impl(), first.unsafe_impl());
  }
  EXPECT_EQ(autocast::cache_size(), 0u);  // cleared by the outermost exit
  autocast again(kBFloat16);
  const Tensor fresh = autocast::lower(w);
  EXPECT_NE(fresh.unsafe_impl(), first.unsafe_impl());
}

// Two linears of one weight inside a region share one cast, and the weight's gradient sums
// both uses.
TEST(Autocast, TwoUsesOfAWeightShareOneCast) {
  const Tensor x = randn({2, 4}), w = param({3, 4}, 9);
  Tensor y;
  {
    autocast guard(kBFloat16);
    y = add(linear(x, w).to(kFloat32), linear(mul(x, 2.0), w).to(kFloat32));
    EXPECT_EQ(autocast::cache_size(), 1u);
  }
  sum(y).backward();
  const Tensor w2 = w.detach().requires_grad_();
  const Tensor wb = w2.to(kBFloat16);
  sum(add(linear(x.to(kBFloat16), wb).to(kFloat32), linear(mul(x, 2.0).to(kBFloat16), wb).to(kFloat32)))
      .backward();
  expect_close(w.grad(), w2.grad(), 0, 0, "dw");
}

TEST(Autocast, CachesOnlyParameters) {
  const Tensor w = param({4, 4}, 6);
  autocast guard(kBFloat16);
  const Tensor non_leaf = mul(w, 1.0);
  EXPECT_NE(autocast::lower(non_leaf).unsafe_impl(), autocast::lower(non_leaf).unsafe_impl());
  const Tensor no_grad = randn({4, 4});
  EXPECT_NE(autocast::lower(no_grad).unsafe_impl(), autocast::lower(no_grad).unsafe_impl());
  const Tensor view = w.slice(0, 0, 2);
  EXPECT_NE(autocast::lower(view).unsafe_impl(), autocast::lower(view).unsafe_impl());
  EXPECT_EQ(autocast::cache_size(), 0u);
  autocast no_cache(kBFloat16, true, false);
  EXPECT_NE(autocast::lower(w).unsafe_impl(), autocast::lower(w).unsafe_impl());
  EXPECT_EQ(autocast::cache_size(), 0u);
}

// torch 1.13 caches a cast made under no_grad, and later uses in the region lose the weight's
// gradient (pytorch#112583); xgrad makes the cached cast with grad mode on.
TEST(Autocast, ACastCachedUnderNoGradStillCarriesTheGradient) {
  const Tensor w = param({3, 4}, 7);
  autocast guard(kBFloat16);
  {
    NoGradGuard no_grad;
    (void)autocast::lower(w);
  }
  const Tensor cast = autocast::lower(w);
  ASSERT_TRUE(cast.requires_grad());
  sum(cast.to(kFloat32)).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  expect_close(w.grad(), ones({3, 4}), 0, 0, "dw");
}

// A parameter written in place inside the region (an optimizer step) is cast again.
TEST(Autocast, AParameterWrittenInPlaceIsCastAgain) {
  const Tensor w = param({4}, 8);
  autocast guard(kBFloat16);
  const Tensor before = autocast::lower(w);
  {
    NoGradGuard no_grad;
    Tensor(w).add_(ones({4}));
  }
  const Tensor after = autocast::lower(w);
  EXPECT_NE(after.unsafe_impl(), before.unsafe_impl());
  expect_close(after.to(kFloat32), w.detach().to(kBFloat16).to(kFloat32), 0, 0, "recast");
}

// ---------------------------------------------------------------- torch 1.13's block

struct Block {
  int64_t B = 2, T = 8, C = 16, H = 2, V = 32;
  std::map<std::string, Tensor> p;
  std::map<std::string, Tensor> seen;

  Tensor lin(const std::string& name, const Tensor& t, bool bias = true) {
    return linear(t, p[name + ".weight"], bias ? p[name + ".bias"] : Tensor());
  }
  Tensor ln(const std::string& name, const Tensor& t) {
    return layer_norm(t, {C}, p[name + ".weight"], p[name + ".bias"]);
  }
  Tensor heads(const Tensor& t) const { return t.view({B, T, H, C / H}).transpose(1, 2); }  // (B, H, T, D)

  Tensor forward(const Tensor& tokens, const Tensor& targets) {
    Tensor x = add(embedding(p["wte"], tokens), p["wpe"]);  // (B, T, C)
    const Tensor a = seen["ln1"] = ln("ln1", x);
    const Tensor q = seen["q"] = heads(lin("q_proj", a));
    const Tensor k = heads(lin("k_proj", a)), v = heads(lin("v_proj", a));
    Tensor s = div(matmul(q, k.transpose(-2, -1)), std::sqrt(double(C / H)));  // (B, H, T, T)
    s = seen["scores"] = masked_fill(s, triu(ones({T, T}, kBool), 1), -INFINITY);
    const Tensor w = seen["weights"] = softmax(s, -1);
    const Tensor c = seen["context"] = matmul(w, v).transpose(1, 2).reshape({B, T, C});
    x = seen["resid1"] = add(x, lin("out_proj", c));
    const Tensor h = seen["gelu"] = gelu(lin("fc1", ln("ln2", x)));
    x = seen["resid2"] = add(x, lin("fc2", h));
    const Tensor logits = seen["logits"] = lin("lm_head", ln("ln_f", x), false);
    return seen["loss"] = cross_entropy(logits.flatten(0, 1), targets.flatten());
  }
};

// The largest finite |value| of t (scores hold -inf above the diagonal).
double max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : t.to_vector<double>())
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  return m;
}

// The largest |a - b| over the finite entries of b, relative to b's largest finite entry.
double rel_gap(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat32).to_vector<double>(), y = b.to_vector<double>();
  double m = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::isfinite(y[i])) m = std::max(m, std::fabs(x[i] - y[i]));
  return m / std::max(max_abs(b), 1e-30);
}

// bfloat16 keeps 8 significant bits: one rounding moves a value by up to 2^-9 (0.2%), one
// bfloat16 step near a tensor's largest entry is 2^-8 (0.4%) of it. xgrad and torch round the
// same float32 inputs to the same bfloat16 values (q matches bit for bit), but their GEMMs and
// reductions sum in different orders, so an intermediate can land a step apart and carry that
// on; the backward adds a bfloat16 rounding per op on the way down. So each forward
// intermediate is compared relative to its largest entry with kForwardTol (about 4 steps) and
// each gradient with kGradTol (about 8 steps); k_proj.bias's gradient is zero in exact
// arithmetic (softmax ignores a shift shared by every key), so only its size is checked.
// At this size that noise is as large as bfloat16's whole effect: torch's own float32 run is
// as far from its autocast run as xgrad's is (fp32.* in the fixture). So the values alone
// cannot tell a float32 run from an autocast one; the dtypes can (each intermediate's is
// checked against torch's), and the values must stay within 1.25x of that float32 distance
// summed over the parameters (1.5x for the loss), which an extra or a missing rounding in a
// whole op family would exceed.
constexpr double kForwardTol = 0.015, kGradTol = 0.03;

TEST(Autocast, GptBlockMatchesTorchUnderAutocast) {
  const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/autocast.txt");
  Block blk;
  for (const auto& [name, t] : fx)
    if (name.rfind("param.", 0) == 0) blk.p[name.substr(6)] = t.clone().requires_grad_();
  Tensor loss;
  {
    autocast guard(kBFloat16);
    loss = blk.forward(fx.get("tokens"), fx.get("targets"));
  }
  for (const auto& [name, t] : blk.seen) {
    EXPECT_EQ(t.dtype(), fx.get(name + ".bf16").item<bool>() ? kBFloat16 : kFloat32) << name;
    EXPECT_LE(rel_gap(t, fx.get(name)), kForwardTol) << name;
  }
  loss.backward();
  double gap_xgrad = 0.0, gap_fp32 = 0.0;  // summed over the parameters
  for (auto& [name, w] : blk.p) {
    ASSERT_TRUE(w.grad().defined()) << name;
    EXPECT_EQ(w.grad().dtype(), kFloat32) << name;
    const Tensor expected = fx.get("grad." + name);
    if (name == "k_proj.bias") {
      EXPECT_LE(max_abs(w.grad()), 1e-3);
      continue;
    }
    EXPECT_LE(rel_gap(w.grad(), expected), kGradTol) << "grad." << name;
    gap_xgrad += rel_gap(w.grad(), expected);
    gap_fp32 += rel_gap(fx.get("fp32.grad." + name), expected);
  }
  const double torch_loss = fx.get("loss").item<double>();
  const double xgrad_gap = std::fabs(loss.item<double>() - torch_loss);
  const double fp32_gap = std::fabs(fx.get("fp32.loss").item<double>() - torch_loss);
  EXPECT_LE(xgrad_gap, 1.5 * fp32_gap);
  EXPECT_LE(gap_xgrad, 1.25 * gap_fp32);
}

}  // namespace
}  // namespace xgrad
