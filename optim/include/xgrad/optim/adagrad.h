// xgrad/optim/adagrad.h: Adagrad, with lr decay, an initial accumulator value and L2 weight
// decay, as torch.optim.Adagrad.
//
//   Adagrad opt(model.parameters(), {.lr = 0.1, .lr_decay = 1e-4, .initial_accumulator_value = 0.1});
#pragma once
#include <optional>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

// torch.optim.Adagrad's options and defaults.
struct AdagradGroupOptions;
struct AdagradOptions {
  using Group = AdagradGroupOptions;
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  operator AdagradGroupOptions() const;  // every option set
};

// The options one Adagrad param group sets; the unset ones come from the optimizer's defaults.
struct AdagradGroupOptions {
  std::optional<double> lr{};
  std::optional<double> lr_decay{};
  std::optional<double> weight_decay{};
  std::optional<double> initial_accumulator_value{};
  std::optional<double> eps{};

  // `defaults` with this group's set options in place of theirs
  AdagradOptions over(AdagradOptions defaults) const {
    if (lr) defaults.lr = *lr;
    if (lr_decay) defaults.lr_decay = *lr_decay;
    if (weight_decay) defaults.weight_decay = *weight_decay;
    if (initial_accumulator_value) defaults.initial_accumulator_value = *initial_accumulator_value;
    if (eps) defaults.eps = *eps;
    return defaults;
  }
};

inline AdagradOptions::operator AdagradGroupOptions() const {
  return {lr, lr_decay, weight_decay, initial_accumulator_value, eps};
}

// As in torch, every parameter given to the constructor has its state from the start: step 0
// and sum filled with initial_accumulator_value (a parameter added later by add_param_group
// gets it at its first step).
struct AdagradParamState {
  int64_t step = 0;  // steps taken by this parameter
  Tensor sum;        // running sum of grad^2
};

class Adagrad : public OptimizerBase<AdagradOptions, AdagradParamState> {
 public:
  explicit Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  // Groups' unset options come from `defaults` (torch: Adagrad(param_groups, lr=..., ...)).
  explicit Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = {});
  const char* name() const override { return "Adagrad"; }
  void step() override;

 protected:
  void validate(const AdagradOptions& o) const override;
  std::map<std::string, double> options_to_map(const AdagradOptions& o) const override;
  AdagradOptions options_from_map(const std::map<std::string, double>& m, const char* op) const override;
  std::map<std::string, Tensor> state_to_map(const AdagradParamState& s) const override;
  AdagradParamState state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                   const AdagradOptions& options, int64_t index,
                                   const char* op) const override;

 private:
  void init_state();  // the state of every parameter without one: step 0, sum full of the initial value
};

}  // namespace xgrad::optim
