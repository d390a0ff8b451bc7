// tests/distributed/test_ddp.cpp: DistributedDataParallel on a small GPT. Rank 0's weights
// reach every rank; gradients after backward are the mean of the ranks' own gradients; few
// buckets; no_sync accumulates locally; parameters stay bit-identical over 50 AdamW steps
// with dropout on; and the equivalence the trainer relies on: N ranks on shards of a global
// batch train like one process on the whole batch (per-step losses and final parameters).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "xgrad/autograd.h"
#include "xgrad/distributed.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/random.h"

namespace dist = xgrad::distributed;
using xgrad::Tensor;
using xgrad::nn::GPTConfig;
using xgrad::nn::GPTModel;

namespace {

GPTConfig small_config(double drop_rate) {
  return {.vocab_size = 32,
          .context_length = 8,
          .emb_dim = 16,
          .n_heads = 2,
          .n_layers = 2,
          .drop_rate = drop_rate,
          .qkv_bias = false};
}

std::shared_ptr<GPTModel> make_model(uint64_t seed, double drop_rate = 0.0) {
  xgrad::manual_seed(seed);
  return std::make_shared<GPTModel>(small_config(drop_rate));
}

// A global batch of (rows, 8) inputs and targets, the same on every rank for a given step.
std::pair<Tensor, Tensor> global_batch(int64_t step, int64_t rows) {
  xgrad::Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor tokens = xgrad::randint(0, 32, {rows, 9}, &gen);
  return {tokens.slice(1, 0, 8).contiguous(), tokens.slice(1, 1, 9).contiguous()};
}

// This rank's rows of the global batch.
Tensor shard(const Tensor& t) {
  const int64_t per = t.size(0) / dist::get_world_size();
  return t.narrow(0, per * dist::get_rank(), per).contiguous();
}

// Every rank's copy of t, bit for bit equal to rank 0's?
bool same_on_every_rank(const Tensor& t) {
  std::vector<Tensor> all;
  dist::all_gather(all, t.detach().contiguous());
  bool same = true;
  for (const Tensor& other : all)
    same = same && std::memcmp(other.contiguous().raw_data_ptr(), all[0].contiguous().raw_data_ptr(),
                               static_cast<std::size_t>(t.numel()) * xgrad::itemsize(t.dtype())) == 0;
  return same;
}

// The relative difference of a tensor: max |a - b| / max |b| (0 when both are all zeros).
// Element by element, |a - b| / |b| is dominated by entries near zero, where float32
// gradients summed in another order differ in their last bits; elementwise_rel_diff below
// reports that measure too, with a floor.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to(xgrad::kFloat64).contiguous().to_vector<double>();
  std::vector<double> y = b.to(xgrad::kFloat64).contiguous().to_vector<double>();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff == 0 ? 0 : diff / std::max(scale, 1e-30);
}

// max over elements of |a - b| / max(|b|, floor)
double elementwise_rel_diff(const Tensor& a, const Tensor& b, double floor) {
  std::vector<double> x = a.to(xgrad::kFloat64).contiguous().to_vector<double>();
  std::vector<double> y = b.to(xgrad::kFloat64).contiguous().to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) / std::max(std::abs(y[i]), floor));
  return worst;
}

}  // namespace

TEST(DistributedDataParallel, BroadcastsRankZeroWeightsAndBuffers) {
  auto model = make_model(100 + static_cast<uint64_t>(dist::get_rank()));  // different per rank
  auto ddp = std::make_shared<dist::DistributedDataParallel>(model);
  auto reference = make_model(100);  // rank 0's
  for (const auto& [name, p] : model->named_parameters()) EXPECT_TRUE(same_on_every_rank(p)) << name;
  auto ref_params = reference->parameters();
  auto params = model->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_EQ(max_rel_diff(params[i], ref_params[i]), 0.0) << i;
  // a bool buffer (the causal masks) made different per rank comes back as rank 0's
  if (dist::get_rank() != 0) {
    auto model2 = make_model(100);
    model2->buffers().front().fill_(1.0);
    dist::DistributedDataParallel again(model2);
    EXPECT_EQ(model2->buffers().front().to(xgrad::kInt64).sum().item<int64_t>(),
              reference->buffers().front().to(xgrad::kInt64).sum().item<int64_t>());
  } else {
    auto model2 = make_model(100);
    dist::DistributedDataParallel again(model2);
  }
  for (const auto& b : model->buffers()) EXPECT_TRUE(same_on_every_rank(b.to(xgrad::kInt64)));
  // torch's names: the module is the child "module"
  EXPECT_EQ(ddp->named_parameters().front().first, "module." + model->named_parameters().front().first);
}

