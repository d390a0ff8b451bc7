// nn/src/linear.cpp: Linear.
// reference: torch/nn/modules/linear.py (reset_parameters)
#include "xgrad/nn/linear.h"

#include <cmath>

#include "xgrad/nn/init.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features(in_features), out_features(out_features) {
  if (in_features < 0 || out_features < 0)
    fail("Linear", "in_features and out_features must be >= 0, got ", in_features, " and ", out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (bias) this->bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(in), 1/sqrt(in)); drawn before the bias
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = in_features;
    const double bound = fan_in > 0 ? 1 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) {
  if (input.dim() < 1 || input.size(-1) != in_features)
    fail("Linear", "expected input with last dim in_features=", in_features, ", got shape ", input.shape());
  return linear(input, weight, bias);  // (*, in) -> (*, out)
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

}  // namespace xgrad::nn
