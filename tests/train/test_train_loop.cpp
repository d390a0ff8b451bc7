// tests/train/test_train_loop.cpp: xgrad/train/loop.h, the pieces of nanoGPT's loop:
//   weight_decay_groups: the matrices decay, the vectors do not, in order;
//   estimate_loss: the mean over the batches a RandomSampler with replacement draws from
//     Generator(seed) (the same at every call), in eval mode (restored), recording nothing;
//   StepTimer: the budget is spent once its seconds have passed (never without one), the
//     average follows 0.9 old + 0.1 new from the first step's time, throughput and time left
//     come from the average, the time left capped by the budget.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "xgrad/autograd.h"
#include "xgrad/data.h"
#include "xgrad/nn/linear.h"
#include "xgrad/ops.h"
#include "xgrad/random.h"
#include "xgrad/train/loop.h"

namespace xgrad::train {
namespace {

TEST(WeightDecayGroups, MatricesDecayVectorsDoNot) {
  nn::Linear a(3, 2), b(2, 4);
  const std::vector<Tensor> params = {a.weight, a.bias, b.weight, b.bias};
  const auto groups = weight_decay_groups(params);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].params.size(), 2u);
  EXPECT_EQ(groups[0].params[0].impl(), a.weight.impl());
  EXPECT_EQ(groups[0].params[1].impl(), b.weight.impl());
  EXPECT_FALSE(groups[0].options.weight_decay.has_value());  // the optimizer's default
  ASSERT_EQ(groups[1].params.size(), 2u);
  EXPECT_EQ(groups[1].params[1].impl(), b.bias.impl());
  EXPECT_EQ(groups[1].options.weight_decay, 0.0);
  optim::AdamW opt(groups, {.weight_decay = 0.1});
  EXPECT_EQ(opt.options(0).weight_decay, 0.1);
  EXPECT_EQ(opt.options(1).weight_decay, 0.0);
}

TEST(EstimateLoss, IsTheMeanOverTheSampledBatchesInEvalModeWithoutGradients) {
  manual_seed(3);
  nn::Linear model(4, 1);
  Generator data_gen(0);
  const auto rows = std::make_shared<data::TensorDataset>(std::vector<Tensor>{randn({12, 4}, &data_gen)});
  int calls = 0;
  auto loss = [&](const data::Example& b) {
    EXPECT_FALSE(model.is_training());
    EXPECT_FALSE(GradMode::is_enabled());
    ++calls;
    return model(b.at(0)).pow(2.0).mean().item();
  };

  // by hand: one DataLoader pass over a RandomSampler with replacement, both drawing from
  // Generator(42), 5 batches of 3 rows
  Generator gen(42);
  auto sampler = std::make_shared<data::RandomSampler>(
      12, data::RandomSamplerOptions{.replacement = true, .num_samples = 15, .generator = &gen});
  double want = 0;
  int batches = 0;
  for (const data::Example& b :
       data::DataLoader(rows, {.batch_size = 3, .sampler = sampler, .generator = &gen})) {
    want += model(b.at(0)).pow(2.0).mean().item() / 5;
    ++batches;
  }
  ASSERT_EQ(batches, 5);

  model.train();
  const double got = estimate_loss(model, rows, {.batch_size = 3, .iters = 5, .seed = 42}, loss);
  EXPECT_EQ(calls, 5);
  EXPECT_DOUBLE_EQ(got, want);
  EXPECT_TRUE(model.is_training());  // restored
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_FALSE(model.weight.grad().defined());
  EXPECT_EQ(estimate_loss(model, rows, {.batch_size = 3, .iters = 5, .seed = 42}, loss),
            got);  // the same batches
  EXPECT_NE(estimate_loss(model, rows, {.batch_size = 3, .iters = 5, .seed = 43}, loss), got);
  model.eval();
  estimate_loss(model, rows, {.batch_size = 3, .iters = 5, .seed = 42}, loss);
  EXPECT_FALSE(model.is_training());  // restored to eval
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(StepTimer, BudgetAverageThroughputAndTimeLeft) {
  StepTimer timer(0.05);
  StepTimer unlimited;
  EXPECT_FALSE(timer.budget_spent());
  timer.start();
  sleep_ms(20);
  const double first = timer.stop();
  EXPECT_GE(first, 0.02);
  EXPECT_EQ(timer.average(), first);  // the first step is the average
  timer.start();
  sleep_ms(40);
  const double second = timer.stop();
  EXPECT_DOUBLE_EQ(timer.average(), 0.9 * first + 0.1 * second);
  EXPECT_DOUBLE_EQ(timer.tokens_per_second(1000), 1000 / timer.average());
  EXPECT_TRUE(timer.budget_spent());  // 60 ms > 50 ms
  EXPECT_EQ(timer.eta(100), 0.0);     // capped by the budget, which is spent
  EXPECT_FALSE(unlimited.budget_spent());
  unlimited.start();
  sleep_ms(10);
  unlimited.stop();
  EXPECT_DOUBLE_EQ(unlimited.eta(7), 7 * unlimited.average());
}

}  // namespace
}  // namespace xgrad::train
