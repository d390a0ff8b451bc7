// tests/optim/test_optim_errors.cpp: bad options and parameters (clear xgrad::Error naming
// the optimizer and the value), load_state_dict validation leaving the optimizer untouched,
// and the step / zero_grad contract (skipped parameters, version counters, no grad mode).
#include <gtest/gtest.h>

#include <cmath>

#include "optim_cases.h"

namespace xgrad::testing {
namespace {

using namespace xgrad::optim;

// Runs f, expects an xgrad::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected xgrad::Error containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
  }
}

std::vector<Tensor> two_params() { return {ones({2, 2}).requires_grad_(), ones({3}).requires_grad_()}; }

// ---------------------------------------------------------------- constructor checks
TEST(OptimErrors, BadOptionsNameOptimizerAndValue) {
  auto ps = two_params();
  expect_error([&] { SGD(ps, {.lr = -0.5}); }, {"SGD", "learning rate", "-0.5"});
  expect_error([&] { SGD(ps, {.lr = NAN}); }, {"SGD", "learning rate", "nan"});
  expect_error([&] { SGD(ps, {.momentum = -0.1}); }, {"SGD", "momentum", "-0.1"});
  expect_error([&] { SGD(ps, {.weight_decay = -1}); }, {"SGD", "weight_decay", "-1"});
  expect_error([&] { SGD(ps, {.nesterov = true}); }, {"SGD", "Nesterov", "momentum 0"});
  expect_error([&] { SGD(ps, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               {"SGD", "Nesterov", "dampening 0.1"});
  expect_error([&] { Adam(ps, {.lr = -1e-3}); }, {"Adam", "learning rate", "-0.001"});
  expect_error([&] { Adam(ps, {.betas = {1.0, 0.999}}); }, {"Adam", "beta", "index 0", "1"});
  expect_error([&] { Adam(ps, {.betas = {0.9, -0.1}}); }, {"Adam", "beta", "index 1", "-0.1"});
  expect_error([&] { Adam(ps, {.eps = -1e-8}); }, {"Adam", "epsilon", "-1e-08"});
  expect_error([&] { Adam(ps, {.weight_decay = -0.1}); }, {"Adam", "weight_decay", "-0.1"});
  expect_error([&] { AdamW(ps, {.lr = -3e-4}); }, {"AdamW", "learning rate", "-0.0003"});
  expect_error([&] { AdamW(ps, {.betas = {0.9, 1.5}}); }, {"AdamW", "index 1", "1.5"});
  expect_error([&] { AdamW(ps, {.weight_decay = -0.1}); }, {"AdamW", "weight_decay", "-0.1"});
  // per-group options are checked the same way
  expect_error([&] { AdamW({{{ps[0]}, {}}, {{ps[1]}, {.eps = -1}}}); }, {"AdamW", "epsilon", "-1"});
}

TEST(OptimErrors, BadParameters) {
  Tensor p = ones({2, 2}).requires_grad_();
  expect_error([&] { AdamW(std::vector<Tensor>{p, p}); }, {"AdamW", "more than once"});
  expect_error(
      [&] {
        AdamW({{{p}, {}}, {{p}, {.weight_decay = 0}}});
      },
      {"AdamW", "param group 1", "more than once"});
  expect_error([&] { SGD(std::vector<Tensor>{p, p.detach()}); }, {"SGD", "more than once"});
  expect_error([&] { Adam(std::vector<Tensor>{}); }, {"Adam", "empty parameter list"});
  expect_error([&] { Adam(std::vector<Tensor>{Tensor()}); }, {"Adam", "undefined"});
  expect_error([&] { SGD(std::vector<Tensor>{p * 2.0}); }, {"SGD", "non-leaf", "MulBackward0"});
  expect_error([&] { SGD(std::vector<Tensor>{arange(4)}); }, {"SGD", "int64"});
  Tensor base = zeros({3, 4});
  Tensor nc = base.t();  // a non-contiguous leaf
  nc.requires_grad_();
  expect_error([&] { AdamW(std::vector<Tensor>{nc}); }, {"AdamW", "not contiguous", "[4, 3]"});

  AdamW opt(std::vector<Tensor>{p}, {.lr = 0.1, .betas = {0.8, 0.9}, .weight_decay = 0.3});
  expect_error([&] { opt.add_param_group({{p}, {}}); }, {"AdamW", "more than once"});
  expect_error(
      [&] {
        opt.add_param_group({{ones({2}).requires_grad_()}, {.lr = -1}});
      },
      {"AdamW", "learning rate", "-1"});
  EXPECT_EQ(opt.num_param_groups(), 1u);
  opt.add_param_group({{ones({2}).requires_grad_()}, {.lr = 0.5}});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.lr(1), 0.5);
  // as torch's add_param_group: what the group does not set comes from the defaults
  EXPECT_EQ(opt.options(1).weight_decay, 0.3);
  EXPECT_EQ(opt.options(1).betas, (std::pair<double, double>{0.8, 0.9}));
  EXPECT_EQ(opt.defaults().lr, 0.1);
  // a full options struct sets every option of its group, defaults notwithstanding
  opt.add_param_group({{ones({3}).requires_grad_()}, AdamWOptions{.lr = 0.7}});
  EXPECT_EQ(opt.options(2).weight_decay, 1e-2);
  EXPECT_EQ(opt.options(2).betas, (std::pair<double, double>{0.9, 0.999}));
}

// ---------------------------------------------------------------- step checks
TEST(OptimErrors, BadOptionAtStepLeavesEverythingUntouched) {
  const std::string name = "adamw_weight_decay";
  auto [w, b] = initial_params(name);
  AdamW opt(std::vector<Tensor>{w, b}, {.lr = 0.01, .betas = {0.9, 0.95}, .weight_decay = 0.1});
  run_steps(name, opt, w, b, 0, 3);
  const OptimizerState before = opt.state_dict();
  const Tensor w_before = w.detach().clone(), b_before = b.detach().clone();
  const uint64_t version = w.version();

  set_grads(name, 3, w, b);
  opt.options(0).betas.second = 1.0;  // made invalid after construction
  expect_error([&] { opt.step(); }, {"AdamW", "index 1", "1"});
  opt.options(0).betas.second = 0.95;
  EXPECT_TRUE(same_bits(w, w_before));
  EXPECT_TRUE(same_bits(b, b_before));
  EXPECT_EQ(w.version(), version);
  expect_same_state(opt.state_dict(), before);

  expect_error([&] { opt.set_lr(-0.1); }, {"AdamW", "learning rate", "-0.1"});
  EXPECT_EQ(opt.lr(0), 0.01);
}

TEST(OptimStep, SkipsParametersWithoutGradient) {
  Tensor w = ones({3}).requires_grad_(), b = ones({2}).requires_grad_();
  Adam opt(std::vector<Tensor>{w, b}, {.lr = 0.1});
  w.set_grad(full({3}, 0.5));
  opt.step();
  EXPECT_TRUE(same_bits(b, ones({2})));
  EXPECT_FALSE(same_bits(w, ones({3})));
  EXPECT_FALSE(opt.state(0, 1).exp_avg.defined());
  EXPECT_EQ(opt.state(0, 0).step, 1);
  EXPECT_EQ(opt.state_dict().state.count(1), 0u);
}

TEST(OptimStep, UpdatesInPlaceBumpsVersionAndRecordsNothing) {
  Tensor w = ones({4}).requires_grad_();
  const void* data = w.raw_data_ptr();
  SGD opt(std::vector<Tensor>{w}, {.lr = 0.5});
  w.set_grad(full({4}, 2.0));
  const uint64_t v0 = w.version();
  opt.step();
  EXPECT_EQ(w.raw_data_ptr(), data);
  EXPECT_GT(w.version(), v0);
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(GradMode::is_enabled());
  expect_close(w, full({4}, 0.0), 0, 0, "w");
  // a tensor saved for backward before the step now refuses to be used
  Tensor y = (w * w).sum();
  w.set_grad(full({4}, 1.0));
  opt.step();
  EXPECT_THROW(y.backward(), Error);
}

TEST(OptimStep, NonContiguousGradientIsReadCorrectly) {
  Tensor a = ones({3, 4}).requires_grad_(), b = ones({3, 4}).requires_grad_();
  AdamW oa(std::vector<Tensor>{a}), ob(std::vector<Tensor>{b});
  Tensor g = arange(12.0, 0.0, -1.0, kFloat32).reshape({4, 3});
  a.set_grad(g.t().contiguous());
  b.set_grad(g.t());  // same values, transposed strides
  oa.step();
  ob.step();
  EXPECT_TRUE(same_bits(a, b));
}

TEST(OptimStep, ZeroGrad) {
  Tensor w = ones({3}).requires_grad_(), b = ones({2}).requires_grad_();
  SGD opt(std::vector<Tensor>{w, b});
  w.set_grad(full({3}, 2.0));
  Tensor g = w.grad();
  opt.zero_grad();  // torch 1.13's default set_to_none=False: zeroed in place, same tensor
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().raw_data_ptr(), g.raw_data_ptr());
  EXPECT_TRUE(same_bits(w.grad(), zeros({3})));
  EXPECT_FALSE(b.grad().defined());
  w.set_grad(full({3}, 2.0));
  opt.zero_grad(false);
  EXPECT_TRUE(same_bits(w.grad(), zeros({3})));
  opt.zero_grad(true);  // torch 2's default: None
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
}

