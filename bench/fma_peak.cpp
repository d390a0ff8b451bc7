// bench/fma_peak.cpp: this machine's float32 FMA peak, measured: the ceiling that
// scripts/bench.sh puts xgrad's and torch's GFLOP/s against (MFU = achieved / (threads x the
// 1-thread peak)). No PyTorch twin: it measures the CPU, not a framework.
//
//   build/bench/fma_peak                 1 thread
//   build/bench/fma_peak --threads 2     2 threads at once (the sum, and per thread)
//
// Each thread runs independent chains of `acc = acc * b + c` FMAs on vector registers:
// 24 zmm chains for AVX-512 (16 float lanes), 12 ymm chains for AVX2 (8 lanes). A chain waits
// for its own previous FMA (latency ~4 cycles), so a core with two FMA ports needs at least
// 8 chains in flight; 24 and 12 leave room for longer latencies and still fit the register
// files (32 zmm, 16 ymm) with the two constants. Every thread does `iters` rounds over its
// chains (2 flops per lane per FMA), and the best of --runs runs counts.
//
// The bfloat16 peak (where the CPU has AVX512_BF16): the same 24 zmm chains of vdpbf16ps,
// `acc += a[2i] b[2i] + a[2i+1] b[2i+1]` per float lane, 64 flops an instruction (16 lanes x
// 2 pairs x multiply and add), the ceiling of the bfloat16 GEMM (gemm_bf16_kernel.h).
//
// Each thread's flops are divided by its own CPU time (CLOCK_THREAD_CPUTIME_ID): what a core
// does while it runs the thread, which is the ceiling, however busy the machine is (the
// development machine's two cores are shared: there wall-clock GFLOP/s halve whenever another
// job is runnable). The wall-clock figure (all threads' flops over the time from their start
// to the last join) is printed too; the two agree on an idle machine. An ISA the CPU lacks is
// reported as null. The kernels carry their own target attributes, so this file needs no
// -march flag.
//
// Prints one JSON line: {"impl": "fma_peak", "threads": N, "avx512_gflops": the threads'
// on-CPU GFLOP/s summed, "avx512_gflops_per_thread": that / N, "avx512_gflops_wall", the same
// three for avx2 and for bf16 (vdpbf16ps: "bf16_gflops", ...; null without AVX512_BF16),
// "isa": the wider one present, "simd_level" and "gemm_backend" of this xgrad build}.
#include <immintrin.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "xgrad/backend.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kChains512 = 24;  // zmm accumulators per thread
constexpr int kChains256 = 12;  // ymm accumulators per thread

volatile float g_sink;  // the chains' results end here (written by the main thread only)

float sum_lanes(const float* lanes, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += lanes[i];
  return s;
}

// iters rounds of kChains512 independent FMA chains on 16-float zmm registers; returns the
// sum of the results, so that the compiler keeps every chain.
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iters) {
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 acc[kChains512];
  for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_set1_ps(1.0f + 1e-3f * k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_fmadd_ps(acc[k], b, c);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kChains512; ++k) sum = _mm512_add_ps(sum, acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return sum_lanes(lanes, 16);
}

// iters rounds of kChains256 independent FMA chains on 8-float ymm registers.
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iters) {
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 acc[kChains256];
  for (int k = 0; k < kChains256; ++k) acc[k] = _mm256_set1_ps(1.0f + 1e-3f * k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kChains256; ++k) acc[k] = _mm256_fmadd_ps(acc[k], b, c);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kChains256; ++k) sum = _mm256_add_ps(sum, acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  return sum_lanes(lanes, 8);
}

