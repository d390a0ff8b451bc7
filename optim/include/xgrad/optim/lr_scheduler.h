// xgrad/optim/lr_scheduler.h: learning-rate schedules, as torch.optim.lr_scheduler.
//
// A scheduler owns nothing but its step count (torch's last_epoch): it remembers each
// group's lr when it is created (torch's initial_lr, the "base lr") and, on construction and
// on every step(), sets each group's lr to the closed-form schedule at that count. Call
// scheduler.step() after optimizer.step(), as in torch:
//
//   AdamW opt(params, {.lr = 6e-4, .weight_decay = 0.1});
//   WarmupCosineLR sched(opt, {.warmup_iters = 2000, .lr_decay_iters = 600000, .min_lr = 6e-5});
//   for (int64_t it = 0; it < max_iters; ++it) {   // iteration `it` runs with lr get_lr(it)
//     ...; opt.step(); opt.zero_grad(); sched.step();
//   }
//
// Resuming: create the optimizer and scheduler as at the start (so the base lrs are the
// configured ones), then opt.load_state_dict(...) and sched.load_state_dict(saved_count).
// The scheduler keeps a pointer to the optimizer, which must outlive it.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;

  void step();  // ++last_epoch, then set the groups' lrs
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  // The whole state is the step count.
  int64_t state_dict() const { return last_epoch_; }
  void load_state_dict(int64_t last_epoch);  // sets the groups' lrs for that count
  // The schedule in closed form: the lr of a group with base lr `base_lr` at step `epoch`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  void apply();  // sets every group's lr to lr_at(last_epoch_, base); derived ctors call it

 private:
  Optimizer* optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = 0;
};

// torch's LambdaLR: base_lr * lr_lambda(epoch).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::function<double(int64_t)> lr_lambda_;
};

// torch's StepLR: base_lr * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// torch's ConstantLR: base_lr * factor for the first total_iters steps, then base_lr.
// A constant schedule (the lr as configured, forever) is ConstantLR(opt, {.factor = 1.0}).
struct ConstantLROptions {
  double factor = 1.0 / 3.0;
  int64_t total_iters = 5;
};
class ConstantLR : public LRScheduler {
 public:
  explicit ConstantLR(Optimizer& optimizer, ConstantLROptions options = {});
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  ConstantLROptions options_;
};

// nanoGPT's warmup: base_lr * (it + 1) / (warmup_iters + 1) while it < warmup_iters, then
// base_lr.
struct LinearWarmupLROptions {
  int64_t warmup_iters = 0;
};
class LinearWarmupLR : public LRScheduler {
 public:
  LinearWarmupLR(Optimizer& optimizer, LinearWarmupLROptions options);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  LinearWarmupLROptions options_;
};

// nanoGPT's get_lr(it) (train.py): linear warmup as LinearWarmupLR, then cosine decay from
// base_lr down to min_lr at lr_decay_iters, min_lr after. min_lr is absolute (the same for
// every group), as in nanoGPT.
struct WarmupCosineLROptions {
  int64_t warmup_iters = 0;
  int64_t lr_decay_iters = 0;  // must be > warmup_iters
  double min_lr = 0.0;
};
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, WarmupCosineLROptions options);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  WarmupCosineLROptions options_;
};

}  // namespace xgrad::optim
