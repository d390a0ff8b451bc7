// optim/src/lr_scheduler.cpp: the schedulers of lr_scheduler.h: closed-form lr_at()s, and
// torch's chainable CosineAnnealingLR / LinearLR, SequentialLR, OneCycleLR and
// ReduceLROnPlateau with torch's formulas in torch's operation order (Python rounds every
// operation: products go through `mul`, so none is fused into a following addition).
//
// reference: torch/optim/lr_scheduler.py (torch 1.13): LambdaLR, StepLR._get_closed_form_lr,
// ConstantLR._get_closed_form_lr, CosineAnnealingLR.get_lr, LinearLR.get_lr, SequentialLR,
// OneCycleLR.get_lr, ReduceLROnPlateau; nanoGPT train.py get_lr(it) for the warmup + cosine.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include "xgrad/optim/adam.h"
#include "xgrad/optim/lr_scheduler.h"
#include "xgrad/optim/rmsprop.h"
#include "xgrad/optim/sgd.h"

namespace xgrad::optim {

namespace {

// a * b rounded on its own, as Python rounds it: never contracted into a later addition
double mul(double a, double b) {
  double r = a * b;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(r));
#endif
  return r;
}

constexpr double kPi = std::numbers::pi;

}  // namespace

// ---------------------------------------------------------------- LRScheduler
LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (std::size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

std::vector<double> LRScheduler::closed_form() const {
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(lr_at(last_epoch_, base));
  return lrs;
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> lrs;
  for (std::size_t g = 0; g < optimizer_->num_param_groups(); ++g) lrs.push_back(optimizer_->lr(g));
  return lrs;
}

void LRScheduler::set_lrs(std::vector<double> lrs) {
  if (lrs.size() != optimizer_->num_param_groups())
    fail("LRScheduler", "the optimizer has ", optimizer_->num_param_groups(), " param groups but had ",
         lrs.size(), " when the scheduler was created");
  for (std::size_t g = 0; g < lrs.size(); ++g)
    if (!(lrs[g] >= 0))
      fail("LRScheduler", "the schedule gives lr ", lrs[g], " for param group ", g, " at step ", last_epoch_);
  for (std::size_t g = 0; g < lrs.size(); ++g) optimizer_->set_lr(g, lrs[g]);
  last_lr_ = std::move(lrs);
}

void LRScheduler::apply() { set_lrs(closed_form()); }

void LRScheduler::step() {
  ++last_epoch_;
  try {
    set_lrs(get_lr());
  } catch (...) {
    --last_epoch_;
    throw;
  }
}

void LRScheduler::step_to(int64_t epoch) {
  const int64_t previous = last_epoch_;
  last_epoch_ = epoch;
  try {
    set_lrs(closed_form());
  } catch (...) {
    last_epoch_ = previous;
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

// ---------------------------------------------------------------- CosineAnnealingLR
CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0) fail("CosineAnnealingLR", "T_max must be positive, got ", T_max);
  if (!std::isfinite(eta_min)) fail("CosineAnnealingLR", "eta_min must be finite, got ", eta_min);
  set_lrs(get_lr());
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  const int64_t e = last_epoch();
  const double T = static_cast<double>(T_max_);
  std::vector<double> lrs = group_lrs();
  if (e == 0) return lrs;
  if ((e - 1 - T_max_) % (2 * T_max_) == 0) {  // the step after a minimum: restart upwards
    for (std::size_t g = 0; g < lrs.size(); ++g)
      lrs[g] = lrs[g] + mul(base_lrs()[g] - eta_min_, 1 - std::cos(kPi / T)) / 2;
    return lrs;
  }
  const double ratio = (1 + std::cos(mul(kPi, static_cast<double>(e)) / T)) /
                       (1 + std::cos(mul(kPi, static_cast<double>(e - 1)) / T));
  for (double& lr : lrs) lr = mul(ratio, lr - eta_min_) + eta_min_;
  return lrs;
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double c = 1 + std::cos(mul(kPi, static_cast<double>(epoch)) / static_cast<double>(T_max_));
  return eta_min_ + mul(base_lr - eta_min_, c) / 2;
}

void CosineAnnealingLR::load_state_dict(int64_t last_epoch) {
  if (last_epoch < 0)
    fail("CosineAnnealingLR.load_state_dict", "the step count must be >= 0, got ", last_epoch);
  set_last_epoch(last_epoch);
  set_lrs(group_lrs());
}

// ---------------------------------------------------------------- LinearLR
LinearLR::LinearLR(Optimizer& optimizer, LinearLROptions options)
    : LRScheduler(optimizer), options_(options) {
  if (!(options.start_factor >= 0 && options.start_factor <= 1))
    fail("LinearLR", "starting multiplicative factor expected to be between 0 and 1, got ",
         options.start_factor);
  if (!(options.end_factor >= 0 && options.end_factor <= 1))
    fail("LinearLR", "ending multiplicative factor expected to be between 0 and 1, got ", options.end_factor);
  if (options.total_iters < 0) fail("LinearLR", "total_iters must be >= 0, got ", options.total_iters);
  set_lrs(get_lr());
}

std::vector<double> LinearLR::get_lr() const {
  const auto& o = options_;
  const int64_t e = last_epoch();
  std::vector<double> lrs = group_lrs();
  if (e == 0) {
    for (double& lr : lrs) lr = lr * o.start_factor;
    return lrs;
  }
  if (e > o.total_iters) return lrs;
  const double delta = o.end_factor - o.start_factor;
  const double denom =
      mul(static_cast<double>(o.total_iters), o.start_factor) + mul(static_cast<double>(e - 1), delta);
  const double factor = 1. + delta / denom;
  for (double& lr : lrs) lr = lr * factor;
  return lrs;
}

double LinearLR::lr_at(int64_t epoch, double base_lr) const {
  const auto& o = options_;
  if (o.total_iters == 0) fail("LinearLR", "the closed form needs total_iters > 0");
  const double progress = static_cast<double>(std::min(o.total_iters, epoch));
  return base_lr *
         (o.start_factor + mul(o.end_factor - o.start_factor, progress) / static_cast<double>(o.total_iters));
}

void LinearLR::load_state_dict(int64_t last_epoch) {
  if (last_epoch < 0) fail("LinearLR.load_state_dict", "the step count must be >= 0, got ", last_epoch);
  set_last_epoch(last_epoch);
  set_lrs(group_lrs());
}

// ---------------------------------------------------------------- SequentialLR
SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<LRScheduler*> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    if (schedulers_[i] == nullptr) fail("SequentialLR", "scheduler ", i, " is null");
    if (schedulers_[i]->optimizer_ != &optimizer)
      fail("SequentialLR", "expects all schedulers to belong to the same optimizer, but got scheduler ", i,
           " to be different than the optimizer passed in");
  }
  if (milestones_.size() + 1 != schedulers_.size())
    fail("SequentialLR",
         "expects number of schedulers provided to be one more than the number of milestone points, "
         "but got number of schedulers ",
         schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  for (std::size_t i = 1; i < milestones_.size(); ++i)
    if (milestones_[i] <= milestones_[i - 1])
      fail("SequentialLR", "milestones must be increasing, got ", milestones_[i - 1], " then ",
           milestones_[i]);
  // torch's base lrs are the groups' initial_lr when each scheduler was made: the lr before
  // the first one, unless a OneCycleLR made before replaced it by its own (max_lr /
  // div_factor). torch then resets the lrs to the last initial_lr, undoes each scheduler's
  // initial step and redoes the first's.
  std::vector<double> initial = schedulers_[0]->base_lrs_;
  for (LRScheduler* s : schedulers_) {
    if (dynamic_cast<OneCycleLR*>(s) != nullptr) initial = s->base_lrs_;
    else s->base_lrs_ = initial;
    s->last_epoch_ -= 1;
  }
  base_lrs_ = initial;
  for (std::size_t g = 0; g < initial.size(); ++g) optimizer.set_lr(g, initial[g]);
  schedulers_[0]->step();
  set_lrs(schedulers_[0]->get_last_lr());
}