// iters rounds of kChains512 independent vdpbf16ps chains (acc += 1 * 2^-10 + 1 * 2^-10 per
// lane: the sums stay normal and finite for any iteration count used here).
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_chains_avx512(int64_t iters) {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3a80);
  __m512 acc[kChains512];
  for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_set1_ps(1.0f + 1e-3f * k);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 32
    for (int k = 0; k < kChains512; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], a, b);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kChains512; ++k) sum = _mm512_add_ps(sum, acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  return sum_lanes(lanes, 16);
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Peak {
  double on_cpu = 0.0;  // GFLOP/s: each thread's flops / its CPU time, summed over threads
  double wall = 0.0;    // GFLOP/s: all threads' flops / wall-clock time
};

// `threads` threads running kernel(iters) at once, best of `runs` (each figure on its own).
Peak best_gflops(float (*kernel)(int64_t), int threads, int64_t iters, int runs, double flops_per_iter) {
  g_sink = kernel(iters / 10);  // wake the vector units (AVX-512 clock licence) before timing
  const double gflop = double(iters) * flops_per_iter / 1e9;  // per thread
  Peak best;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> cpu_s(threads);
    std::vector<float> result(threads);
    std::vector<std::thread> pool;
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&cpu_s, &result, t, kernel, iters] {
        const double c0 = thread_cpu_seconds();
        result[t] = kernel(iters);
        cpu_s[t] = thread_cpu_seconds() - c0;
      });
    for (auto& th : pool) th.join();
    const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    double on_cpu = 0.0;
    for (int t = 0; t < threads; ++t) {
      on_cpu += gflop / cpu_s[t];
      g_sink = g_sink + result[t];
    }
    best.on_cpu = std::max(best.on_cpu, on_cpu);
    best.wall = std::max(best.wall, threads * gflop / wall_s);
  }
  return best;
}

// A JSON string literal of s.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string json_or_null(double gflops) {
  if (gflops <= 0.0) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", gflops);
  return buf;
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: fma_peak [--threads N] [--runs N] [--iters N]\n"
               "  the float32 FMA peak (AVX-512 and AVX2) and the bfloat16 vdpbf16ps peak\n"
               "  (AVX512_BF16) of N threads at once, best of --runs\n"
               "  (default 7) runs of --iters (default 40000000) rounds per thread\n");
  std::exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, runs = 7;
  int64_t iters = 40'000'000;  // about 0.1 s per run at 230 GFLOP/s per thread
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long long {
      if (i + 1 >= argc) usage(2);
      return std::atoll(argv[++i]);
    };
    if (a == "--threads") threads = static_cast<int>(value());
    else if (a == "--runs") runs = static_cast<int>(value());
    else if (a == "--iters") iters = value();
    else if (a == "-h" || a == "--help") usage(0);
    else usage(2);
  }
  if (threads < 1 || runs < 1 || iters < 10) usage(2);

  __builtin_cpu_init();
  const bool has512 = __builtin_cpu_supports("avx512f");
  const bool has256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_bf16 = has512 && __builtin_cpu_supports("avx512bf16");
  // flops per round: chains x lanes x 2 (multiply and add)
  const Peak avx512 =
      has512 ? best_gflops(fma_chains_avx512, threads, iters, runs, kChains512 * 16 * 2.0) : Peak{};
  const Peak avx2 =
      has256 ? best_gflops(fma_chains_avx2, threads, iters, runs, kChains256 * 8 * 2.0) : Peak{};
  // vdpbf16ps: 16 lanes x 2 pairs x 2 flops
  const Peak bf16 =
      has_bf16 ? best_gflops(dpbf16_chains_avx512, threads, iters, runs, kChains512 * 16 * 4.0) : Peak{};
  const char* isa = has512 ? "avx512" : has256 ? "avx2" : "none";
  std::printf(
      "{\"impl\": \"fma_peak\", \"threads\": %d, \"runs\": %d, \"iters\": %lld, "
      "\"avx512_gflops\": %s, \"avx512_gflops_per_thread\": %s, "
      "\"avx512_gflops_wall\": %s, \"avx2_gflops\": %s, \"avx2_gflops_per_thread\": %s, "
      "\"avx2_gflops_wall\": %s, \"bf16_gflops\": %s, \"bf16_gflops_per_thread\": %s, "
      "\"bf16_gflops_wall\": %s, \"isa\": \"%s\", \"simd_level\": %s, "
      "\"gemm_backend\": %s}\n",
      threads, runs, static_cast<long long>(iters), json_or_null(avx512.on_cpu).c_str(),
      json_or_null(avx512.on_cpu / threads).c_str(), json_or_null(avx512.wall).c_str(),
      json_or_null(avx2.on_cpu).c_str(), json_or_null(avx2.on_cpu / threads).c_str(),
      json_or_null(avx2.wall).c_str(), json_or_null(bf16.on_cpu).c_str(),
      json_or_null(bf16.on_cpu / threads).c_str(), json_or_null(bf16.wall).c_str(), isa,
      json_string(xgrad::simd_level()).c_str(), json_string(xgrad::gemm_backend()).c_str());
  return has512 || has256 ? 0 : 1;
}