TEST(DistributedDataParallel, GradientsAreTheMeanOverRanksInFewBuckets) {
  const int n = dist::get_world_size();
  for (double cap_mb : {25.0, 0.002}) {  // one bucket; several (2 KB each)
    auto model = make_model(7);
    dist::DistributedDataParallel ddp(model, {.bucket_cap_mb = cap_mb});
    auto local = make_model(7);  // the same weights, trained without DDP
    auto [x, y] = global_batch(0, 2 * n);
    // each rank its own data: its shard
    xgrad::cross_entropy_last_dim(ddp.forward(shard(x)), shard(y)).backward();
    xgrad::cross_entropy_last_dim(local->forward(shard(x)), shard(y)).backward();
    auto params = model->parameters();
    auto local_params = local->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor mean = local_params[i].grad().clone();
      dist::all_reduce(mean, dist::ReduceOp::Avg);  // one call per parameter: the slow way
      ASSERT_TRUE(params[i].grad().defined());
      EXPECT_LE(max_rel_diff(params[i].grad(), mean), 1e-6) << "param " << i << " cap " << cap_mb;
      if (n > 1) EXPECT_TRUE(same_on_every_rank(params[i].grad()));
    }
    std::vector<int64_t> buckets = ddp.bucket_bytes();
    int64_t total = 0;
    for (int64_t b : buckets) total += b;
    EXPECT_EQ(total, model->num_parameters() * 4);
    if (cap_mb == 25.0) EXPECT_EQ(buckets.size(), 1u);
    else {
      EXPECT_GT(buckets.size(), 1u);
      EXPECT_LT(buckets.size(), params.size());  // packed, not one call per parameter
    }
  }
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenReducesTheSum) {
  const int n = dist::get_world_size();
  auto model = make_model(8);
  dist::DistributedDataParallel ddp(model);
  auto local = make_model(8);
  auto [x, y] = global_batch(1, 2 * n);
  auto [x2, y2] = global_batch(2, 2 * n);
  {
    auto guard = ddp.no_sync();
    xgrad::cross_entropy_last_dim(ddp.forward(shard(x)), shard(y)).backward();
  }
  xgrad::cross_entropy_last_dim(local->forward(shard(x)), shard(y)).backward();
  auto params = model->parameters();
  auto local_params = local->parameters();
  // inside no_sync: this rank's own gradient, not reduced
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(max_rel_diff(params[i].grad(), local_params[i].grad()), 0.0) << i;
  if (n > 1) {
    bool all_same = true;
    for (const Tensor& p : params) all_same = all_same && same_on_every_rank(p.grad());
    EXPECT_FALSE(all_same) << "no_sync reduced the gradients";
  }
  // outside: the accumulated sum of both micro-batches is averaged
  xgrad::cross_entropy_last_dim(ddp.forward(shard(x2)), shard(y2)).backward();
  xgrad::cross_entropy_last_dim(local->forward(shard(x2)), shard(y2)).backward();
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor mean = local_params[i].grad().clone();
    dist::all_reduce(mean, dist::ReduceOp::Avg);
    EXPECT_LE(max_rel_diff(params[i].grad(), mean), 1e-6) << i;
  }
}

TEST(DistributedDataParallel, ParametersBitIdenticalAfter50StepsWithDropout) {
  // dropout on, seeded per rank: the ranks' forwards differ, only the averaged gradients
  // keep the replicas together
  auto model = make_model(9, /*drop_rate=*/0.1);
  dist::DistributedDataParallel ddp(model);
  xgrad::manual_seed(500 + static_cast<uint64_t>(dist::get_rank()));
  xgrad::optim::AdamW opt(model->parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  for (int64_t step = 0; step < 50; ++step) {
    auto [x, y] = global_batch(step, 2 * dist::get_world_size());
    xgrad::cross_entropy_last_dim(ddp.forward(shard(x)), shard(y)).backward();
    opt.step();
    opt.zero_grad();
  }
  for (const auto& [name, p] : model->named_parameters()) EXPECT_TRUE(same_on_every_rank(p)) << name;
}

// The trainer's claim: with dropout 0, N ranks on shards of the global batch = 1 process on
// the whole batch. Every rank also runs the single-process reference itself (no MPI), so
// both runs are in this one test.
TEST(DistributedDataParallel, ShardsOfTheGlobalBatchTrainLikeOneProcess) {
  const int64_t global = 6;  // divisible by 1, 2 and 3 ranks
  auto model = make_model(11);
  auto reference = make_model(11);
  dist::DistributedDataParallel ddp(model);
  xgrad::optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  xgrad::optim::AdamW ref_opt(reference->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  double worst_loss = 0, worst_param = 0, worst_element = 0;
  for (int64_t step = 0; step < 50; ++step) {
    auto [x, y] = global_batch(step, global);
    Tensor loss = xgrad::cross_entropy_last_dim(ddp.forward(shard(x)), shard(y));
    loss.backward();
    Tensor reported = loss.detach().clone();  // the trainer's logged loss: the ranks' mean
    dist::all_reduce(reported, dist::ReduceOp::Avg);
    opt.step();
    opt.zero_grad();

    Tensor ref_loss = xgrad::cross_entropy_last_dim(reference->forward(x), y);
    ref_loss.backward();
    ref_opt.step();
    ref_opt.zero_grad();
    worst_loss = std::max(worst_loss, max_rel_diff(reported, ref_loss));
  }
  auto params = model->parameters();
  auto ref_params = reference->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    worst_param = std::max(worst_param, max_rel_diff(params[i], ref_params[i]));
    worst_element = std::max(worst_element, elementwise_rel_diff(params[i], ref_params[i], 1e-2));
  }
  if (dist::get_rank() == 0)
    std::printf(
        "[equivalence] %d ranks vs 1 process, 50 AdamW steps: worst relative difference "
        "%.3g (per-step loss), %.3g (final parameters, max|a-b| / max|b| per tensor); "
        "element by element |a-b| / max(|b|, 1e-2): %.3g\n",
        dist::get_world_size(), worst_loss, worst_param, worst_element);
  EXPECT_LE(worst_loss, 1e-5);
  EXPECT_LE(worst_param, 1e-5);
}
