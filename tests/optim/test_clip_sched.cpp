// tests/optim/test_clip_sched.cpp: clip_grad_norm_ / clip_grad_value_ and the lr schedules
// against PyTorch 1.13 and nanoGPT's get_lr (fixtures from tests/fixtures/gen_optim.py),
// and a scheduler + optimizer resume.
#include <gtest/gtest.h>

#include <cmath>

#include "optim_cases.h"

namespace xgrad::testing {
namespace {

using namespace xgrad::optim;

// ---------------------------------------------------------------- clip_grad_norm_
struct ClipCase {
  std::string name;
  double max_norm, norm_type;
};

class ClipGradNorm : public ::testing::TestWithParam<ClipCase> {};

std::vector<Tensor> params_with_fixture_grads(const std::string& name) {
  const Fixture& fx = optim_fixture();
  std::vector<Tensor> ps;
  for (int i = 0; i < 3; ++i) {
    const Tensor& g = fx.get("clip." + name + ".g" + std::to_string(i) + ".in");
    Tensor p = zeros(g.shape()).requires_grad_();
    p.set_grad(g.clone());
    ps.push_back(p);
  }
  return ps;
}

TEST_P(ClipGradNorm, MatchesTorch) {
  const ClipCase& c = GetParam();
  const Fixture& fx = optim_fixture();
  std::vector<Tensor> ps = params_with_fixture_grads(c.name);
  ps.push_back(zeros({2}).requires_grad_());  // no gradient: skipped
  const double total = nn::utils::clip_grad_norm_(ps, c.max_norm, c.norm_type);
  const double expected = fx.get("clip." + c.name + ".total").item();
  if (std::isnan(expected)) EXPECT_TRUE(std::isnan(total));
  else if (std::isinf(expected)) EXPECT_EQ(total, expected);
  else EXPECT_NEAR(total, expected, 1e-6 * expected);
  for (int i = 0; i < 3; ++i) {
    const std::string key = "clip." + c.name + ".g" + std::to_string(i) + ".out";
    expect_close(ps[i].grad(), fx.get(key), 1e-6, 1e-7, key);
  }
  EXPECT_FALSE(ps[3].grad().defined());
}

INSTANTIATE_TEST_SUITE_P(
    Torch, ClipGradNorm,
    ::testing::Values(ClipCase{"l2_clip", 1.0, 2.0}, ClipCase{"l2_noclip", 100.0, 2.0},
                      ClipCase{"inf", 1.5, INFINITY}, ClipCase{"l1", 2.0, 1.0}, ClipCase{"l3", 2.0, 3.0},
                      // torch 1.13 default: a NaN norm still scales, so every grad turns NaN
                      ClipCase{"nan_grad", 1.0, 2.0},
                      // an infinite norm: coef 0, so inf * 0 = NaN and finite entries 0
                      ClipCase{"inf_grad", 1.0, 2.0}, ClipCase{"nan_grad_infnorm", 1.0, INFINITY}),
    [](const ::testing::TestParamInfo<ClipCase>& info) { return info.param.name; });

TEST(ClipGradNormErrors, NonFiniteThrowsAndLeavesGradsUntouched) {
  for (const char* name : {"nan_grad", "inf_grad"}) {
    std::vector<Tensor> ps = params_with_fixture_grads(name);
    std::vector<Tensor> before;
    for (const Tensor& p : ps) before.push_back(p.grad().clone());
    try {
      nn::utils::clip_grad_norm_(ps, 1.0, 2.0, /*error_if_nonfinite=*/true);
      ADD_FAILURE() << "expected an error for " << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("clip_grad_norm_"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos);
    }
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const auto a = ps[i].grad().to_vector<double>(), b = before[i].to_vector<double>();
      for (std::size_t k = 0; k < a.size(); ++k)
        EXPECT_TRUE(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])));
    }
  }
}