std::size_t SequentialLR::active(int64_t epoch) const {
  return static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                                  milestones_.begin());
}

int64_t SequentialLR::start(std::size_t index) const { return index == 0 ? 0 : milestones_[index - 1]; }

void SequentialLR::step() {
  const int64_t e = last_epoch() + 1;
  const std::size_t idx = active(e);
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == e) s.step_to(0);  // torch: scheduler.step(0)
  else s.step();
  set_last_epoch(e);
  set_lrs(s.get_last_lr());
}

void SequentialLR::load_state_dict(int64_t last_epoch) {
  if (last_epoch < 0) fail("SequentialLR.load_state_dict", "the step count must be >= 0, got ", last_epoch);
  const std::size_t idx = active(last_epoch);
  schedulers_[idx]->load_state_dict(last_epoch - start(idx));
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    if (i < idx) schedulers_[i]->last_epoch_ = milestones_[i] - 1 - start(i);
    else if (i > idx) schedulers_[i]->last_epoch_ = -1;
  set_last_epoch(last_epoch);
  set_lrs(group_lrs());
}

double SequentialLR::lr_at(int64_t epoch, double base_lr) const {
  const std::size_t idx = active(epoch);
  return schedulers_[idx]->lr_at(epoch - start(idx), base_lr);
}

