// bench/gpt_bench.cpp: training-step benchmark of xgrad::nn::GPTModel and xgrad::nn::LlamaModel;
// its PyTorch twin is bench/pytorch/gpt_bench.py (same configs, same step, same JSON keys).
// scripts/bench.sh runs both, one measurement per process, and prints the comparison table.
//
//   build/bench/gpt_bench --config tiny --threads 1                 training steps
//   build/bench/gpt_bench --arch llama --config tiny                the Llama of the same size
//   build/bench/gpt_bench --config small --mode forward             forward only (no grad, eval)
//   build/bench/gpt_bench --config small --profile                  time per op family
//   build/bench/gpt_bench --sgemm-peak --threads 2                  1024^3 sgemm GFLOP/s (xgrad's
//                                                                    gemm and OpenBLAS threaded)
//
// One training step = forward, cross-entropy over all positions, backward, AdamW (lr 3e-4,
// weight decay 0.1), zero_grad; on random token batches made before timing. --warmup steps
// are untimed, then the median of --steps timed steps. Prints one JSON line with the median
// step time, tokens/s, this process's peak RSS (VmHWM from /proc/self/status) and what the
// build runs on (xgrad::simd_level(), xgrad::gemm_backend(): "simd_level", "gemm_backend").
//
// --arch llama benchmarks LlamaModel at train_lm's llama-<config> shapes: the GPT config's
// vocab, context, emb_dim, heads, layers and batch, with hidden_dim = 3 * emb_dim,
// n_kv_groups = n_heads / 2, rope_base 10000 without Llama 3's frequency scaling, no dropout,
// no biases, the output head not tied.
//
// --profile runs --steps more steps (training steps, or forward passes in --mode forward)
// under xgrad::profiler::profile and prints its table (torch's key_averages().table(), by
// self time) to stderr: every op's forward and every backward node, with calls and bytes
// allocated.
// --cpu-time measures steps in this process's CPU time instead of wall time (the JSON says
// which in "clock"), for a machine other processes load.
// --activation-checkpointing trains with GPTConfig::activation_checkpointing (each block
// recomputed in backward; the JSON says so, and its peak RSS shows the memory it saves).
// --dtype bf16 runs the forward pass and the loss (the whole step in --mode forward) under
// xgrad::autocast(kBFloat16), as the twin under torch.autocast("cpu", dtype=torch.bfloat16);
// backward and AdamW run outside it, on float32 weights. The JSON line says "dtype".
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/backend.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/nn/llama.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

// OpenBLAS's thread setter (<cblas.h> above is OpenBLAS's and declares it too; this file
// does not include xtensor-blas). Only the sgemm probe's comparison uses OpenBLAS: xgrad's
// GEMM is its own (--threads N is xgrad::set_num_threads(N)).
extern "C" void openblas_set_num_threads(int);

