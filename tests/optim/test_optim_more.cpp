// tests/optim/test_optim_more.cpp: RMSprop, Adagrad and the schedules CosineAnnealingLR,
// LinearLR, SequentialLR, OneCycleLR and ReduceLROnPlateau against PyTorch 1.13, step for
// step (fixtures from tests/fixtures/gen_optim_more.py), their state-dict round trips and
// their argument checks.
//
// Adding an optimizer case: add it to OPTIMIZERS in gen_optim_more.py, regenerate, add a row
// to more_cases() with the same name. Parameters are compared after every step, to the bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "optim_cases.h"

namespace xgrad::testing {
namespace {

using namespace xgrad::optim;

const Fixture& more_fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/optim_more.txt");
  return fx;
}

// ================================================================ optimizers
std::vector<OptimCase> more_cases() {
  const RMSpropOptions all{
      .lr = 0.005, .alpha = 0.8, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.5, .centered = true};
  const AdagradOptions adagrad_all{
      .lr = 0.05, .lr_decay = 0.01, .weight_decay = 0.02, .initial_accumulator_value = 0.1, .eps = 1e-8};
  return {
      {"rmsprop_default", both<RMSprop>(RMSpropOptions{})},
      {"rmsprop_weight_decay", both<RMSprop>(RMSpropOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"rmsprop_momentum", both<RMSprop>(RMSpropOptions{.lr = 0.01, .momentum = 0.9})},
      {"rmsprop_centered", both<RMSprop>(RMSpropOptions{.lr = 0.01, .alpha = 0.9, .centered = true})},
      {"rmsprop_all", both<RMSprop>(all)},
      {"rmsprop_all_f64", both<RMSprop>(all)},
      {"adagrad_default", both<Adagrad>(AdagradOptions{})},
      {"adagrad_lr_decay", both<Adagrad>(AdagradOptions{.lr = 0.1, .lr_decay = 0.05})},
      {"adagrad_initial_accumulator",
       both<Adagrad>(AdagradOptions{.lr = 0.1, .initial_accumulator_value = 0.5})},
      {"adagrad_weight_decay", both<Adagrad>(AdagradOptions{.lr = 0.1, .weight_decay = 0.1})},
      {"adagrad_all", both<Adagrad>(adagrad_all)},
      {"adagrad_all_f64", both<Adagrad>(adagrad_all)},
  };
}

std::pair<Tensor, Tensor> more_initial_params(const std::string& name) {
  const Fixture& fx = more_fixture();
  Tensor w = fx.get(name + ".w0").clone().requires_grad_();
  Tensor b = fx.get(name + ".b0").clone().requires_grad_();
  return {w, b};
}

void more_set_grads(const std::string& name, int t, Tensor& w, Tensor& b) {
  const Fixture& fx = more_fixture();
  w.set_grad(fx.get(name + ".gw." + std::to_string(t)).clone());
  const std::string gb = name + ".gb." + std::to_string(t);
  b.set_grad(fx.has(gb) ? fx.get(gb).clone() : Tensor());
}

void more_run_steps(const std::string& name, Optimizer& opt, Tensor& w, Tensor& b, int from, int to) {
  for (int t = from; t < to; ++t) {
    more_set_grads(name, t, w, b);
    opt.step();
  }
}

// Bit-exact equality with a readable report (same_bits says only yes or no).
void expect_bits(const Tensor& actual, const Tensor& expected, const std::string& what) {
  EXPECT_TRUE(same_bits(actual, expected)) << what;
  if (!same_bits(actual, expected)) expect_close(actual, expected, 0, 0, what);
}

class MoreOptimParity : public ::testing::TestWithParam<OptimCase> {};

// Every step's parameters equal torch's (foreach=False) to the bit, and so does the state.
TEST_P(MoreOptimParity, EveryStepMatchesTorch) {
  const OptimCase& c = GetParam();
  const Fixture& fx = more_fixture();
  auto [w, b] = more_initial_params(c.name);
  auto opt = c.make(w, b);
  for (int t = 0; t < 10; ++t) {
    more_run_steps(c.name, *opt, w, b, t, t + 1);
    expect_bits(w, fx.get(c.name + ".w." + std::to_string(t)), c.name + ".w after step " + std::to_string(t));
    expect_bits(b, fx.get(c.name + ".b." + std::to_string(t)), c.name + ".b after step " + std::to_string(t));
  }
  const OptimizerState sd = opt->state_dict();
  for (const auto& [index, pname] : {std::pair{0, "w"}, std::pair{1, "b"}}) {
    const std::string prefix = c.name + "." + pname + ".";
    int expected_keys = 0;
    for (const char* key : {"step", "square_avg", "momentum_buffer", "grad_avg", "sum"}) {
      if (!fx.has(prefix + key)) continue;
      ++expected_keys;
      ASSERT_TRUE(sd.state.count(index) && sd.state.at(index).count(key)) << prefix << key;
      const Tensor& mine = sd.state.at(index).at(key);
      if (std::string(key) == "step") EXPECT_EQ(mine.item(), fx.get(prefix + key).item()) << prefix << key;
      else expect_bits(mine, fx.get(prefix + key), prefix + key);
    }
    EXPECT_EQ(sd.state.at(index).size(), static_cast<std::size_t>(expected_keys)) << prefix;
  }
}

// Save after 5 steps (through a file), load into a fresh optimizer over fresh parameters
// with the same values, 5 more steps: bit for bit the 10 uninterrupted steps.
TEST_P(MoreOptimParity, ResumeFromStateDictFileIsBitExact) {
  const OptimCase& c = GetParam();
  auto [w, b] = more_initial_params(c.name);
  auto straight = c.make(w, b);
  more_run_steps(c.name, *straight, w, b, 0, 10);

  auto [w1, b1] = more_initial_params(c.name);
  auto first = c.make(w1, b1);
  more_run_steps(c.name, *first, w1, b1, 0, 5);
  const auto path = std::filesystem::temp_directory_path() / ("xgrad_optim_more_" + c.name + ".safetensors");
  xgrad::save(first->state_dict(), path);
  first.reset();

  Tensor w2 = w1.detach().clone().requires_grad_(), b2 = b1.detach().clone().requires_grad_();
  auto resumed = c.make(w2, b2);
  resumed->load_state_dict(path);
  std::filesystem::remove(path);
  more_run_steps(c.name, *resumed, w2, b2, 5, 10);
  EXPECT_TRUE(same_bits(w2, w)) << c.name;
  EXPECT_TRUE(same_bits(b2, b)) << c.name;
  expect_same_state(resumed->state_dict(), straight->state_dict());
}

INSTANTIATE_TEST_SUITE_P(Torch, MoreOptimParity, ::testing::ValuesIn(more_cases()),
                         [](const ::testing::TestParamInfo<OptimCase>& info) { return info.param.name; });

TEST(MoreOptimBasics, DefaultsAndStateDictLayoutMatchTorch) {
  const RMSpropOptions r;
  EXPECT_EQ(r.lr, 1e-2);
  EXPECT_EQ(r.alpha, 0.99);
  EXPECT_EQ(r.eps, 1e-8);
  EXPECT_EQ(r.weight_decay, 0.0);
  EXPECT_EQ(r.momentum, 0.0);
  EXPECT_FALSE(r.centered);
  const AdagradOptions a;
  EXPECT_EQ(a.lr, 1e-2);
  EXPECT_EQ(a.lr_decay, 0.0);
  EXPECT_EQ(a.weight_decay, 0.0);
  EXPECT_EQ(a.initial_accumulator_value, 0.0);
  EXPECT_EQ(a.eps, 1e-10);

  Tensor w = zeros({2, 3}).requires_grad_(), b = zeros({3}).requires_grad_();
  RMSprop rms(std::vector<Tensor>{w, b}, {.momentum = 0.9});
  EXPECT_TRUE(rms.state_dict().state.empty());  // torch: state appears at the first step
  const std::map<std::string, double> rms_opts{{"lr", 1e-2},          {"alpha", 0.99},   {"eps", 1e-8},
                                               {"weight_decay", 0.0}, {"momentum", 0.9}, {"centered", 0}};
  EXPECT_EQ(rms.state_dict().param_groups[0].options, rms_opts);
  w.set_grad(ones({2, 3}));
  rms.step();  // b has no gradient: no state
  const OptimizerState rsd = rms.state_dict();
  EXPECT_EQ(rsd.type, "RMSprop");
  ASSERT_EQ(rsd.state.size(), 1u);
  EXPECT_EQ(rsd.state.at(0).size(), 3u);  // step, square_avg, momentum_buffer
  EXPECT_EQ(rsd.state.at(0).at("step").item(), 1.0);

  // Adagrad: every parameter has its state from construction, as in torch
  Adagrad ada(std::vector<Tensor>{w, b}, {.initial_accumulator_value = 0.25});
  const OptimizerState asd = ada.state_dict();
  EXPECT_EQ(asd.type, "Adagrad");
  ASSERT_EQ(asd.state.size(), 2u);
  EXPECT_EQ(asd.state.at(1).at("step").item(), 0.0);
  expect_close(asd.state.at(1).at("sum"), full({3}, 0.25), 0, 0, "sum");
  EXPECT_EQ(asd.param_groups[0].options.at("initial_accumulator_value"), 0.25);
}

TEST(MoreOptimErrors, BadOptionsThrowWithTorchsChecks) {
  Tensor w = zeros({2}).requires_grad_();
  const std::vector<Tensor> ps{w};
  auto expect_error = [](auto make, const std::string& needle) {
    try {
      make();
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { RMSprop(ps, {.lr = -1e-3}); }, "RMSprop: invalid learning rate");
  expect_error([&] { RMSprop(ps, {.eps = -1.0}); }, "RMSprop: invalid epsilon value");
  expect_error([&] { RMSprop(ps, {.alpha = -0.5}); }, "RMSprop: invalid alpha value");
  expect_error([&] { RMSprop(ps, {.momentum = -0.1}); }, "RMSprop: invalid momentum value");
  expect_error([&] { RMSprop(ps, {.weight_decay = -0.1}); }, "RMSprop: invalid weight_decay value");
  expect_error([&] { RMSprop(ps, {.lr = NAN}); }, "RMSprop: invalid learning rate");
  expect_error([&] { Adagrad(ps, {.lr = -1.0}); }, "Adagrad: invalid learning rate");
  expect_error([&] { Adagrad(ps, {.lr_decay = -1.0}); }, "Adagrad: invalid lr_decay value");
  expect_error([&] { Adagrad(ps, {.weight_decay = -1.0}); }, "Adagrad: invalid weight_decay value");
  expect_error([&] { Adagrad(ps, {.initial_accumulator_value = -1.0}); },
               "Adagrad: invalid initial_accumulator_value value");
  expect_error([&] { Adagrad(ps, {.eps = -1.0}); }, "Adagrad: invalid epsilon value");

  // a bad option set later throws at step() with nothing written
  RMSprop rms(ps);
  w.set_grad(ones({2}));
  rms.options(0).alpha = -1;
  const Tensor before = w.detach().clone();
  EXPECT_THROW(rms.step(), Error);
  EXPECT_TRUE(same_bits(w.detach(), before));
  EXPECT_TRUE(rms.state_dict().state.empty());

  // state dicts of another optimizer, or with a wrongly shaped tensor, are refused whole
  Adagrad ada(ps);
  expect_error([&] { ada.load_state_dict(RMSprop(ps).state_dict()); }, "from RMSprop loaded into Adagrad");
  OptimizerState bad = ada.state_dict();
  bad.state[0]["sum"] = zeros({3});
  expect_error([&] { ada.load_state_dict(bad); }, "has shape [3] but the parameter has shape [2]");
  bad = ada.state_dict();
  bad.param_groups[0].options["momentum"] = 0.5;
  expect_error([&] { ada.load_state_dict(bad); }, "unknown option 'momentum'");
}

// ================================================================ schedules
// Two parameter groups, lr 0.1 and 0.05, as gen_optim_more.py's two_groups().
template <class Opt, class Options>
std::unique_ptr<Opt> two_groups(Options o = {}) {
  o.lr = 0.1;
  Tensor a = zeros({1}).requires_grad_(), b = zeros({1}).requires_grad_();
  return std::make_unique<Opt>(std::vector<typename Opt::ParamGroup>{{{a}}, {{b}, {.lr = 0.05}}}, o);
}

// Row i of a (steps + 1, groups) fixture table.
std::vector<double> table_row(const std::string& key, int64_t i) {
  const Tensor& t = more_fixture().get(key);
  const std::vector<double> v = t.to_vector<double>();
  const int64_t cols = t.shape()[1];
  return {v.begin() + i * cols, v.begin() + (i + 1) * cols};
}
int64_t table_rows(const std::string& key) { return more_fixture().get(key).shape()[0]; }

// A scheduler with the schedulers it sequences (SequentialLR does not own them).
struct Schedule {
  std::vector<std::unique_ptr<LRScheduler>> parts;
  LRScheduler* top = nullptr;
  template <class S, class... Args>
  LRScheduler* add(Args&&... args) {
    parts.push_back(std::make_unique<S>(std::forward<Args>(args)...));
    return top = parts.back().get();
  }
};

using MakeOpt = std::function<std::unique_ptr<Optimizer>()>;
using MakeSchedule = std::function<Schedule(Optimizer&)>;
using Momentum = std::function<double(const Optimizer&, std::size_t group)>;

struct ScheduleCase {
  std::string name;
  MakeOpt make_opt;
  MakeSchedule make;
  Momentum momentum = nullptr;  // checked against the fixture when set
};

// After construction (i = 0) and after step i: every group's lr (and momentum) equals
// torch's to the bit, and get_last_lr() says the same.
void expect_step(const ScheduleCase& c, const Optimizer& opt, const LRScheduler& s, int64_t i) {
  const std::vector<double> lr = table_row("sched." + c.name + ".lr", i);
  const std::vector<double> mom = table_row("sched." + c.name + ".momentum", i);
  ASSERT_EQ(s.get_last_lr().size(), lr.size());
  for (std::size_t g = 0; g < lr.size(); ++g) {
    // OneCycleLR's count may reach total_steps, where torch extrapolates the last phase: a
    // negative lr there (linear annealing) is 0 here
    const double want = std::max(lr[g], 0.0);
    EXPECT_EQ(opt.lr(g), want) << c.name << " lr after step " << i << ", group " << g;
    EXPECT_EQ(s.get_last_lr()[g], want) << c.name << " get_last_lr after step " << i;
    if (c.momentum) EXPECT_EQ(c.momentum(opt, g), mom[g]) << c.name << " momentum after step " << i;
  }
  EXPECT_EQ(s.last_epoch(), i);
}

class ScheduleParity : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScheduleParity, EveryStepMatchesTorch) {
  const ScheduleCase& c = GetParam();
  auto opt = c.make_opt();
  Schedule s = c.make(*opt);
  expect_step(c, *opt, *s.top, 0);
  for (int64_t i = 1; i < table_rows("sched." + c.name + ".lr"); ++i) {
    opt->step();
    s.top->step();
    expect_step(c, *opt, *s.top, i);
  }
}

// Optimizer state dict + step count after k steps, loaded into a fresh optimizer and
// scheduler made as at the start: the rest of the schedule is torch's, to the bit.
TEST_P(ScheduleParity, ResumeContinuesTheSchedule) {
  const ScheduleCase& c = GetParam();
  const int64_t rows = table_rows("sched." + c.name + ".lr");
  for (int64_t k : {int64_t{1}, rows / 2, rows - 2}) {
    OptimizerState saved;
    int64_t count = 0;
    {
      auto opt = c.make_opt();
      Schedule s = c.make(*opt);
      for (int64_t i = 0; i < k; ++i) {
        opt->step();
        s.top->step();
      }
      saved = opt->state_dict();
      count = s.top->state_dict();
    }
    auto opt = c.make_opt();
    Schedule s = c.make(*opt);
    opt->load_state_dict(saved);
    s.top->load_state_dict(count);
    expect_step(c, *opt, *s.top, k);
    for (int64_t i = k + 1; i < rows; ++i) {
      opt->step();
      s.top->step();
      expect_step(c, *opt, *s.top, i);
    }
  }
}

double sgd_momentum(const Optimizer& o, std::size_t g) {
  return dynamic_cast<const SGD&>(o).options(g).momentum;
}
double rmsprop_momentum(const Optimizer& o, std::size_t g) {
  return dynamic_cast<const RMSprop&>(o).options(g).momentum;
}
double adam_beta1(const Optimizer& o, std::size_t g) {
  return dynamic_cast<const Adam&>(o).options(g).betas.first;
}

std::vector<ScheduleCase> schedule_cases() {
  const MakeOpt sgd = [] { return two_groups<SGD>(SGDOptions{}); };
  return {
      {"cosine", sgd,
       [](Optimizer& o) {
         Schedule s;
         s.add<CosineAnnealingLR>(o, 10, 0.001);
         return s;
       }},
      {"cosine_default", sgd,
       [](Optimizer& o) {
         Schedule s;
         s.add<CosineAnnealingLR>(o, 7);
         return s;
       }},
      {"linear", sgd,
       [](Optimizer& o) {
         Schedule s;
         s.add<LinearLR>(o, LinearLROptions{.start_factor = 0.25, .end_factor = 1.0, .total_iters = 8});
         return s;
       }},
      {"linear_decay", sgd,
       [](Optimizer& o) {
         Schedule s;
         s.add<LinearLR>(o, LinearLROptions{.start_factor = 1.0, .end_factor = 0.1, .total_iters = 6});
         return s;
       }},
      {"linear_default", sgd,
       [](Optimizer& o) {
         Schedule s;
         s.add<LinearLR>(o);
         return s;
       }},
      {"sequential", sgd,
       [](Optimizer& o) {
         Schedule s;
         LRScheduler* warm = s.add<LinearLR>(o, LinearLROptions{.start_factor = 0.1, .total_iters = 5});
         LRScheduler* cos = s.add<CosineAnnealingLR>(o, 20, 0.001);
         s.add<SequentialLR>(o, std::vector<LRScheduler*>{warm, cos}, std::vector<int64_t>{5});
         return s;
       }},
      {"sequential3", sgd,
       [](Optimizer& o) {
         Schedule s;
         LRScheduler* s1 = s.add<ConstantLR>(o, ConstantLROptions{.factor = 0.5, .total_iters = 3});
         LRScheduler* s2 = s.add<LinearLR>(o, LinearLROptions{.start_factor = 0.5, .total_iters = 4});
         LRScheduler* s3 = s.add<CosineAnnealingLR>(o, 10);
         s.add<SequentialLR>(o, std::vector<LRScheduler*>{s1, s2, s3}, std::vector<int64_t>{3, 8});
         return s;
       }},
      {"sequential_onecycle", [] { return two_groups<SGD>(SGDOptions{.momentum = 0.9}); },
       [](Optimizer& o) {
         Schedule s;
         LRScheduler* warm = s.add<LinearLR>(o, LinearLROptions{.start_factor = 0.5, .total_iters = 3});
         LRScheduler* cycle = s.add<OneCycleLR>(o, 0.2, OneCycleLROptions{.total_steps = 10});
         s.add<SequentialLR>(o, std::vector<LRScheduler*>{warm, cycle}, std::vector<int64_t>{4});
         return s;
       },
       sgd_momentum},
      {"onecycle_cos", [] { return two_groups<SGD>(SGDOptions{.momentum = 0.9}); },
       [](Optimizer& o) {
         Schedule s;
         s.add<OneCycleLR>(o, std::vector<double>{0.1, 0.05}, OneCycleLROptions{.total_steps = 20});
         return s;
       },
       sgd_momentum},
      {"onecycle_linear_three_phase", [] { return two_groups<Adam>(AdamOptions{}); },
       [](Optimizer& o) {
         Schedule s;
         s.add<OneCycleLR>(o, 0.2,
                           OneCycleLROptions{.epochs = 4,
                                             .steps_per_epoch = 5,
                                             .pct_start = 0.25,
                                             .anneal_strategy = "linear",
                                             .base_momentum = 0.8,
                                             .max_momentum = 0.9,
                                             .div_factor = 10.0,
                                             .final_div_factor = 100.0,
                                             .three_phase = true});
         return s;
       },
       adam_beta1},
      {"onecycle_rmsprop", [] { return two_groups<RMSprop>(RMSpropOptions{.momentum = 0.5}); },
       [](Optimizer& o) {
         Schedule s;
         s.add<OneCycleLR>(o, 0.02, OneCycleLROptions{.total_steps = 12, .pct_start = 0.5});
         return s;
       },
       rmsprop_momentum},
      {"onecycle_no_momentum", [] { return two_groups<Adagrad>(AdagradOptions{}); },
       [](Optimizer& o) {
         Schedule s;
         s.add<OneCycleLR>(o, 0.3,
                           OneCycleLROptions{.total_steps = 15, .pct_start = 0.4, .cycle_momentum = false});
         return s;
       }},
  };
}

INSTANTIATE_TEST_SUITE_P(Torch, ScheduleParity, ::testing::ValuesIn(schedule_cases()),
                         [](const ::testing::TestParamInfo<ScheduleCase>& info) { return info.param.name; });

// The closed forms (torch's _get_closed_form_lr) agree with the chainable steps to rounding.
TEST(Schedules, ClosedFormsAgreeWithTheSteps) {
  for (const char* name : {"cosine", "linear", "linear_decay"}) {
    auto opt = two_groups<SGD>(SGDOptions{});
    std::unique_ptr<LRScheduler> s;
    if (std::string(name) == "cosine") s = std::make_unique<CosineAnnealingLR>(*opt, 10, 0.001);
    else if (std::string(name) == "linear")
      s = std::make_unique<LinearLR>(*opt, LinearLROptions{.start_factor = 0.25, .total_iters = 8});
    else
      s = std::make_unique<LinearLR>(
          *opt, LinearLROptions{.start_factor = 1.0, .end_factor = 0.1, .total_iters = 6});
    for (int64_t i = 0; i < table_rows(std::string("sched.") + name + ".lr"); ++i) {
      const std::vector<double> lr = table_row(std::string("sched.") + name + ".lr", i);
      EXPECT_NEAR(s->lr_at(i, 0.1), lr[0], 1e-15) << name << " " << i;
      EXPECT_NEAR(s->lr_at(i, 0.05), lr[1], 1e-15) << name << " " << i;
    }
  }
}

// ---------------------------------------------------------------- ReduceLROnPlateau
struct PlateauCase {
  std::string name;
  ReduceLROnPlateauOptions options;
};

class PlateauParity : public ::testing::TestWithParam<PlateauCase> {};

TEST_P(PlateauParity, EveryStepMatchesTorch) {
  const PlateauCase& c = GetParam();
  const std::vector<double> metric = more_fixture().get("sched." + c.name + ".metric").to_vector<double>();
  const std::string key = "sched." + c.name + ".lr";
  auto opt = two_groups<SGD>(SGDOptions{});
  ReduceLROnPlateau sched(*opt, c.options);
  std::unique_ptr<ReduceLROnPlateau> resumed;
  std::unique_ptr<SGD> resumed_opt;
  for (int64_t i = 0; i < table_rows(key); ++i) {
    if (i > 0) sched.step(metric[i - 1]);
    if (resumed) resumed->step(metric[i - 1]);
    const std::vector<double> lr = table_row(key, i);
    for (std::size_t g = 0; g < lr.size(); ++g) {
      EXPECT_EQ(opt->lr(g), lr[g]) << c.name << " after step " << i << ", group " << g;
      EXPECT_EQ(sched.get_last_lr()[g], lr[g]) << c.name << " after step " << i;
      if (resumed) EXPECT_EQ(resumed_opt->lr(g), lr[g]) << c.name << " resumed, after step " << i;
    }
    if (i == 10) {  // a fresh optimizer and scheduler from the state dicts, stepped alongside
      resumed_opt = two_groups<SGD>(SGDOptions{});
      resumed = std::make_unique<ReduceLROnPlateau>(*resumed_opt, c.options);
      resumed_opt->load_state_dict(opt->state_dict());
      resumed->load_state_dict(sched.state_dict());
    }
  }
  EXPECT_EQ(sched.state_dict().last_epoch, table_rows(key) - 1);
}

INSTANTIATE_TEST_SUITE_P(
    Torch, PlateauParity,
    ::testing::Values(
        PlateauCase{"plateau_min_rel",
                    {.factor = 0.5, .patience = 2, .threshold = 0.01, .cooldown = 1, .min_lr = 0.01}},
        PlateauCase{"plateau_default", {}},
        PlateauCase{"plateau_max_abs",
                    {.mode = "max",
                     .factor = 0.3,
                     .patience = 1,
                     .threshold = 0.05,
                     .threshold_mode = "abs",
                     .min_lrs = {0.001, 0.02}}}),
    [](const ::testing::TestParamInfo<PlateauCase>& info) { return info.param.name; });

// ---------------------------------------------------------------- bad arguments
void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ScheduleErrors, BadArgumentsThrowWithTorchsChecks) {
  auto opt = two_groups<SGD>(SGDOptions{});
  expect_error([&] { CosineAnnealingLR(*opt, 0); }, "CosineAnnealingLR: T_max must be positive");
  expect_error([&] { LinearLR(*opt, {.start_factor = 1.5}); }, "LinearLR: starting multiplicative factor");
  expect_error([&] { LinearLR(*opt, {.end_factor = -0.1}); }, "LinearLR: ending multiplicative factor");
  expect_error([&] { LinearLR(*opt, {.total_iters = -1}); }, "LinearLR: total_iters");

  LinearLR a(*opt), b(*opt);
  auto other = two_groups<SGD>(SGDOptions{});
  LinearLR c(*other);
  expect_error([&] { SequentialLR(*opt, {&a, &b}, {}); }, "one more than the number of milestone points");
  expect_error([&] { SequentialLR(*opt, {&a, &c}, {3}); }, "to belong to the same optimizer");
  expect_error([&] { SequentialLR(*opt, {&a, &b, &b}, {4, 2}); }, "milestones must be increasing");

  expect_error([&] { OneCycleLR(*opt, 0.1, {}); },
               "you must define either total_steps OR (epochs AND steps_per_epoch)");
  expect_error([&] { OneCycleLR(*opt, 0.1, {.total_steps = 0}); }, "expected positive integer total_steps");
  expect_error([&] { OneCycleLR(*opt, 0.1, {.epochs = 3}); }, "expected positive integer steps_per_epoch");
  expect_error([&] { OneCycleLR(*opt, 0.1, {.total_steps = 10, .pct_start = 1.5}); }, "pct_start");
  expect_error([&] { OneCycleLR(*opt, 0.1, {.total_steps = 10, .anneal_strategy = "exp"}); },
               "anneal_strategy");
  expect_error(
      [&] {
        OneCycleLR(*opt, std::vector<double>{0.1, 0.2, 0.3}, {.total_steps = 10});
      },
      "expected 2 values for max_lr, got 3");
  auto ada = two_groups<Adagrad>(AdagradOptions{});
  expect_error([&] { OneCycleLR(*ada, 0.1, {.total_steps = 10}); }, "optimizer must support momentum");

  expect_error([&] { ReduceLROnPlateau(*opt, {.factor = 1.0}); }, "factor should be < 1.0");
  expect_error([&] { ReduceLROnPlateau(*opt, {.mode = "avg"}); }, "mode 'avg' is unknown");
  expect_error([&] { ReduceLROnPlateau(*opt, {.threshold_mode = "ratio"}); },
               "threshold mode 'ratio' is unknown");
  expect_error([&] { ReduceLROnPlateau(*opt, {.min_lrs = {0.1}}); }, "expected 2 min_lrs, got 1");
}

// Stepping past total_steps throws, as torch's get_lr raises, and leaves the count and the
// lrs where they were; a step count beyond it cannot be loaded either.
TEST(ScheduleErrors, OneCycleStepPastTotalStepsThrows) {
  auto opt = two_groups<SGD>(SGDOptions{.momentum = 0.9});
  OneCycleLR sched(*opt, 0.1, {.total_steps = 4});
  for (int i = 0; i < 4; ++i) sched.step();  // step_num == total_steps is still allowed
  const double lr = opt->lr(0), momentum = opt->options(0).momentum;
  expect_error([&] { sched.step(); }, "tried to step 6 times; the specified number of total steps is 4");
  EXPECT_EQ(sched.last_epoch(), 4);
  EXPECT_EQ(opt->lr(0), lr);
  EXPECT_EQ(opt->options(0).momentum, momentum);
  expect_error([&] { sched.load_state_dict(5); }, "OneCycleLR.load_state_dict");
  expect_error([&] { CosineAnnealingLR(*opt, 3).load_state_dict(-1); }, "CosineAnnealingLR.load_state_dict");
}

}  // namespace
}  // namespace xgrad::testing