// ---------------------------------------------------------------- OneCycleLR
namespace {

// Sets group g's momentum (SGD, RMSprop) or beta1 (Adam, AdamW); false for an optimizer
// with neither.
bool set_momentum(Optimizer& opt, std::size_t g, double m) {
  if (auto* sgd = dynamic_cast<SGD*>(&opt)) sgd->options(g).momentum = m;
  else if (auto* adam = dynamic_cast<Adam*>(&opt)) adam->options(g).betas.first = m;
  else if (auto* rmsprop = dynamic_cast<RMSprop*>(&opt)) rmsprop->options(g).momentum = m;
  else return false;
  return true;
}

int64_t one_cycle_total_steps(const OneCycleLROptions& o) {
  if (!o.total_steps && !o.epochs && !o.steps_per_epoch)
    fail("OneCycleLR", "you must define either total_steps OR (epochs AND steps_per_epoch)");
  if (o.total_steps) {
    if (*o.total_steps <= 0)
      fail("OneCycleLR", "expected positive integer total_steps, but got ", *o.total_steps);
    return *o.total_steps;
  }
  if (!o.epochs || *o.epochs <= 0)
    fail("OneCycleLR", "expected positive integer epochs, but got ",
         o.epochs ? std::to_string(*o.epochs) : "none");
  if (!o.steps_per_epoch || *o.steps_per_epoch <= 0)
    fail("OneCycleLR", "expected positive integer steps_per_epoch, but got ",
         o.steps_per_epoch ? std::to_string(*o.steps_per_epoch) : "none");
  return *o.epochs * *o.steps_per_epoch;
}

// Checks everything, then sets each group's lr to its initial lr (max_lr / div_factor: the
// scheduler's base lr, torch's initial_lr) and its momentum to max_momentum.
Optimizer& one_cycle_setup(Optimizer& opt, std::vector<double>& max_lr, const OneCycleLROptions& o) {
  one_cycle_total_steps(o);
  if (!(o.pct_start >= 0 && o.pct_start <= 1))
    fail("OneCycleLR", "expected float between 0 and 1 pct_start, but got ", o.pct_start);
  if (o.anneal_strategy != "cos" && o.anneal_strategy != "linear")
    fail("OneCycleLR", "anneal_strategy must be one of 'cos' or 'linear', instead got '", o.anneal_strategy,
         "'");
  const std::size_t groups = opt.num_param_groups();
  if (max_lr.size() == 1) max_lr.assign(groups, max_lr[0]);
  if (max_lr.size() != groups)
    fail("OneCycleLR", "expected ", groups, " values for max_lr, got ", max_lr.size());
  if (o.cycle_momentum && !set_momentum(opt, 0, o.max_momentum))
    fail("OneCycleLR", "optimizer must support momentum with `cycle_momentum` option enabled (", opt.name(),
         " has neither momentum nor betas)");
  for (std::size_t g = 0; g < groups; ++g) {
    opt.set_lr(g, max_lr[g] / o.div_factor);
    if (o.cycle_momentum) set_momentum(opt, g, o.max_momentum);
  }
  return opt;
}

}  // namespace

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleLROptions options)
    : OneCycleLR(optimizer, std::vector<double>{max_lr}, std::move(options)) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, OneCycleLROptions options)
    : LRScheduler(one_cycle_setup(optimizer, max_lr, options)),
      options_(std::move(options)),
      total_steps_(one_cycle_total_steps(options_)),
      max_lrs_(std::move(max_lr)) {
  const double total = static_cast<double>(total_steps_);
  const double pct = options_.pct_start;
  enum { kInitial = 0, kMax = 1, kMin = 2 };  // lrs
  enum { kBaseMomentum = 0, kMaxMomentum = 1 };
  if (options_.three_phase)
    phases_ = {{mul(pct, total) - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
               {mul(2 * pct, total) - 2, kMax, kInitial, kBaseMomentum, kMaxMomentum},
               {total - 1, kInitial, kMin, kMaxMomentum, kMaxMomentum}};
  else
    phases_ = {{mul(pct, total) - 1, kInitial, kMax, kMaxMomentum, kBaseMomentum},
               {total - 1, kMax, kMin, kBaseMomentum, kMaxMomentum}};
  set_lrs(get_lr());
  set_momenta(0);
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.anneal_strategy == "cos") return end + mul((start - end) / 2.0, std::cos(mul(kPi, pct)) + 1);
  return mul(end - start, pct) + start;
}

