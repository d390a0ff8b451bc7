// xgrad/optim/lr_scheduler.h: learning-rate schedules, as torch.optim.lr_scheduler.
//
// A scheduler owns nothing but its step count (torch's last_epoch): it remembers each
// group's lr when it is created (torch's initial_lr, the "base lr") and, on construction and
// on every step(), sets each group's lr to the schedule at that count. Most schedules are a
// closed form of the count (lr_at); CosineAnnealingLR and LinearLR are torch's chainable
// form, each step computed from the groups' current lrs with torch's rounding, so they give
// torch's lrs to the bit. Call scheduler.step() after optimizer.step(), as in torch:
//
//   AdamW opt(params, {.lr = 6e-4, .weight_decay = 0.1});
//   WarmupCosineLR sched(opt, {.warmup_iters = 2000, .lr_decay_iters = 600000, .min_lr = 6e-5});
//   for (int64_t it = 0; it < max_iters; ++it) {   // iteration `it` runs with lr get_lr(it)
//     ...; opt.step(); opt.zero_grad(); sched.step();
//   }
//
// Resuming: create the optimizer and scheduler as at the start (so the base lrs are the
// configured ones), then opt.load_state_dict(...) and sched.load_state_dict(saved_count)
// (a chainable schedule continues from the lrs the optimizer's state restored).
// The scheduler keeps a pointer to the optimizer, which must outlive it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;

  virtual void step();  // ++last_epoch, then set the groups' lrs (get_lr())
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  // The whole state is the step count.
  int64_t state_dict() const { return last_epoch_; }
  // Closed-form schedules set the groups' lrs for that count; chainable ones keep the lrs
  // the optimizer's load_state_dict restored (torch keeps them in the optimizer's state).
  virtual void load_state_dict(int64_t last_epoch);
  // The schedule in closed form: the lr of a group with base lr `base_lr` at step `epoch`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  void apply();  // sets every group's lr to closed_form(); closed-form derived ctors call it
  // torch's get_lr(): the groups' lrs at last_epoch_, by default closed_form(); chainable
  // schedules compute them from group_lrs().
  virtual std::vector<double> get_lr() const { return closed_form(); }
  // torch's _get_closed_form_lr(): lr_at(last_epoch_, base) for every group
  virtual std::vector<double> closed_form() const;
  std::vector<double> group_lrs() const;  // the optimizer's current lrs
  void set_lrs(std::vector<double> lrs);  // checks them, sets the groups' lrs and get_last_lr()
  void set_last_epoch(int64_t epoch) { last_epoch_ = epoch; }
  // torch's step(epoch): jumps to that count and sets the closed form's lrs there (unchanged
  // on error); SequentialLR starts each later scheduler with step_to(0).
  virtual void step_to(int64_t epoch);
  Optimizer& optimizer() const { return *optimizer_; }
  friend class SequentialLR;  // resets its schedulers' base lrs and counts, as torch does

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

// torch's CosineAnnealingLR (chainable form, as torch's step()): from the base lr down to
// eta_min over T_max steps, and back up over the next T_max (a cosine of period 2 T_max).
// lr_at is torch's closed form, eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2,
// which equals the chainable one up to rounding.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;
  void load_state_dict(int64_t last_epoch) override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// torch's LinearLR (chainable form): the lr times a factor that goes linearly from
// start_factor to end_factor over total_iters steps, then stays at end_factor.
struct LinearLROptions {
  double start_factor = 1.0 / 3.0;
  double end_factor = 1.0;
  int64_t total_iters = 5;
};
class LinearLR : public LRScheduler {
 public:
  explicit LinearLR(Optimizer& optimizer, LinearLROptions options = {});
  double lr_at(int64_t epoch, double base_lr) const override;
  void load_state_dict(int64_t last_epoch) override;

 protected:
  std::vector<double> get_lr() const override;

 private:
  LinearLROptions options_;
};

