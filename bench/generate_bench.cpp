// bench/generate_bench.cpp: generated tokens per second of GPTModel::generate with and without
// its KV cache, for the train_lm presets; its PyTorch twin is bench/pytorch/kv_cache_generate.py
// (the book's KV-cache GPT, ch04/03_kv-cache). Greedy, batch 1, a 4-token prompt and
// context_length - 4 new tokens (the cache never overflows), random weights, vocab 96 (the
// character vocabulary of train_lm, as in gpt_bench). Time is this thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID, one thread: meaningful on a shared machine), best of --repeat.
//
//   build/bench/generate_bench [--config tiny|small|medium|all] [--repeat 3]
//
// Prints one JSON line per config and mode.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "xgrad/xgrad.h"

namespace {

struct Config {
  const char* name;
  int64_t ctx, emb, heads, layers;
};
// keep in sync with examples/train_lm's presets and bench/pytorch/kv_cache_generate.py
constexpr Config kConfigs[] = {{"tiny", 64, 64, 4, 2}, {"small", 128, 128, 4, 4}, {"medium", 256, 384, 6, 6}};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "all";
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config")) which = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::max(1, std::atoi(argv[i + 1]));
  }
  xgrad::set_num_threads(1);
  for (const Config& c : kConfigs) {
    if (which != "all" && which != c.name) continue;
    xgrad::manual_seed(123);
    xgrad::nn::GPTModel model({.vocab_size = 96,
                               .context_length = c.ctx,
                               .emb_dim = c.emb,
                               .n_heads = c.heads,
                               .n_layers = c.layers,
                               .drop_rate = 0.1});
    const xgrad::Tensor prompt = xgrad::tensor<int64_t>({{5, 17, 42, 3}});
    const int64_t new_tokens = c.ctx - 4;
    for (bool cache : {true, false}) {
      double best = 1e30;
      std::vector<int64_t> ids;
      for (int r = 0; r < repeat; ++r) {
        const double t0 = thread_cpu_seconds();
        xgrad::nn::GenerateOptions greedy;  // temperature 0
        greedy.use_kv_cache = cache;
        xgrad::Tensor out = model.generate(prompt, new_tokens, greedy);
        best = std::min(best, thread_cpu_seconds() - t0);
        ids = out.to_vector<int64_t>();
      }
      std::printf(
          "{\"framework\": \"xgrad\", \"config\": \"%s\", \"kv_cache\": %s, "
          "\"new_tokens\": %lld, \"cpu_s\": %.4f, \"tokens_per_s\": %.1f, "
          "\"last_id\": %lld}\n",
          c.name, cache ? "true" : "false", static_cast<long long>(new_tokens), best,
          double(new_tokens) / best, static_cast<long long>(ids.back()));
      std::fflush(stdout);
    }
  }
  return 0;
}
