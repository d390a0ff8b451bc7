// optim/src/lr_scheduler.cpp: the schedulers of lr_scheduler.h, each a closed-form lr_at().
//
// reference: torch/optim/lr_scheduler.py (torch 1.13): LambdaLR, StepLR._get_closed_form_lr,
// ConstantLR._get_closed_form_lr; nanoGPT train.py get_lr(it) for the warmup + cosine.
#include <cmath>
#include <numbers>
#include <utility>

#include "xgrad/optim/lr_scheduler.h"

namespace xgrad::optim {

// ---------------------------------------------------------------- LRScheduler
LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::apply() {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(lr_at(last_epoch_, base));
  if (lrs.size() != optimizer_->num_param_groups())
    fail("LRScheduler", "the optimizer has ", optimizer_->num_param_groups(), " param groups but had ",
         lrs.size(), " when the scheduler was created");
  for (std::size_t g = 0; g < lrs.size(); ++g)
    if (!(lrs[g] >= 0))
      fail("LRScheduler", "the schedule gives lr ", lrs[g], " for param group ", g, " at step ", last_epoch_);
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_->set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
}

void LRScheduler::step() {
  ++last_epoch_;
  try {
    apply();
  } catch (...) {
    --last_epoch_;
    throw;
  }
}

void LRScheduler::load_state_dict(int64_t last_epoch) {
  if (last_epoch < 0) fail("LRScheduler.load_state_dict", "the step count must be >= 0, got ", last_epoch);
  const int64_t previous = last_epoch_;
  last_epoch_ = last_epoch;
  try {
    apply();
  } catch (...) {
    last_epoch_ = previous;
    throw;
  }
}

// ---------------------------------------------------------------- LambdaLR
LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  if (!lr_lambda_) fail("LambdaLR", "lr_lambda is empty");
  apply();
}

double LambdaLR::lr_at(int64_t epoch, double base_lr) const { return base_lr * lr_lambda_(epoch); }

// ---------------------------------------------------------------- StepLR
StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) fail("StepLR", "step_size must be positive, got ", step_size);
  if (!(gamma >= 0)) fail("StepLR", "gamma must be >= 0, got ", gamma);
  apply();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

// ---------------------------------------------------------------- ConstantLR
ConstantLR::ConstantLR(Optimizer& optimizer, ConstantLROptions options)
    : LRScheduler(optimizer), options_(options) {
  if (!(options.factor >= 0 && options.factor <= 1))
    fail("ConstantLR", "factor must be between 0 and 1, got ", options.factor);
  if (options.total_iters < 0) fail("ConstantLR", "total_iters must be >= 0, got ", options.total_iters);
  apply();
}

double ConstantLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * (options_.factor + (epoch >= options_.total_iters ? 1.0 - options_.factor : 0.0));
}

// ---------------------------------------------------------------- nanoGPT warmup (+ cosine)
static double warmup_lr(int64_t it, int64_t warmup_iters, double base_lr) {
  // nanoGPT: learning_rate * (it + 1) / (warmup_iters + 1)
  return base_lr * static_cast<double>(it + 1) / static_cast<double>(warmup_iters + 1);
}

LinearWarmupLR::LinearWarmupLR(Optimizer& optimizer, LinearWarmupLROptions options)
    : LRScheduler(optimizer), options_(options) {
  if (options.warmup_iters < 0)
    fail("LinearWarmupLR", "warmup_iters must be >= 0, got ", options.warmup_iters);
  apply();
}

double LinearWarmupLR::lr_at(int64_t epoch, double base_lr) const {
  return epoch < options_.warmup_iters ? warmup_lr(epoch, options_.warmup_iters, base_lr) : base_lr;
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, WarmupCosineLROptions options)
    : LRScheduler(optimizer), options_(options) {
  if (options.warmup_iters < 0)
    fail("WarmupCosineLR", "warmup_iters must be >= 0, got ", options.warmup_iters);
  if (options.lr_decay_iters <= options.warmup_iters)
    fail("WarmupCosineLR", "lr_decay_iters (", options.lr_decay_iters,
         ") must be greater than warmup_iters (", options.warmup_iters, ")");
  if (!(options.min_lr >= 0)) fail("WarmupCosineLR", "min_lr must be >= 0, got ", options.min_lr);
  apply();
}

double WarmupCosineLR::lr_at(int64_t it, double base_lr) const {
  const auto& o = options_;
  // 1) linear warmup for warmup_iters steps
  if (it < o.warmup_iters) return warmup_lr(it, o.warmup_iters, base_lr);
  // 2) after lr_decay_iters, min_lr
  if (it > o.lr_decay_iters) return o.min_lr;
  // 3) in between, cosine decay from base_lr down to min_lr
  const double decay_ratio =
      static_cast<double>(it - o.warmup_iters) / static_cast<double>(o.lr_decay_iters - o.warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio));  // 1 -> 0
  return o.min_lr + coeff * (base_lr - o.min_lr);
}

}  // namespace xgrad::optim