std::pair<double, double> OneCycleLR::at(int64_t epoch, const double (&lrs)[3]) const {
  if (epoch > total_steps_)
    fail("OneCycleLR", "tried to step ", epoch + 1, " times; the specified number of total steps is ",
         total_steps_);
  const double step = static_cast<double>(epoch);
  double start_step = 0;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const Phase& ph = phases_[i];
    if (step <= ph.end_step || i + 1 == phases_.size()) {
      const double pct = (step - start_step) / (ph.end_step - start_step);
      const double lr = anneal(lrs[ph.start_lr], lrs[ph.end_lr], pct);
      const double momenta[2] = {options_.base_momentum, options_.max_momentum};
      return {lr, anneal(momenta[ph.start_momentum], momenta[ph.end_momentum], pct)};
    }
    start_step = ph.end_step;
  }
  return {lrs[0], options_.max_momentum};  // not reached: the last phase always matches
}

std::vector<double> OneCycleLR::get_lr() const {
  std::vector<double> lrs;
  for (std::size_t g = 0; g < max_lrs_.size(); ++g) {
    const double initial = base_lrs()[g];
    const double bounds[3] = {initial, max_lrs_[g], initial / options_.final_div_factor};
    // torch allows one step past the last phase (count == total_steps), extrapolating it:
    // linear annealing then goes below min_lr, possibly below 0, which an lr cannot be here
    lrs.push_back(std::max(at(last_epoch(), bounds).first, 0.0));
  }
  return lrs;
}

void OneCycleLR::set_momenta(int64_t epoch) {
  if (!options_.cycle_momentum) return;
  for (std::size_t g = 0; g < max_lrs_.size(); ++g) {
    const double initial = base_lrs()[g];
    const double bounds[3] = {initial, max_lrs_[g], initial / options_.final_div_factor};
    set_momentum(optimizer(), g, at(epoch, bounds).second);
  }
}