namespace {

using xgrad::Tensor;
// Wall time, or with --cpu-time this process's CPU time (CLOCK_PROCESS_CPUTIME_ID: all its
// threads; at --threads 1 the one thread's work, unmoved by other processes on the machine).
bool g_cpu_time = false;

struct Clock {
  static double now() {
    if (!g_cpu_time)
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }
};

double seconds_since(double t0) { return Clock::now() - t0; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return 0.0;
}

// A JSON number, or null for NaN (no loss in forward mode).
std::string json_number(double v) {
  if (std::isnan(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
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

// `"simd_level": ..., "gemm_backend": ...`: which kernels produced this line's numbers.
std::string backend_json() {
  return "\"simd_level\": " + json_string(xgrad::simd_level()) +
         ", \"gemm_backend\": " + json_string(xgrad::gemm_backend());
}

struct Options {
  std::string arch = "gpt";  // or "llama"
  std::string config = "tiny";
  std::string mode = "train";  // or "forward"
  int threads = 1;
  int warmup = 5;
  int steps = 20;
  uint64_t seed = 123;
  bool profile = false;
  bool cpu_time = false;
  bool sgemm_peak = false;
  bool activation_checkpointing = false;  // GPTConfig::activation_checkpointing
  std::string dtype = "fp32";             // or "bf16": autocast
};

struct BenchConfig {
  xgrad::nn::GPTConfig gpt;
  int64_t batch;
};

// train_lm's llama-<config> shapes (examples/train_lm/options.cpp, llama_config): keep in sync
// with the twin's LLAMA_CONFIGS.
xgrad::nn::LlamaConfig llama_config_of(const xgrad::nn::GPTConfig& g) {
  return {.vocab_size = g.vocab_size,
          .context_length = g.context_length,
          .emb_dim = g.emb_dim,
          .n_heads = g.n_heads,
          .n_layers = g.n_layers,
          .hidden_dim = 3 * g.emb_dim,
          .n_kv_groups = g.n_heads % 2 ? g.n_heads : g.n_heads / 2,
          .rope_base = 10000,
          .rope_freq = false,
          .tie_weights = false};
}

// (vocab, context, emb_dim, heads, layers, batch, dropout): keep in sync with the twin.
BenchConfig config_named(const std::string& name) {
  auto make = [](int64_t v, int64_t t, int64_t e, int64_t h, int64_t l, int64_t b, double p) {
    BenchConfig c;
    c.gpt.vocab_size = v;
    c.gpt.context_length = t;
    c.gpt.emb_dim = e;
    c.gpt.n_heads = h;
    c.gpt.n_layers = l;
    c.gpt.drop_rate = p;
    c.gpt.qkv_bias = false;
    c.batch = b;
    return c;
  };
  if (name == "tiny") return make(96, 64, 64, 4, 2, 32, 0.1);
  if (name == "small") return make(96, 128, 128, 4, 4, 16, 0.1);
  if (name == "medium") return make(96, 256, 384, 6, 6, 8, 0.1);
  std::fprintf(stderr, "gpt_bench: unknown --config '%s' (tiny, small, medium)\n", name.c_str());
  std::exit(2);
}

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: gpt_bench [--arch gpt|llama] [--config tiny|small|medium] [--mode train|forward]\n"
               "                 [--threads N] [--warmup N] [--steps N] [--seed N] [--profile]\n"
               "                 [--cpu-time]   (steps and --profile in process CPU time)\n"
               "                 [--activation-checkpointing]   (recompute each block in backward)\n"
               "                 [--dtype fp32|bf16]   (bf16: forward and loss under autocast)\n"
               "       gpt_bench --sgemm-peak [--threads N]\n");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--arch") o.arch = value();
    else if (a == "--config") o.config = value();
    else if (a == "--mode") o.mode = value();
    else if (a == "--threads") o.threads = std::atoi(value().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(value().c_str());
    else if (a == "--steps") o.steps = std::atoi(value().c_str());
    else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--profile") o.profile = true;
    else if (a == "--cpu-time") o.cpu_time = true;
    else if (a == "--sgemm-peak") o.sgemm_peak = true;
    else if (a == "--activation-checkpointing") o.activation_checkpointing = true;
    else if (a == "--dtype") o.dtype = value();
    else if (a == "-h" || a == "--help") usage(0);
    else {
      std::fprintf(stderr, "gpt_bench: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  if (o.threads < 1 || o.steps < 1 || o.warmup < 0 || (o.mode != "train" && o.mode != "forward") ||
      (o.arch != "gpt" && o.arch != "llama") || (o.dtype != "fp32" && o.dtype != "bf16"))
    usage(2);
  if (o.arch == "llama" && o.activation_checkpointing) {
    std::fprintf(stderr,
                 "gpt_bench: --activation-checkpointing is for --arch gpt (the Llama does not checkpoint)\n");
    usage(2);
  }
  return o;
}

// ---------------------------------------------------------------- sgemm peak probe
// gflops_*: a 1024^3 float32 matmul through xgrad (xgrad::matmul -> blas::gemm: xgrad's own
// kernel split over xgrad's N threads). openblas_*: the same product as one cblas_sgemm with
// OpenBLAS's own N threads (what xgrad used before it had its own kernel), for comparison.
int sgemm_peak(int threads) {
  const int n = 1024;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  xgrad::Generator gen(0);
  gen.uniform(a.data(), n * n, -1, 1);
  gen.uniform(b.data(), n * n, -1, 1);
  auto measure = [&](auto&& run) {
    for (int i = 0; i < 3; ++i) run();
    std::vector<double> gflops;
    for (int i = 0; i < 15; ++i) {
      auto t0 = Clock::now();
      run();
      gflops.push_back(2.0 * n * n * n / seconds_since(t0) / 1e9);
    }
    return std::make_pair(*std::max_element(gflops.begin(), gflops.end()), median(gflops));
  };
  xgrad::NoGradGuard no_grad;
  const Tensor ta = xgrad::randn({n, n}), tb = xgrad::randn({n, n});
  const auto xg = measure([&] { Tensor out = xgrad::matmul(ta, tb); });
  openblas_set_num_threads(threads);  // OpenBLAS's own threads, for this probe only
  const auto ob = measure([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  });
  xgrad::set_num_threads(threads);
  std::printf(
      "{\"impl\": \"sgemm\", \"via\": \"xgrad\", \"n\": %d, \"threads\": %d, "
      "\"gflops_best\": %.2f, \"gflops_median\": %.2f, \"openblas_gflops_best\": %.2f, "
      "\"openblas_gflops_median\": %.2f, %s}\n",
      n, threads, xg.first, xg.second, ob.first, ob.second, backend_json().c_str());
  return 0;
}

// ---------------------------------------------------------------- the benchmark
int run(const Options& o) {
  using namespace xgrad;
  BenchConfig bc = config_named(o.config);
  bc.gpt.activation_checkpointing = o.activation_checkpointing;
  const int64_t B = bc.batch, T = bc.gpt.context_length, V = bc.gpt.vocab_size;
  manual_seed(o.seed);
  // n_emb: the embedding tables' parameters (tok_emb, and the GPT's pos_emb), which the FLOP
  // count leaves out
  std::shared_ptr<nn::Module> net;
  int64_t n_emb = 0;
  if (o.arch == "llama") {
    auto llama = std::make_shared<nn::LlamaModel>(llama_config_of(bc.gpt));
    n_emb = llama->tok_emb->weight.numel();
    net = llama;
  } else {
    auto gpt = std::make_shared<nn::GPTModel>(bc.gpt);
    n_emb = gpt->tok_emb->weight.numel() + gpt->pos_emb->weight.numel();
    net = gpt;
  }
  nn::Module& model = *net;
  const int64_t n_params = model.num_parameters();

  // a few random batches, made before timing and cycled
  std::vector<std::pair<Tensor, Tensor>> batches;
  // (x drawn before y, in separate statements: argument evaluation order is unspecified),
  // the same draws as the twin's, so first_loss matches torch's
  for (int i = 0; i < 4; ++i) {
    Tensor x = randint(0, V, {B, T});
    Tensor y = randint(0, V, {B, T});
    batches.emplace_back(x, y);
  }

  std::vector<double> times;
  double first_loss = NAN, last_loss = NAN;
  if (o.mode == "train") {
    model.train();
    optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
    auto step = [&](int i) {
      auto& [x, y] = batches[i % batches.size()];
      auto t0 = Clock::now();
      Tensor loss;
      {
        autocast guard(kBFloat16, o.dtype == "bf16");
        Tensor logits = model(x);  // (B, T, V)
        loss = cross_entropy(logits.flatten(0, 1), y.flatten());
      }
      loss.backward();
      opt.step();
      opt.zero_grad(true);  // set_to_none, as the torch bench
      double s = seconds_since(t0);
      last_loss = loss.item();
      if (std::isnan(first_loss)) first_loss = last_loss;
      return s;
    };
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      double s = step(i);
      if (i >= o.warmup) times.push_back(s);
    }
    if (o.profile) {
      // o.steps more steps under xgrad::profiler: every op's forward and backward node
      const double loss_before = last_loss;
      xgrad::profiler::profile prof;
      for (int i = 0; i < o.steps; ++i) step(i);
      prof.stop();
      last_loss = loss_before;  // the JSON line reports the timed steps
      std::fprintf(stderr, "\nprofile of %d training steps (unprofiled median step %.3f ms):\n%s", o.steps,
                   1e3 * median(times), prof.key_averages().table("self_cpu_time_total", 40).c_str());
    }
  } else {
    model.eval();
    NoGradGuard ng;
    auto step = [&](int i) {
      auto t0 = Clock::now();
      autocast guard(kBFloat16, o.dtype == "bf16");
      Tensor logits = model(batches[i % batches.size()].first);
      return seconds_since(t0);
    };
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      double s = step(i);
      if (i >= o.warmup) times.push_back(s);
    }
    if (o.profile) {
      xgrad::profiler::profile prof;
      for (int i = 0; i < o.steps; ++i) step(i);
      prof.stop();
      std::fprintf(stderr, "\nprofile of %d forward passes (unprofiled median %.3f ms):\n%s", o.steps,
                   1e3 * median(times), prof.key_averages().table("self_cpu_time_total", 40).c_str());
    }
  }

  const double step_s = median(times);
  std::printf(
      "{\"impl\": \"xgrad\", \"arch\": \"%s\", \"config\": \"%s\", \"mode\": \"%s\", \"threads\": %d, "
      "\"batch\": %ld, \"context\": %ld, \"emb_dim\": %ld, \"n_layers\": %ld, "
      "\"n_params\": %ld, \"n_params_nonemb\": %ld, \"steps\": %zu, "
      "\"step_ms_median\": %.4f, \"step_ms_min\": %.4f, \"step_ms_max\": %.4f, "
      "\"tokens_per_s\": %.3f, \"first_loss\": %s, \"last_loss\": %s, \"peak_rss_mb\": %.2f, "
      "\"clock\": \"%s\", \"activation_checkpointing\": %s, \"dtype\": \"%s\", %s}\n",
      o.arch.c_str(), o.config.c_str(), o.mode.c_str(), o.threads, (long)B, (long)T, (long)bc.gpt.emb_dim,
      (long)bc.gpt.n_layers, (long)n_params, (long)(n_params - n_emb), times.size(), 1e3 * step_s,
      1e3 * *std::min_element(times.begin(), times.end()),
      1e3 * *std::max_element(times.begin(), times.end()), double(B * T) / step_s,
      json_number(first_loss).c_str(), json_number(last_loss).c_str(), peak_rss_mb(),
      g_cpu_time ? "cpu" : "wall", o.activation_checkpointing ? "true" : "false", o.dtype.c_str(),
      backend_json().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  g_cpu_time = o.cpu_time;
  xgrad::set_num_threads(o.threads);  // xgrad's pool
  try {
    return o.sgemm_peak ? sgemm_peak(o.threads) : run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_bench: %s\n", e.what());
    return 1;
  }
}
