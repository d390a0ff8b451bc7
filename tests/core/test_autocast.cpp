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
    testing::expect_error([&] { cross_entropy(logits, target); }, {"cross_entropy", "bfloat16"});
  }
  testing::expect_error([&] { mse_loss(logits, y); }, {"mse_loss", "bfloat16"});
}

// ---------------------------------------------------------------- gradients

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

}  // namespace
}  // namespace xgrad