TEST(ClipGradNormErrors, EdgeCases) {
  Tensor p = zeros({3}).requires_grad_();
  EXPECT_EQ(nn::utils::clip_grad_norm_(p, 1.0), 0.0);  // no gradient at all
  p.set_grad(tensor({3.0, 4.0, 0.0}));
  EXPECT_THROW(nn::utils::clip_grad_norm_(p, -1.0), Error);
  EXPECT_THROW(nn::utils::clip_grad_norm_(p, 1.0, NAN), Error);
  EXPECT_THROW(nn::utils::clip_grad_value_(p, -1.0), Error);
  // a float64 gradient, and the version bump
  Tensor q = zeros({2}, kFloat64).requires_grad_();
  q.set_grad(tensor({6.0, 8.0}, kFloat64));
  const uint64_t v = q.grad().version();
  EXPECT_NEAR(nn::utils::clip_grad_norm_(std::vector<Tensor>{p, q}, 5.0), std::sqrt(125.0), 1e-12);
  EXPECT_GT(q.grad().version(), v);
  const double coef = 5.0 / (std::sqrt(125.0) + 1e-6);
  EXPECT_NEAR(q.grad().to_vector<double>()[1], 8.0 * coef, 1e-12);
}

TEST(ClipGradValue, MatchesTorch) {
  const Fixture& fx = optim_fixture();
  std::vector<Tensor> ps = params_with_fixture_grads("l2_clip");
  nn::utils::clip_grad_value_(ps, 1.0);
  for (int i = 0; i < 3; ++i) {
    const std::string key = "clip.value.g" + std::to_string(i) + ".out";
    expect_close(ps[i].grad(), fx.get(key), 0, 0, key);
  }
  Tensor p = zeros({3}).requires_grad_();
  p.set_grad(tensor({-5.0, 0.5, double(NAN)}));
  nn::utils::clip_grad_value_(p, 2.0);
  const auto v = p.grad().to_vector<double>();
  EXPECT_EQ(v[0], -2.0);
  EXPECT_EQ(v[1], 0.5);
  EXPECT_TRUE(std::isnan(v[2]));  // NaN stays NaN, as torch.clamp
  // a non-contiguous gradient
  Tensor q = zeros({3, 2}).requires_grad_();
  q.set_grad(tensor({{-5.0, 1.0, 7.0}, {0.5, -0.5, 3.0}}).t());
  nn::utils::clip_grad_value_(q, 2.0);
  expect_close(q.grad(), tensor({{-2.0, 0.5}, {1.0, -0.5}, {2.0, 2.0}}), 0, 0, "q");
}

// ---------------------------------------------------------------- schedules
Tensor param() { return zeros({1}).requires_grad_(); }

// lr seen by iteration i (get_last_lr before the i-th scheduler step), i = 0..39
template <class MakeScheduler>
std::vector<double> collect(MakeScheduler make) {
  Tensor p = param();
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  auto sched = make(opt);
  std::vector<double> lrs;
  for (int i = 0; i < 40; ++i) {
    lrs.push_back(sched.get_last_lr()[0]);
    EXPECT_EQ(opt.lr(0), sched.get_last_lr()[0]);
    EXPECT_EQ(sched.last_epoch(), i);
    opt.step();
    sched.step();
  }
  return lrs;
}

void expect_schedule(const std::vector<double>& got, const std::string& key, double rtol) {
  const std::vector<double> want = optim_fixture().get(key).to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::fabs(want[i])) << key << " step " << i;
}

TEST(Schedules, MatchTorchAndNanoGPT) {
  // StepLR: torch multiplies by gamma each period, we use the closed form (torch's
  // _get_closed_form_lr): equal up to rounding
  expect_schedule(collect([](Optimizer& o) { return StepLR(o, 7, 0.5); }), "sched.step_lr", 1e-15);
  expect_schedule(collect([](Optimizer& o) { return ConstantLR(o); }), "sched.constant_lr", 1e-15);
  expect_schedule(
      collect([](Optimizer& o) { return LambdaLR(o, [](int64_t e) { return std::pow(0.95, double(e)); }); }),
      "sched.lambda_lr", 1e-15);
  expect_schedule(collect([](Optimizer& o) {
                    return WarmupCosineLR(o, {.warmup_iters = 5, .lr_decay_iters = 30, .min_lr = 0.01});
                  }),
                  "sched.warmup_cosine", 1e-15);
  expect_schedule(collect([](Optimizer& o) { return LinearWarmupLR(o, {.warmup_iters = 5}); }),
                  "sched.linear_warmup", 1e-15);
  // a constant schedule
  for (double lr : collect([](Optimizer& o) { return ConstantLR(o, {.factor = 1.0}); })) EXPECT_EQ(lr, 0.1);
}

