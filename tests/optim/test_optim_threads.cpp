// tests/optim/test_optim_threads.cpp: the fused Adam/AdamW kernel split over xgrad's threads.
// The torch fixture cases still match at 2 threads, and on parameters large enough to be
// split (the flat range of all parameters >= 2 * kernels::kGrain elements, with sizes that
// are not multiples of the SIMD width) every parameter and state tensor has the same bits
// at 2 and 3 threads as at 1.
#include <gtest/gtest.h>

#include <cstring>

#include "optim_cases.h"
#include "thread_count.h"
#include "xgrad/parallel.h"

namespace xgrad::testing {
namespace {

TEST(OptimThreads, AdamFixturesMatchTorchAtTwoThreads) {
  ThreadCount tc(2);
  const Fixture& fx = optim_fixture();
  int checked = 0;
  for (const OptimCase& c : optim_cases()) {
    if (c.name.rfind("adam", 0) != 0) continue;
    auto [w, b] = initial_params(c.name);
    auto opt = c.make(w, b);
    run_steps(c.name, *opt, w, b, 0, 10);
    expect_close(w, fx.get(c.name + ".w"), 1e-6, 1e-7, c.name + ".w");
    expect_close(b, fx.get(c.name + ".b"), 1e-6, 1e-7, c.name + ".b");
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

// Three steps of `make` over parameters of odd sizes, with fixed gradients; returns the
// parameters and the optimizer's state tensors.
template <class Make>
std::vector<Tensor> large_steps(Make make, DType dt) {
  Generator g(7);
  std::vector<Tensor> params;
  for (int64_t n : {100003, 70001, 5, 4097}) params.push_back(randn({n}, &g, dt).requires_grad_());
  auto opt = make(params);
  for (int step = 0; step < 3; ++step) {
    for (Tensor& p : params) p.set_grad(randn(p.shape(), &g, dt));
    opt->step();
  }
  std::vector<Tensor> out = params;
  for (const auto& [index, st] : opt->state_dict().state)
    for (const auto& [key, t] : st) out.push_back(t);
  return out;
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.detach().contiguous(), cb = b.detach().contiguous();
  return std::memcmp(ca.raw_data_ptr(), cb.raw_data_ptr(),
                     static_cast<std::size_t>(ca.numel()) * itemsize(ca.dtype())) == 0;
}

TEST(OptimThreads, LargeParametersSameBitsAtAnyThreadCount) {
  using namespace optim;
  auto adamw = [](std::vector<Tensor> p) {
    return std::make_unique<AdamW>(p, AdamWOptions{.lr = 0.01, .weight_decay = 0.1});
  };
  auto adamw_ams = [](std::vector<Tensor> p) {
    return std::make_unique<AdamW>(p, AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
  };
  auto adam_l2 = [](std::vector<Tensor> p) {
    return std::make_unique<Adam>(p, AdamOptions{.lr = 0.01, .weight_decay = 0.1});
  };
  for (DType dt : {kFloat32, kFloat64}) {
    auto check = [&](auto make, const char* name) {
      std::vector<Tensor> serial;
      {
        ThreadCount tc(1);
        serial = large_steps(make, dt);
      }
      for (int threads : {2, 3}) {
        ThreadCount tc(threads);
        const std::vector<Tensor> par = large_steps(make, dt);
        ASSERT_EQ(par.size(), serial.size());
        for (std::size_t i = 0; i < par.size(); ++i)
          EXPECT_TRUE(bits_equal(serial[i], par[i]))
              << name << " " << dtype_name(dt) << " tensor " << i << " at " << threads << " threads";
      }
    };
    check(adamw, "AdamW");
    check(adamw_ams, "AdamW amsgrad");
    check(adam_l2, "Adam L2");
  }
}

}  // namespace
}  // namespace xgrad::testing
