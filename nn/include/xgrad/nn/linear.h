// xgrad/nn/linear.h: Linear (torch.nn.Linear), the smallest complete module.
#pragma once
#include <cstdint>
#include <string>

#include "xgrad/nn/module.h"

namespace xgrad::nn {

// y = x @ weight.T + bias over the last dim: (*, in_features) -> (*, out_features).
// weight (out_features, in_features) ~ U(-1/sqrt(in), 1/sqrt(in)) via kaiming_uniform_(a=sqrt(5)),
// then bias ~ U(-1/sqrt(in), 1/sqrt(in)): the same draws, in the same order, as torch.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t in_features;
  int64_t out_features;
  Tensor weight;  // (out_features, in_features)
  Tensor bias;    // (out_features), undefined when bias = false
};

}  // namespace xgrad::nn
