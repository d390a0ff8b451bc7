// xgrad/optim/sgd.h: stochastic gradient descent with momentum, dampening, Nesterov and
// L2 weight decay, as torch.optim.SGD.
//
//   SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once
#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

// torch.optim.SGD's options. torch 1.13 has no default lr (it is required); we use 1e-3,
// torch 2.2's default.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

struct SGDParamState {
  Tensor momentum_buffer;  // undefined until the first step with momentum != 0
};

class SGD : public OptimizerBase<SGDOptions, SGDParamState> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<ParamGroup> groups);
  const char* name() const override { return "SGD"; }

 protected:
  void step_impl() override;
  void validate(const SGDOptions& o) const override;
  std::map<std::string, double> options_to_map(const SGDOptions& o) const override;
  SGDOptions options_from_map(const std::map<std::string, double>& m,
                                const char* op) const override;
  std::map<std::string, Tensor> state_to_map(const SGDParamState& s) const override;
  SGDParamState state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                               const SGDOptions& options, int64_t index,
                                const char* op) const override;
};

}  // namespace xgrad::optim
