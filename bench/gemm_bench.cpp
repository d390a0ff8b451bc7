// bench/gemm_bench.cpp: the GPT's linear-layer GEMMs, xgrad's threading against OpenBLAS's.
//
//   build/bench/gemm_bench --threads=2                    every shape, both implementations
//   build/bench/gemm_bench --threads=2 --benchmark_filter=medium
//   build/bench/gemm_bench --threads=1 --cpu-time    (rates per CPU second of all threads)
//
// For each config (tiny / small / medium: 2048 tokens, emb d) and each projection (d -> d for
// W_query / out_proj, d -> 3d a fused qkv, d -> 4d and 4d -> d the feed-forward) it times the
// three GEMMs of a Linear: forward y = x @ W^T (2048, in) @ (in, out), input grad dx = dy @ W,
// weight grad dW = dy^T @ x (K = 2048). "xgrad" is xgrad::matmul (split over xgrad's threads,
// OpenBLAS on one thread, output allocated per call); "openblas" is one cblas_sgemm with
// OpenBLAS's own N threads into a preallocated output (what xgrad did before it owned the
// threads). Compare the two rows of a shape; a shape's GFLOP/s is in the counters. "linear"
// rows time a whole nn.Linear with bias in training (forward, then dx, dW and db).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/random.h"

extern "C" void openblas_set_num_threads(int);

namespace {

using xgrad::Tensor;

int g_threads = 1;
bool g_cpu_time = false;  // --cpu-time: rates per CPU second of the process (a shared machine)

// C (m, n) = op(A) (m, k) @ op(B) (k, n), row-major, as stored.
struct Gemm {
  std::string name;
  int m, n, k;
  bool ta, tb;
};

std::vector<Gemm> gemms() {
  std::vector<Gemm> out;
  const int tokens = 2048;
  for (auto [config, d] : {std::pair{"tiny", 64}, {"small", 128}, {"medium", 384}}) {
    for (auto [proj, in, o] :
         {std::tuple{"d_d", d, d}, {"d_3d", d, 3 * d}, {"d_4d", d, 4 * d}, {"4d_d", 4 * d, d}}) {
      const std::string base = std::string(config) + "/" + proj + "/";
      out.push_back({base + "fwd", tokens, o, in, false, true});  // x @ W^T, W (out, in)
      out.push_back({base + "dx", tokens, in, o, false, false});  // dy @ W
      out.push_back({base + "dW", o, in, tokens, true, false});   // dy^T @ x
    }
  }
  return out;
}

void set_flops(benchmark::State& state, const Gemm& g) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void bench_xgrad(benchmark::State& state, Gemm g) {
  xgrad::set_num_threads(g_threads);
  xgrad::NoGradGuard ng;
  // stored operands: A is (m, k) or (k, m) when transposed; B is (k, n) or (n, k)
  Tensor a = g.ta ? xgrad::randn({g.k, g.m}).t() : xgrad::randn({g.m, g.k});
  Tensor b = g.tb ? xgrad::randn({g.n, g.k}).t() : xgrad::randn({g.k, g.n});
  for (auto _ : state) benchmark::DoNotOptimize(xgrad::matmul(a, b));
  set_flops(state, g);
}

// A whole Linear with bias as in training, on the gemm's shapes (m = tokens, k = in, n = out):
// y = linear(x, W, b), then y.backward(dy): the forward GEMM, dx and dW, and the bias gradient
// (6 m n k flops).
void bench_linear(benchmark::State& state, Gemm g) {
  xgrad::set_num_threads(g_threads);
  Tensor x = xgrad::randn({g.m, g.k}).requires_grad_();
  Tensor w = xgrad::randn({g.n, g.k}).requires_grad_();
  Tensor b = xgrad::randn({g.n}).requires_grad_();
  Tensor dy = xgrad::randn({g.m, g.n});
  for (auto _ : state) {
    for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
    xgrad::linear(x, w, b).backward(dy);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      6.0 * g.m * g.n * g.k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void bench_openblas(benchmark::State& state, Gemm g) {
  xgrad::set_num_threads(1);
  openblas_set_num_threads(g_threads);
  std::vector<float> a(static_cast<std::size_t>(g.m) * g.k, 0.5f),
      b(static_cast<std::size_t>(g.k) * g.n, 0.25f), c(static_cast<std::size_t>(g.m) * g.n);
  const int lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.m, g.n,
                g.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), g.n);
    benchmark::DoNotOptimize(c.data());
  }
  openblas_set_num_threads(1);
  set_flops(state, g);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      g_threads = std::max(1, std::atoi(argv[i] + 10));
      continue;
    }
    if (std::strcmp(argv[i], "--cpu-time") == 0) {
      g_cpu_time = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  std::vector<benchmark::internal::Benchmark*> all;
  for (const Gemm& g : gemms()) {
    if (g.name.ends_with("/fwd"))  // x @ W^T: m tokens, k = in, n = out
      all.push_back(benchmark::RegisterBenchmark(
          (g.name.substr(0, g.name.size() - 3) + "linear/xgrad").c_str(), bench_linear, g));

    all.push_back(benchmark::RegisterBenchmark((g.name + "/xgrad").c_str(), bench_xgrad, g));
    all.push_back(benchmark::RegisterBenchmark((g.name + "/openblas").c_str(), bench_openblas, g));
  }
  for (auto* b : all) {
    b->Unit(benchmark::kMicrosecond);
    if (g_cpu_time) b->MeasureProcessCPUTime();  // the pool's threads too
    else b->UseRealTime();
  }
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
