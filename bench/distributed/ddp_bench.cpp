// bench/distributed/ddp_bench.cpp: training tokens/s of the GPT presets with
// DistributedDataParallel, the global batch split over the ranks.
//
//   build/bench/distributed/ddp_bench --config small --threads 2           1 process x 2 threads
//   mpirun -np 2 build/bench/distributed/ddp_bench --config small --threads 1   2 ranks x 1
//
// Configs as gpt_bench (bench/gpt_bench.cpp; batch = the global batch): tiny, small, medium.
// One step = forward on this rank's rows, cross-entropy, backward (the gradient all-reduce
// runs at its end), AdamW (lr 3e-4, weight decay 0.1), zero_grad(set_to_none). --warmup
// untimed steps, then --steps timed ones; a step's time is the slowest rank's. Prints one
// JSON line (rank 0): the median step, tokens/s of the global batch, and the median time
// of the gradient all-reduce alone (the buckets of this model, timed after the run).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xgrad/distributed.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/parallel.h"
#include "xgrad/random.h"

namespace dist = xgrad::distributed;
using xgrad::Tensor;

namespace {

struct Config {
  xgrad::nn::GPTConfig gpt;
  int64_t batch;
};

// keep in sync with bench/gpt_bench.cpp and bench/pytorch/ddp_bench.py
Config config_named(const std::string& name) {
  auto make = [](int64_t t, int64_t e, int64_t h, int64_t l, int64_t b) {
    return Config{{.vocab_size = 96,
                   .context_length = t,
                   .emb_dim = e,
                   .n_heads = h,
                   .n_layers = l,
                   .drop_rate = 0.1,
                   .qkv_bias = false},
                  b};
  };
  if (name == "tiny") return make(64, 64, 4, 2, 32);
  if (name == "small") return make(128, 128, 4, 4, 16);
  if (name == "medium") return make(256, 384, 6, 6, 8);
  std::fprintf(stderr, "ddp_bench: unknown --config '%s' (tiny, small, medium)\n", name.c_str());
  std::exit(2);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "tiny";
  int threads = 1, warmup = 3, steps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--config") config = v;
    else if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--warmup") warmup = std::atoi(v.c_str());
    else if (a == "--steps") steps = std::atoi(v.c_str());
  }
  dist::init_process_group();
  const int n = dist::get_world_size(), rank = dist::get_rank();
  xgrad::set_num_threads(threads);
  const Config c = config_named(config);
  const int64_t B = c.batch, T = c.gpt.context_length, V = c.gpt.vocab_size;
  if (B % n != 0) {
    if (rank == 0)
      std::fprintf(stderr, "ddp_bench: batch %lld does not divide over %d ranks\n", (long long)B, n);
    dist::destroy_process_group();
    return 2;
  }
  xgrad::manual_seed(0);
  auto model = std::make_shared<xgrad::nn::GPTModel>(c.gpt);
  dist::DistributedDataParallel ddp(model);
  xgrad::optim::AdamW opt(model->parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  std::vector<std::pair<Tensor, Tensor>> batches;  // this rank's rows of 4 global batches
  for (int i = 0; i < 4; ++i) {
    Tensor x = xgrad::randint(0, V, {B, T});
    Tensor y = xgrad::randint(0, V, {B, T});
    batches.emplace_back(x.narrow(0, rank * B / n, B / n).contiguous(),
                         y.narrow(0, rank * B / n, B / n).contiguous());
  }
  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    auto& [x, y] = batches[static_cast<std::size_t>(i) % batches.size()];
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    Tensor loss = xgrad::cross_entropy_last_dim(ddp.forward(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad(true);
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i >= warmup) times.push_back(t);
  }
  // the all-reduce alone: reduce_gradients() on the model's gradients, as after backward
  for (auto& p : model->parameters()) p.set_grad(xgrad::zeros_like(p));
  std::vector<double> reduce_times;
  for (int i = 0; i < 10; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    ddp.reduce_gradients();
    double t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    reduce_times.push_back(t);
  }
  if (rank == 0) {
    const double step = median(times);
    int64_t bucket_bytes = 0;
    std::string sizes;
    for (int64_t b : ddp.bucket_bytes()) {
      bucket_bytes += b;
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
    }
    std::printf(
        "{\"impl\": \"xgrad\", \"config\": \"%s\", \"ranks\": %d, \"threads\": %d, "
        "\"global_batch\": %lld, \"step_ms\": %.3f, \"tokens_per_s\": %.1f, "
        "\"params\": %lld, \"buckets\": %zu, \"bucket_bytes\": %lld, \"bucket_sizes\": [%s], "
        "\"allreduce_ms\": %.3f}\n",
        config.c_str(), n, threads, (long long)B, step * 1e3, double(B * T) / step,
        (long long)model->num_parameters(), ddp.bucket_bytes().size(), (long long)bucket_bytes, sizes.c_str(),
        n > 1 ? median(reduce_times) * 1e3 : 0.0);
  }
  dist::destroy_process_group();
  return 0;
}