TEST(Schedules, SetsEveryGroupFromItsBaseLr) {
  Tensor a = param(), b = param();
  AdamW opt({{{a}, {.lr = 6e-4, .weight_decay = 0.1}}, {{b}, {.lr = 3e-4, .weight_decay = 0.0}}});
  StepLR sched(opt, 2, 0.1);
  sched.step();
  sched.step();
  EXPECT_DOUBLE_EQ(opt.lr(0), 6e-5);
  EXPECT_DOUBLE_EQ(opt.lr(1), 3e-5);
  EXPECT_EQ(sched.get_last_lr().size(), 2u);
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{6e-4, 3e-4}));
  EXPECT_EQ(sched.state_dict(), 2);
  sched.load_state_dict(0);
  EXPECT_EQ(opt.lr(0), 6e-4);
}

TEST(Schedules, BadInput) {
  Tensor p = param();
  SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  EXPECT_THROW(StepLR(opt, 0), Error);
  EXPECT_THROW(WarmupCosineLR(opt, {.warmup_iters = 10, .lr_decay_iters = 10}), Error);
  EXPECT_THROW(WarmupCosineLR(opt, {.warmup_iters = -1, .lr_decay_iters = 10}), Error);
  EXPECT_THROW(ConstantLR(opt, {.factor = 2.0}), Error);
  LambdaLR sched(opt, [](int64_t e) { return e < 3 ? 1.0 : -1.0; });
  sched.step();
  sched.step();
  EXPECT_THROW(sched.step(), Error);  // a negative lr is refused; nothing changes
  EXPECT_EQ(sched.last_epoch(), 2);
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_THROW(sched.load_state_dict(-1), Error);
}

// A run with AdamW + warmup-cosine resumed from (optimizer state, scheduler count) after 5
// steps equals the uninterrupted run bit for bit.
TEST(Schedules, ResumeWithOptimizerIsBitExact) {
  const std::string name = "adamw_weight_decay";
  const AdamWOptions options{.lr = 0.01, .betas = {0.9, 0.95}, .weight_decay = 0.1};
  const WarmupCosineLROptions schedule{.warmup_iters = 3, .lr_decay_iters = 8, .min_lr = 1e-3};
  auto [w, b] = initial_params(name);
  AdamW straight(std::vector<Tensor>{w, b}, options);
  WarmupCosineLR straight_sched(straight, schedule);
  for (int t = 0; t < 10; ++t) {
    set_grads(name, t, w, b);
    straight.step();
    straight_sched.step();
  }

  auto [w1, b1] = initial_params(name);
  OptimizerState saved;
  int64_t saved_count = 0;
  {
    AdamW first(std::vector<Tensor>{w1, b1}, options);
    WarmupCosineLR sched(first, schedule);
    for (int t = 0; t < 5; ++t) {
      set_grads(name, t, w1, b1);
      first.step();
      sched.step();
    }
    saved = first.state_dict();
    saved_count = sched.state_dict();
  }
  Tensor w2 = w1.detach().clone().requires_grad_(), b2 = b1.detach().clone().requires_grad_();
  AdamW resumed(std::vector<Tensor>{w2, b2}, options);
  WarmupCosineLR sched(resumed, schedule);
  resumed.load_state_dict(saved);
  sched.load_state_dict(saved_count);
  for (int t = 5; t < 10; ++t) {
    set_grads(name, t, w2, b2);
    resumed.step();
    sched.step();
  }
  EXPECT_TRUE(same_bits(w2, w));
  EXPECT_TRUE(same_bits(b2, b));
  EXPECT_EQ(resumed.lr(0), straight.lr(0));
}

}  // namespace
}  // namespace xgrad::testing