TEST(OptimStep, Float64AndMixedGroups) {
  Tensor w = ones({3}, kFloat64).requires_grad_(), b = ones({2}).requires_grad_();
  AdamW opt(std::vector<Tensor>{w, b}, {.lr = 0.1});
  w.set_grad(full({3}, 1.0, kFloat64));
  b.set_grad(full({2}, 1.0));
  opt.step();
  // first AdamW step: p * (1 - lr*wd) - lr * m_hat / (sqrt(v_hat) + eps), m_hat = v_hat = 1
  const double expected = 1.0 * (1 - 0.1 * 0.01) - 0.1 * 1.0 / (1.0 + 1e-8);
  EXPECT_NEAR(w.to_vector<double>()[0], expected, 1e-15);
  EXPECT_NEAR(b.to_vector<double>()[0], expected, 1e-7);
  EXPECT_EQ(opt.state(0, 0).exp_avg.dtype(), kFloat64);
}

// ---------------------------------------------------------------- load_state_dict checks
class LoadStateDictErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [w0, b0] = initial_params(name);
    w = w0;
    b = b0;
    opt = std::make_unique<AdamW>(std::vector<Tensor>{w, b},
                                  AdamWOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true});
    run_steps(name, *opt, w, b, 0, 4);
    good = opt->state_dict();
    before = opt->state_dict();
  }
  // The optimizer is exactly as before the failed load, and still steps like torch.
  void expect_untouched() {
    expect_same_state(opt->state_dict(), before);
    run_steps(name, *opt, w, b, 4, 10);
    const Fixture& fx = optim_fixture();
    expect_close(w, fx.get(name + ".w"), 1e-6, 1e-7, "w");
    expect_close(b, fx.get(name + ".b"), 1e-6, 1e-7, "b");
  }
  const std::string name = "adamw_amsgrad";
  Tensor w, b;
  std::unique_ptr<AdamW> opt;
  OptimizerState good, before;
};

