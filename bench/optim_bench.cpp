// bench/optim_bench.cpp: one optimizer step over 10M float32 parameters (40 tensors of 250k,
// the size of the `medium` GPT), a streaming pass over memory. Compare with torch's AdamW
// (foreach=False and True) on the same machine:
//   ./build/bench/optim_bench --benchmark_min_time=2
//   /usr/bin/python3 tests/fixtures/gen_optim.py --bench
// Run both with one thread (OPENBLAS_NUM_THREADS=1; the optimizers do not use BLAS).
#include <benchmark/benchmark.h>

#include "xgrad/xgrad.h"

namespace {

using namespace xgrad;

std::vector<Tensor> make_params() {
  constexpr int kTensors = 40, kSize = 250000;
  std::vector<Tensor> params;
  for (int i = 0; i < kTensors; ++i) {
    Tensor p = randn({kSize}).requires_grad_();
    p.set_grad(randn({kSize}));
    params.push_back(p);
  }
  return params;
}

template <class Opt, class Options>
void step_10m(benchmark::State& state, Options options) {
  auto params = make_params();
  Opt opt(params, options);
  opt.step();  // allocate the moments before timing
  for (auto _ : state) opt.step();
  state.SetItemsProcessed(state.iterations() * 10'000'000);
}

void BM_AdamW(benchmark::State& s) {
  step_10m<optim::AdamW>(s, optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1});
}
void BM_Adam(benchmark::State& s) { step_10m<optim::Adam>(s, optim::AdamOptions{.lr = 3e-4}); }
void BM_AdamW_amsgrad(benchmark::State& s) {
  step_10m<optim::AdamW>(s, optim::AdamWOptions{.lr = 3e-4, .amsgrad = true});
}
void BM_SGD_momentum(benchmark::State& s) {
  step_10m<optim::SGD>(s, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
}

BENCHMARK(BM_AdamW)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Adam)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamW_amsgrad)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SGD_momentum)->Unit(benchmark::kMillisecond);

}  // namespace
