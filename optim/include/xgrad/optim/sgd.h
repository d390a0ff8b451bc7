// xgrad/optim/sgd.h: stochastic gradient descent with momentum, dampening, Nesterov and
// L2 weight decay, as torch.optim.SGD.
//
//   SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once
#include <optional>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

// torch.optim.SGD's options. torch 1.13 has no default lr (it is required); we use 1e-3,
// torch 2.2's default.
struct SGDGroupOptions;
struct SGDOptions {
  using Group = SGDGroupOptions;
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  operator SGDGroupOptions() const;  // every option set
};

// The options one SGD param group sets; the unset ones come from the optimizer's defaults.
struct SGDGroupOptions {
  std::optional<double> lr{};
  std::optional<double> momentum{};
  std::optional<double> dampening{};
  std::optional<double> weight_decay{};
  std::optional<bool> nesterov{};

  // `defaults` with this group's set options in place of theirs
  SGDOptions over(SGDOptions defaults) const {
    if (lr) defaults.lr = *lr;
    if (momentum) defaults.momentum = *momentum;
    if (dampening) defaults.dampening = *dampening;
    if (weight_decay) defaults.weight_decay = *weight_decay;
    if (nesterov) defaults.nesterov = *nesterov;
    return defaults;
  }
};

inline SGDOptions::operator SGDGroupOptions() const {
  return {lr, momentum, dampening, weight_decay, nesterov};
}

struct SGDParamState {
  Tensor momentum_buffer;  // undefined until the first step with momentum != 0
};

class SGD : public OptimizerBase<SGDOptions, SGDParamState> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  // Groups' unset options come from `defaults` (torch: SGD(param_groups, lr=..., ...)).
  explicit SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});
  const char* name() const override { return "SGD"; }
  void step() override;

 protected:
  void validate(const SGDOptions& o) const override;
  std::map<std::string, double> options_to_map(const SGDOptions& o) const override;
  SGDOptions options_from_map(const std::map<std::string, double>& m, const char* op) const override;
  std::map<std::string, Tensor> state_to_map(const SGDParamState& s) const override;
  SGDParamState state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                               const SGDOptions& options, int64_t index, const char* op) const override;
};

}  // namespace xgrad::optim
