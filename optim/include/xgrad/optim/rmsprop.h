// xgrad/optim/rmsprop.h: RMSprop, with momentum, the centered variant and L2 weight decay,
// as torch.optim.RMSprop.
//
//   RMSprop opt(model.parameters(), {.lr = 1e-3, .alpha = 0.9, .momentum = 0.9, .centered = true});
#pragma once
#include <optional>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

// torch.optim.RMSprop's options and defaults.
struct RMSpropGroupOptions;
struct RMSpropOptions {
  using Group = RMSpropGroupOptions;
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  operator RMSpropGroupOptions() const;  // every option set
};

// The options one RMSprop param group sets; the unset ones come from the optimizer's defaults.
struct RMSpropGroupOptions {
  std::optional<double> lr{};
  std::optional<double> alpha{};
  std::optional<double> eps{};
  std::optional<double> weight_decay{};
  std::optional<double> momentum{};
  std::optional<bool> centered{};

  // `defaults` with this group's set options in place of theirs
  RMSpropOptions over(RMSpropOptions defaults) const {
    if (lr) defaults.lr = *lr;
    if (alpha) defaults.alpha = *alpha;
    if (eps) defaults.eps = *eps;
    if (weight_decay) defaults.weight_decay = *weight_decay;
    if (momentum) defaults.momentum = *momentum;
    if (centered) defaults.centered = *centered;
    return defaults;
  }
};

inline RMSpropOptions::operator RMSpropGroupOptions() const {
  return {lr, alpha, eps, weight_decay, momentum, centered};
}

struct RMSpropParamState {
  int64_t step = 0;        // steps taken by this parameter
  Tensor square_avg;       // running mean of grad^2; undefined until the first step
  Tensor momentum_buffer;  // momentum > 0 only
  Tensor grad_avg;         // centered only: running mean of grad
};

class RMSprop : public OptimizerBase<RMSpropOptions, RMSpropParamState> {
 public:
  explicit RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  // Groups' unset options come from `defaults` (torch: RMSprop(param_groups, lr=..., ...)).
  explicit RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {});
  const char* name() const override { return "RMSprop"; }
  void step() override;

 protected:
  void validate(const RMSpropOptions& o) const override;
  std::map<std::string, double> options_to_map(const RMSpropOptions& o) const override;
  RMSpropOptions options_from_map(const std::map<std::string, double>& m, const char* op) const override;
  std::map<std::string, Tensor> state_to_map(const RMSpropParamState& s) const override;
  RMSpropParamState state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                   const RMSpropOptions& options, int64_t index,
                                   const char* op) const override;
};

}  // namespace xgrad::optim
