// tests/optim/test_optim_parity.cpp: SGD / Adam / AdamW against PyTorch 1.13, and resuming
// from a state dict.
//
// Each case of optim_cases.h runs the fixture's 10 gradient steps (from
// tests/fixtures/gen_optim.py, torch with foreach=False; the script checks foreach=True
// agrees) and compares parameters and optimizer state with torch's to 1e-6 relative.
#include <gtest/gtest.h>

#include "optim_cases.h"

namespace xgrad::testing {
namespace {

class OptimParity : public ::testing::TestWithParam<OptimCase> {};

// 1e-6 relative, plus an absolute floor for entries that are ~0 (a second moment of a zero
// gradient, a parameter that crossed zero)
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-7;

TEST_P(OptimParity, TenStepsMatchTorch) {
  const OptimCase& c = GetParam();
  const Fixture& fx = optim_fixture();
  auto [w, b] = initial_params(c.name);
  auto opt = c.make(w, b);
  run_steps(c.name, *opt, w, b, 0, 10);
  expect_close(w, fx.get(c.name + ".w"), kRtol, kAtol, c.name + ".w");
  expect_close(b, fx.get(c.name + ".b"), kRtol, kAtol, c.name + ".b");

  // the optimizer state matches torch's opt.state[p] too (state dict index 0 = w, 1 = b)
  const optim::OptimizerState sd = opt->state_dict();
  for (const auto& [index, pname] : {std::pair{0, "w"}, std::pair{1, "b"}}) {
    const std::string prefix = c.name + "." + pname + ".";
    int expected_keys = 0;
    for (const char* key : {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer"}) {
      if (!fx.has(prefix + key)) continue;
      ++expected_keys;
      ASSERT_TRUE(sd.state.count(index) && sd.state.at(index).count(key)) << prefix << key;
      const Tensor& mine = sd.state.at(index).at(key);
      if (std::string(key) == "step") {
        EXPECT_EQ(mine.dtype(), kFloat32);
        EXPECT_EQ(mine.dim(), 0);
        EXPECT_EQ(mine.item(), fx.get(prefix + key).item()) << prefix << key;
      } else {
        expect_close(mine, fx.get(prefix + key), kRtol, kAtol, prefix + key);
      }
    }
    const std::size_t have = sd.state.count(index) ? sd.state.at(index).size() : 0;
    EXPECT_EQ(have, static_cast<std::size_t>(expected_keys)) << prefix;
  }
}

// Save after 5 steps, load into a fresh optimizer over fresh parameters holding the same
// values, 5 more steps: bit for bit the same as 10 uninterrupted steps.
TEST_P(OptimParity, ResumeFromStateDictIsBitExact) {
  const OptimCase& c = GetParam();
  auto [w, b] = initial_params(c.name);
  auto straight = c.make(w, b);
  run_steps(c.name, *straight, w, b, 0, 10);

  auto [w1, b1] = initial_params(c.name);
  auto first = c.make(w1, b1);
  run_steps(c.name, *first, w1, b1, 0, 5);
  const optim::OptimizerState saved = first->state_dict();
  first.reset();

  Tensor w2 = w1.detach().clone(), b2 = b1.detach().clone();
  w2.requires_grad_();
  b2.requires_grad_();
  auto resumed = c.make(w2, b2);  // fresh options, as a restarted program would build them
  resumed->load_state_dict(saved);
  run_steps(c.name, *resumed, w2, b2, 5, 10);

  EXPECT_TRUE(same_bits(w2, w)) << c.name;
  EXPECT_TRUE(same_bits(b2, b)) << c.name;
  expect_same_state(resumed->state_dict(), straight->state_dict());
}

// The state dict holds copies: stepping on does not change a saved one.
TEST_P(OptimParity, StateDictIsACopy) {
  const OptimCase& c = GetParam();
  auto [w, b] = initial_params(c.name);
  auto opt = c.make(w, b);
  run_steps(c.name, *opt, w, b, 0, 3);
  const optim::OptimizerState saved = opt->state_dict();
  optim::OptimizerState copy = saved;
  std::map<int64_t, std::map<std::string, Tensor>> deep;
  for (const auto& [i, named] : saved.state)
    for (const auto& [k, t] : named) deep[i][k] = t.clone();
  run_steps(c.name, *opt, w, b, 3, 6);
  for (const auto& [i, named] : saved.state)
    for (const auto& [k, t] : named) EXPECT_TRUE(same_bits(t, deep[i][k])) << i << " " << k;
}

INSTANTIATE_TEST_SUITE_P(Torch, OptimParity, ::testing::ValuesIn(optim_cases()),
                         [](const ::testing::TestParamInfo<OptimCase>& info) { return info.param.name; });

TEST(OptimBasics, StateDictLayout) {
  Tensor w = zeros({2, 3}).requires_grad_(), b = zeros({3}).requires_grad_(),
         e = zeros({5, 2}).requires_grad_();
  optim::AdamW opt({{{w}, {.lr = 6e-4, .weight_decay = 0.1}}, {{b, e}, {.lr = 6e-4, .weight_decay = 0.0}}});
  w.set_grad(ones({2, 3}));
  e.set_grad(ones({5, 2}));  // b has no gradient: no state
  opt.step();
  const optim::OptimizerState sd = opt.state_dict();
  EXPECT_EQ(sd.type, "AdamW");
  ASSERT_EQ(sd.param_groups.size(), 2u);
  EXPECT_EQ(sd.param_groups[0].params, (std::vector<int64_t>{0}));
  EXPECT_EQ(sd.param_groups[1].params, (std::vector<int64_t>{1, 2}));
  const std::map<std::string, double> group0{{"lr", 6e-4},  {"beta1", 0.9},        {"beta2", 0.999},
                                             {"eps", 1e-8}, {"weight_decay", 0.1}, {"amsgrad", 0}};
  EXPECT_EQ(sd.param_groups[0].options, group0);
  EXPECT_EQ(sd.param_groups[1].options.at("weight_decay"), 0.0);
  ASSERT_EQ(sd.state.size(), 2u);
  EXPECT_TRUE(sd.state.count(0) && sd.state.count(2));
  EXPECT_EQ(sd.state.at(2).at("exp_avg").shape(), (Shape{5, 2}));
  EXPECT_EQ(sd.state.at(0).at("step").item(), 1.0);

  optim::SGD sgd(std::vector<Tensor>{w}, {.lr = 0.1});
  sgd.step();
  EXPECT_TRUE(sgd.state_dict().state.empty());  // no momentum: no buffer (torch: None)
  const std::map<std::string, double> sgd_opts{
      {"lr", 0.1}, {"momentum", 0}, {"dampening", 0}, {"weight_decay", 0}, {"nesterov", 0}};
  EXPECT_EQ(sgd.state_dict().param_groups[0].options, sgd_opts);
}

TEST(OptimBasics, DefaultsMatchTorch) {
  const optim::AdamOptions adam;
  EXPECT_EQ(adam.lr, 1e-3);
  EXPECT_EQ(adam.betas, (std::pair<double, double>{0.9, 0.999}));
  EXPECT_EQ(adam.eps, 1e-8);
  EXPECT_EQ(adam.weight_decay, 0.0);
  EXPECT_FALSE(adam.amsgrad);
  const optim::AdamWOptions adamw;
  EXPECT_EQ(adamw.weight_decay, 1e-2);
  EXPECT_EQ(adamw.lr, 1e-3);
  const optim::SGDOptions sgd;
  EXPECT_EQ(sgd.momentum, 0.0);
  EXPECT_EQ(sgd.dampening, 0.0);
  EXPECT_FALSE(sgd.nesterov);
}

}  // namespace
}  // namespace xgrad::testing