double OneCycleLR::lr_at(int64_t epoch, double base_lr) const {
  const double bounds[3] = {base_lr, base_lr * options_.div_factor, base_lr / options_.final_div_factor};
  return at(epoch, bounds).first;
}

void OneCycleLR::step() { step_to(last_epoch() + 1); }

void OneCycleLR::step_to(int64_t epoch) {
  const int64_t previous = last_epoch();
  set_last_epoch(epoch);
  try {
    set_lrs(get_lr());
    set_momenta(epoch);
  } catch (...) {
    set_last_epoch(previous);
    throw;
  }
}

void OneCycleLR::load_state_dict(int64_t last_epoch) {
  if (last_epoch < 0 || last_epoch > total_steps_)
    fail("OneCycleLR.load_state_dict", "the step count must be in [0, ", total_steps_, "], got ", last_epoch);
  step_to(last_epoch);
}

// ---------------------------------------------------------------- ReduceLROnPlateau
ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(&optimizer), options_(std::move(options)) {
  const auto& o = options_;
  if (!(o.factor < 1.0)) fail("ReduceLROnPlateau", "factor should be < 1.0, got ", o.factor);
  const std::size_t groups = optimizer.num_param_groups();
  if (!o.min_lrs.empty() && o.min_lrs.size() != groups)
    fail("ReduceLROnPlateau", "expected ", groups, " min_lrs, got ", o.min_lrs.size());
  min_lrs_ = o.min_lrs.empty() ? std::vector<double>(groups, o.min_lr) : o.min_lrs;
  if (o.mode != "min" && o.mode != "max") fail("ReduceLROnPlateau", "mode '", o.mode, "' is unknown");
  if (o.threshold_mode != "rel" && o.threshold_mode != "abs")
    fail("ReduceLROnPlateau", "threshold mode '", o.threshold_mode, "' is unknown");
  state_.best =
      o.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  for (std::size_t g = 0; g < groups; ++g) last_lr_.push_back(optimizer.lr(g));
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  const auto& o = options_;
  if (o.mode == "min" && o.threshold_mode == "rel") return a < best * (1. - o.threshold);
  if (o.mode == "min") return a < best - o.threshold;
  if (o.threshold_mode == "rel") return a > best * (o.threshold + 1.);
  return a > best + o.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  ReduceLROnPlateauState& s = state_;
  s.last_epoch += 1;
  if (is_better(metric, s.best)) {
    s.best = metric;
    s.num_bad_epochs = 0;
  } else {
    s.num_bad_epochs += 1;
  }
  if (in_cooldown()) {
    s.cooldown_counter -= 1;
    s.num_bad_epochs = 0;  // bad epochs in cooldown do not count
  }
  if (s.num_bad_epochs > options_.patience) {
    for (std::size_t g = 0; g < optimizer_->num_param_groups(); ++g) {
      const double old_lr = optimizer_->lr(g);
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[g]);
      if (old_lr - new_lr > options_.eps) optimizer_->set_lr(g, new_lr);
    }
    s.cooldown_counter = options_.cooldown;
    s.num_bad_epochs = 0;
  }
  last_lr_.clear();
  for (std::size_t g = 0; g < optimizer_->num_param_groups(); ++g) last_lr_.push_back(optimizer_->lr(g));
}

void ReduceLROnPlateau::load_state_dict(const ReduceLROnPlateauState& state) {
  if (state.last_epoch < 0 || state.num_bad_epochs < 0 || state.cooldown_counter < 0)
    fail("ReduceLROnPlateau.load_state_dict", "counts must be >= 0, got last_epoch ", state.last_epoch,
         ", num_bad_epochs ", state.num_bad_epochs, ", cooldown_counter ", state.cooldown_counter);
  state_ = state;
  last_lr_.clear();
  for (std::size_t g = 0; g < optimizer_->num_param_groups(); ++g) last_lr_.push_back(optimizer_->lr(g));
}

}  // namespace xgrad::optim