// torch's SequentialLR: schedulers[0] until milestones[0], schedulers[1] until milestones[1],
// ... Make the schedulers in their order, then this one: as torch, it resets the groups' lrs
// to their initial lrs (those before schedulers[0] was made, or a OneCycleLR's own) and gives
// every scheduler the base lrs torch's would have; at a milestone the next scheduler starts
// from its closed form at count 0. The schedulers are not owned and must outlive it; step
// only this one.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers, std::vector<int64_t> milestones);
  void step() override;
  // Restores every scheduler's count from this one's (the lrs come from the optimizer).
  void load_state_dict(int64_t last_epoch) override;
  // The active scheduler's closed form at that count.
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  std::size_t active(int64_t epoch) const;  // index of the scheduler that runs `epoch`
  int64_t start(std::size_t index) const;   // the count at which scheduler `index` starts
  std::vector<LRScheduler*> schedulers_;
  std::vector<int64_t> milestones_;
};

// torch's OneCycleLR: the 1cycle policy. The lr goes from max_lr / div_factor up to max_lr
// over pct_start of total_steps, then down to max_lr / div_factor / final_div_factor
// (three_phase: back to the initial lr over as many steps, then down to the minimum), by
// cosine or linear annealing; with cycle_momentum the momentum (SGD, RMSprop) or beta1
// (Adam, AdamW) goes the opposite way between max_momentum and base_momentum. total_steps,
// or else epochs and steps_per_epoch (their product), is required. As in torch, the count may reach
// total_steps (the last phase extrapolated one step; a negative lr there, which linear
// annealing can give, is 0 here) and stepping past it throws.
struct OneCycleLROptions {
  std::optional<int64_t> total_steps{};
  std::optional<int64_t> epochs{};
  std::optional<int64_t> steps_per_epoch{};
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // "cos" or "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};
class OneCycleLR : public LRScheduler {
 public:
  // max_lr: one for every group, or one per group
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, OneCycleLROptions options);
  OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleLROptions options);
  void step() override;
  void load_state_dict(int64_t last_epoch) override;  // sets the lrs and momenta of that count
  int64_t total_steps() const { return total_steps_; }
  // The lr of a group whose max lr is base_lr * div_factor (step() uses each group's own).
  double lr_at(int64_t epoch, double base_lr) const override;

 protected:
  std::vector<double> get_lr() const override;
  std::vector<double> closed_form() const override { return get_lr(); }
  void step_to(int64_t epoch) override;  // the lrs and momenta of that count

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;              // 0 initial, 1 max, 2 min lr
    int start_momentum, end_momentum;  // 0 base_momentum, 1 max_momentum
  };
  // (lr, momentum) of a group with lrs {initial, max, min} at step `epoch`
  std::pair<double, double> at(int64_t epoch, const double (&lrs)[3]) const;
  void set_momenta(int64_t epoch);
  double anneal(double start, double end, double pct) const;
  OneCycleLROptions options_;
  int64_t total_steps_ = 0;
  std::vector<Phase> phases_;
  std::vector<double> max_lrs_;
};

// torch's ReduceLROnPlateau: multiplies every group's lr by factor (not below min_lr) when
// the metric passed to step(metric) has not improved for more than patience steps, then
// waits cooldown steps. Improvement: mode "min" (lower is better) or "max"; threshold_mode
// "rel" (better than best * (1 -+ threshold)) or "abs" (best -+ threshold). A reduction
// smaller than eps is skipped.
struct ReduceLROnPlateauOptions {
  std::string mode = "min";
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  std::string threshold_mode = "rel";
  int64_t cooldown = 0;
  double min_lr = 0.0;
  std::vector<double> min_lrs{};  // one per group; when set, used instead of min_lr
  double eps = 1e-8;
};
// Its state besides the options (torch's state_dict keys).
struct ReduceLROnPlateauState {
  int64_t last_epoch = 0;
  double best = 0.0;
  int64_t num_bad_epochs = 0;
  int64_t cooldown_counter = 0;
};
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  bool in_cooldown() const { return state_.cooldown_counter > 0; }
  ReduceLROnPlateauState state_dict() const { return state_; }
  void load_state_dict(const ReduceLROnPlateauState& state);

 private:
  bool is_better(double a, double best) const;
  Optimizer* optimizer_;
  ReduceLROnPlateauOptions options_;
  std::vector<double> min_lrs_;
  ReduceLROnPlateauState state_;
  std::vector<double> last_lr_;
};

}  // namespace xgrad::optim
