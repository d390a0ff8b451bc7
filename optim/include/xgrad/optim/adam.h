// xgrad/optim/adam.h: Adam (L2 weight decay added to the gradient) and AdamW (decoupled
// weight decay), as torch.optim.Adam / torch.optim.AdamW, with amsgrad.
//
//   AdamW opt(model.parameters(), {.lr = 3e-4, .betas = {0.9, 0.95}, .weight_decay = 0.1});
//
// Each step is one fused pass over the parameter, its gradient and both moments, with
// torch's single-tensor formulas and rounding order: Adam::step in adam.cpp, for both.
#pragma once
#include <optional>
#include <utility>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

// The options one Adam / AdamW param group sets; the unset ones come from the optimizer's
// defaults: AdamW({{decay}, {no_decay, {.weight_decay = 0.0}}}, {.lr = 3e-4}).
struct AdamGroupOptions {
  std::optional<double> lr{};
  std::optional<std::pair<double, double>> betas{};
  std::optional<double> eps{};
  std::optional<double> weight_decay{};
  std::optional<bool> amsgrad{};

  // `defaults` with this group's set options in place of theirs
  template <class O>
  O over(O defaults) const {
    if (lr) defaults.lr = *lr;
    if (betas) defaults.betas = *betas;
    if (eps) defaults.eps = *eps;
    if (weight_decay) defaults.weight_decay = *weight_decay;
    if (amsgrad) defaults.amsgrad = *amsgrad;
    return defaults;
  }
};

// torch.optim.Adam's options and defaults.
struct AdamOptions {
  using Group = AdamGroupOptions;
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  operator Group() const { return {lr, betas, eps, weight_decay, amsgrad}; }  // all set
};

// torch.optim.AdamW's options and defaults (weight_decay 1e-2).
struct AdamWOptions {
  using Group = AdamGroupOptions;
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  operator Group() const { return {lr, betas, eps, weight_decay, amsgrad}; }  // all set
  operator AdamOptions() const { return {lr, betas, eps, weight_decay, amsgrad}; }
};

struct AdamParamState {
  int64_t step = 0;       // steps taken by this parameter
  Tensor exp_avg;         // first moment; undefined until the first step
  Tensor exp_avg_sq;      // second moment
  Tensor max_exp_avg_sq;  // amsgrad only
};

// torch.optim.Adam, and (through AdamW below) torch.optim.AdamW: one implementation, all of
// it in adam.cpp, where the two differ in one line (where the weight decay goes).
class Adam : public OptimizerBase<AdamOptions, AdamParamState> {
 public:
  explicit Adam(std::vector<Tensor> params, AdamOptions options = {});
  // Groups' unset options come from `defaults` (torch: Adam(param_groups, lr=..., ...)).
  explicit Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});
  const char* name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  void step() override;

 protected:
  // decoupled: AdamW's weight decay (param *= 1 - lr * wd) instead of Adam's L2 penalty
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled);
  void validate(const AdamOptions& o) const override;
  std::map<std::string, double> options_to_map(const AdamOptions& o) const override;
  AdamOptions options_from_map(const std::map<std::string, double>& m, const char* op) const override;
  std::map<std::string, Tensor> state_to_map(const AdamParamState& s) const override;
  AdamParamState state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                const AdamOptions& options, int64_t index, const char* op) const override;

 private:
  bool decoupled_ = false;
};

// torch.optim.AdamW: Adam with decoupled weight decay, and weight_decay 1e-2 by default. Its
// step is Adam::step (adam.cpp); its options(g) and defaults() are AdamOptions.
class AdamW : public Adam {
 public:
  explicit AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  explicit AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});
};

}  // namespace xgrad::optim
