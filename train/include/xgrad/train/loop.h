// xgrad/train/loop.h: the pieces of nanoGPT's train.py loop around a model, its optimizer and
// its batches (a checkpoint of them is checkpoint.h's):
//
//   optim::AdamW opt(train::weight_decay_groups(model.parameters()), {.lr = 6e-4, .weight_decay = 0.1});
//   train::StepTimer timer(/*budget_s=*/240);
//   while (step < steps && !timer.budget_spent()) {
//     timer.start();
//     ... forward, backward, opt.step() ...
//     const double dt = timer.stop();   // and timer.tokens_per_second(n), timer.eta(steps - step)
//     if (step % eval_interval == 0)
//       val = train::estimate_loss(model, val_windows, {.batch_size = 16, .iters = 20, .seed = 3},
//                                  [&](const data::Example& b) {
//                                    return cross_entropy_last_dim(model(b[0]), b[1]).item();
//                                  });
//   }
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "xgrad/data/dataset.h"
#include "xgrad/nn/module.h"
#include "xgrad/optim/adam.h"

namespace xgrad::train {

// nanoGPT's configure_optimizers: the parameters of two or more dimensions (weights,
// embeddings) decay, the others (biases, norm weights) do not: {decay, {no_decay,
// weight_decay 0}}, each in the order of `params`.
std::vector<optim::AdamW::ParamGroup> weight_decay_groups(const std::vector<Tensor>& params);

// ---- nanoGPT's estimate_loss(): the evaluation, the mean loss over a fixed set of random batches
struct EstimateLossOptions {
  int64_t batch_size = 1;
  int64_t iters = 1;  // batches
  uint64_t seed = 0;  // of the generator that draws them
};

// The mean of loss(batch) over o.iters batches of o.batch_size examples of `dataset`, drawn with
// replacement by a data::RandomSampler from Generator(o.seed) (so every call sees the same
// batches), with `model` in eval mode (its mode is restored) and under NoGradGuard.
double estimate_loss(nn::Module& model, std::shared_ptr<const data::Dataset> dataset,
                     const EstimateLossOptions& o, const std::function<double(const data::Example&)>& loss);

// ---- a training loop's clock: the time budget, the steps' durations (an exponential moving
// average, as a progress line shows them), tokens per second and the time left
class StepTimer {
 public:
  explicit StepTimer(double budget_s = 0);  // seconds from now; 0: no budget
  bool budget_spent() const;
  void start();   // a step begins
  double stop();  // it ends: its seconds, also folded into the average (0.9 old + 0.1 new)
  double average() const { return average_; }
  double tokens_per_second(double tokens_per_step) const;
  // The average step's time for `steps_left` steps, at most the budget left (when there is one).
  double eta(int64_t steps_left) const;

 private:
  using clock = std::chrono::steady_clock;
  double since(clock::time_point t) const { return std::chrono::duration<double>(clock::now() - t).count(); }
  double budget_s_;
  clock::time_point begin_ = clock::now(), step_begin_ = begin_;
  double average_ = 0;
};

}  // namespace xgrad::train
