// tests/optim/test_optim_speed.cpp: timing of one AdamW step over 10M float32 parameters
// (40 tensors of 250k), a report rather than a test, so it is disabled by default:
//
//   ./xgrad_optim_tests --gtest_also_run_disabled_tests --gtest_filter='*Speed*'
//
// Compare with torch on the same machine: /usr/bin/python3 tests/fixtures/gen_optim.py --bench
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

template <class Opt, class Options>
void time_steps(const char* label, Options options) {
  constexpr int kTensors = 40, kSize = 250000, kRepeats = 15;
  std::vector<Tensor> params;
  for (int i = 0; i < kTensors; ++i) {
    Tensor p = randn({kSize}).requires_grad_();
    p.set_grad(randn({kSize}));
    params.push_back(p);
  }
  Opt opt(params, options);
  opt.step();  // allocate the state
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("[ speed ] %-28s 10M float32 params: median %.2f ms, min %.2f ms per step\n", label,
              ms[ms.size() / 2], ms.front());
}

TEST(OptimSpeed, DISABLED_AdamW10M) {
  time_steps<optim::AdamW>("AdamW(wd=0.1)", optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1});
  time_steps<optim::Adam>("Adam", optim::AdamOptions{.lr = 3e-4});
  time_steps<optim::AdamW>("AdamW(amsgrad)", optim::AdamWOptions{.lr = 3e-4, .amsgrad = true});
  time_steps<optim::SGD>("SGD(momentum=0.9)", optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

}  // namespace
}  // namespace xgrad::testing
