// bench/profiler_overhead.cpp: what xgrad::profiler costs per op. Times (this thread's CPU
// time, CLOCK_THREAD_CPUTIME_ID, one thread, best of 5) a loop of the cheapest ops, add of two
// 1-element tensors and a view, with no profile (the hook is one relaxed load and a branch),
// with a profile recording, and the off hook alone. Prints one JSON line per case.
//
//   build/bench/profiler_overhead [--iters 200000]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "xgrad/xgrad.h"

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double best_ns_per_iter(int64_t iters, const std::function<void()>& body) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = thread_cpu_seconds();
    for (int64_t i = 0; i < iters; ++i) body();
    best = std::min(best, (thread_cpu_seconds() - t0) * 1e9 / double(iters));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t iters = 200000;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
  xgrad::set_num_threads(1);
  const xgrad::Tensor a = xgrad::ones({1}), b = xgrad::ones({1});
  const xgrad::Tensor m = xgrad::ones({4, 4});
  auto add = [&] { xgrad::Tensor c = a + b; };
  auto view = [&] { xgrad::Tensor v = m.view({16}); };
  auto hook = [] {
    xgrad::profiler::RecordFunction rec("nothing");
    asm volatile("" ::: "memory");
  };
  auto report = [&](const char* name, const char* mode, double ns) {
    std::printf("{\"case\": \"%s\", \"profiler\": \"%s\", \"ns_per_op\": %.1f}\n", name, mode, ns);
  };
  report("RecordFunction alone", "off", best_ns_per_iter(iters, hook));
  report("add 1 element", "off", best_ns_per_iter(iters, add));
  report("view 4x4", "off", best_ns_per_iter(iters, view));
  {
    xgrad::profiler::profile prof;
    report("add 1 element", "recording", best_ns_per_iter(iters / 10, add));
    report("view 4x4", "recording", best_ns_per_iter(iters / 10, view));
  }
  return 0;
}