TEST_F(LoadStateDictErrors, TypeMismatch) {
  Tensor p = ones({3}).requires_grad_();
  SGD sgd(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.9});
  OptimizerState sd = sgd.state_dict();
  expect_error([&] { opt->load_state_dict(sd); },
               {"AdamW.load_state_dict", "state dict from SGD loaded into AdamW"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, GroupCount) {
  OptimizerState sd = good;
  sd.param_groups.push_back(sd.param_groups[0]);
  expect_error([&] { opt->load_state_dict(sd); }, {"AdamW.load_state_dict", "2 param groups", "has 1"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, ParamCount) {
  OptimizerState sd = good;
  sd.param_groups[0].params.pop_back();
  expect_error([&] { opt->load_state_dict(sd); }, {"AdamW.load_state_dict", "1 parameters", "has 2"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, ShapeMismatchInLastParameter) {
  // the first parameter's state is fine: nothing of it may be applied either
  OptimizerState sd = good;
  sd.state[1]["exp_avg_sq"] = zeros({5});
  sd.param_groups[0].options["lr"] = 0.5;
  expect_error([&] { opt->load_state_dict(sd); },
               {"AdamW.load_state_dict", "exp_avg_sq", "parameter 1", "[5]", "[4]"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, MissingAndUnknownNames) {
  OptimizerState sd = good;
  sd.state[0].erase("exp_avg");
  expect_error([&] { opt->load_state_dict(sd); }, {"AdamW.load_state_dict", "no 'exp_avg'"});
  sd = good;
  sd.state[0]["momentum_buffer"] = zeros({3, 4});
  expect_error([&] { opt->load_state_dict(sd); }, {"unknown state 'momentum_buffer'"});
  sd = good;
  sd.param_groups[0].options.erase("eps");
  expect_error([&] { opt->load_state_dict(sd); }, {"param group 0", "no 'eps'"});
  sd = good;
  sd.param_groups[0].options["momentum"] = 0.9;
  expect_error([&] { opt->load_state_dict(sd); }, {"unknown option 'momentum'"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, BadValues) {
  OptimizerState sd = good;
  sd.param_groups[0].options["beta1"] = 1.0;
  expect_error([&] { opt->load_state_dict(sd); }, {"AdamW.load_state_dict", "beta", "index 0"});
  sd = good;
  sd.param_groups[0].options["amsgrad"] = 0.5;
  expect_error([&] { opt->load_state_dict(sd); }, {"'amsgrad' must be 0 or 1"});
  sd = good;
  sd.state[0]["step"] = scalar_tensor(-3.0);
  expect_error([&] { opt->load_state_dict(sd); }, {"'step'", "non-negative integer", "-3"});
  sd = good;
  sd.state[7] = sd.state[0];
  expect_error([&] { opt->load_state_dict(sd); }, {"parameter 7", "none of its param groups"});
  expect_untouched();
}

TEST_F(LoadStateDictErrors, GoodLoadIntoFreshOptimizerAcceptsFloat64State) {
  // torch casts loaded state to the parameter's dtype; so do we
  OptimizerState sd = good;
  for (auto& [i, named] : sd.state)
    for (auto& [k, t] : named)
      if (k != "step") t = t.to(kFloat64);
  Tensor w2 = w.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  AdamW fresh(std::vector<Tensor>{w2, b2});
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.options(0).lr, 0.01);
  EXPECT_TRUE(fresh.options(0).amsgrad);
  EXPECT_EQ(fresh.state(0, 0).exp_avg.dtype(), kFloat32);
  expect_same_state(fresh.state_dict(), good);
}

}  // namespace
}  // namespace xgrad::testing
