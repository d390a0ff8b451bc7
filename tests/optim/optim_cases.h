// tests/optim/optim_cases.h: the optimizer option sets of tests/fixtures/gen_optim.py (its
// CASES table, same names), and a runner that replays a case's gradient sequence from the
// fixture. Adding a case: add it to CASES in gen_optim.py, regenerate, add a row here.
#pragma once
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(Tensor w, Tensor b)>;

struct OptimCase {
  std::string name;
  MakeOptimizer make;
};

template <class Opt, class Options>
MakeOptimizer both(Options o) {
  return [o](Tensor w, Tensor b) { return std::make_unique<Opt>(std::vector<Tensor>{w, b}, o); };
}

inline std::vector<OptimCase> optim_cases() {
  using namespace optim;
  return {
      {"sgd_plain", both<SGD>(SGDOptions{.lr = 0.1})},
      {"sgd_momentum", both<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9})},
      {"sgd_dampening", both<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3})},
      {"sgd_nesterov", both<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true})},
      {"sgd_weight_decay", both<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01})},
      {"adam_plain", both<Adam>(AdamOptions{.lr = 0.01})},
      {"adam_default", both<Adam>(AdamOptions{})},
      {"adam_weight_decay", both<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"adam_amsgrad", both<Adam>(AdamOptions{.lr = 0.01, .betas = {0.8, 0.9}, .amsgrad = true})},
      {"adamw_default", both<AdamW>(AdamWOptions{})},
      {"adamw_weight_decay",
       both<AdamW>(AdamWOptions{.lr = 0.01, .betas = {0.9, 0.95}, .weight_decay = 0.1})},
      {"adamw_amsgrad", both<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true})},
      {"adamw_f64", both<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.1})},
      {"sgd_nesterov_f64",
       both<SGD>(SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true})},
      // nanoGPT-style groups: w decays, b does not and has its own lr
      {"adamw_groups",
       [](Tensor w, Tensor b) {
         return std::make_unique<AdamW>(std::vector<AdamW::ParamGroup>{
             {{w}, {.lr = 0.01, .weight_decay = 0.1}}, {{b}, {.lr = 0.02, .weight_decay = 0.0}}});
       }},
      // groups set some options, the constructor-level defaults fill the rest (torch's rule)
      {"adamw_group_defaults",
       [](Tensor w, Tensor b) {
         return std::make_unique<AdamW>(
             std::vector<AdamW::ParamGroup>{{{w}}, {{b}, {.lr = 0.005, .weight_decay = 0.0}}},
             AdamWOptions{.lr = 0.02, .betas = {0.85, 0.95}, .weight_decay = 0.1});
       }},
      {"sgd_group_defaults",
       [](Tensor w, Tensor b) {
         return std::make_unique<SGD>(
             std::vector<SGD::ParamGroup>{{{w}, {.dampening = 0.0, .weight_decay = 0.2}},
                                          {{b}, {.momentum = 0.5, .nesterov = false}}},
             SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true});
       }},
  };
}

inline const Fixture& optim_fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/optim.txt");
  return fx;
}

// Sets the case's gradients of step t (b has none at some steps, like the fixture).
inline void set_grads(const std::string& name, int t, Tensor& w, Tensor& b) {
  const Fixture& fx = optim_fixture();
  w.set_grad(fx.get(name + ".gw." + std::to_string(t)).clone());
  const std::string gb = name + ".gb." + std::to_string(t);
  b.set_grad(fx.has(gb) ? fx.get(gb).clone() : Tensor());
}

// Fresh leaf parameters w, b with the case's initial values.
inline std::pair<Tensor, Tensor> initial_params(const std::string& name) {
  const Fixture& fx = optim_fixture();
  Tensor w = fx.get(name + ".w0").clone();
  Tensor b = fx.get(name + ".b0").clone();
  w.requires_grad_();
  b.requires_grad_();
  return {w, b};
}

// Steps t in [from, to) of the case's gradient sequence.
inline void run_steps(const std::string& name, optim::Optimizer& opt, Tensor& w, Tensor& b, int from,
                      int to) {
  for (int t = from; t < to; ++t) {
    set_grads(name, t, w, b);
    opt.step();
  }
}

// Bitwise equality of two tensors' values (same dtype and shape).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data_ptr(), cb.raw_data_ptr(),
                     static_cast<std::size_t>(ca.numel()) * itemsize(ca.dtype())) == 0;
}

// Two state dicts hold the same type, options, indices and bitwise-equal tensors.
inline void expect_same_state(const optim::OptimizerState& a, const optim::OptimizerState& b) {
  EXPECT_EQ(a.type, b.type);
  ASSERT_EQ(a.param_groups.size(), b.param_groups.size());
  for (std::size_t g = 0; g < a.param_groups.size(); ++g) {
    EXPECT_EQ(a.param_groups[g].options, b.param_groups[g].options) << "group " << g;
    EXPECT_EQ(a.param_groups[g].params, b.param_groups[g].params) << "group " << g;
  }
  ASSERT_EQ(a.state.size(), b.state.size());
  for (const auto& [index, named] : a.state) {
    ASSERT_TRUE(b.state.count(index)) << "param " << index;
    const auto& other = b.state.at(index);
    ASSERT_EQ(named.size(), other.size()) << "param " << index;
    for (const auto& [key, t] : named) {
      ASSERT_TRUE(other.count(key)) << key;
      EXPECT_TRUE(same_bits(t, other.at(key))) << "param " << index << " " << key;
    }
  }
}

}  // namespace xgrad::testing
