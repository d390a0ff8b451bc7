// examples/extending/rmsnorm.cpp: RMSNorm (see rmsnorm.h). forward() is a composition of
// xgrad ops, so its backward comes from the tape: no closure to write.
#include "rmsnorm.h"

#include <limits>
#include <sstream>

namespace ext {

using namespace xgrad;

RMSNorm::RMSNorm(int64_t normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(normalized_shape), eps(eps), elementwise_affine(elementwise_affine) {
  if (normalized_shape <= 0) fail("RMSNorm", "normalized_shape must be positive, got ", normalized_shape);
  if (elementwise_affine) weight = register_parameter("weight", empty({normalized_shape}));
  reset_parameters();
}

void RMSNorm::reset_parameters() {
  if (weight.defined()) nn::init::ones_(weight);
}

// y = x / sqrt(mean(x^2, dim=-1) + eps) * weight, with eps unset meaning the machine epsilon
// of x's dtype (torch.finfo(x.dtype).eps)
Tensor RMSNorm::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != normalized_shape)
    fail("RMSNorm", "expected input with last dim ", normalized_shape, ", got shape ", x.shape());
  const double e = eps                     ? *eps
                   : x.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                           : std::numeric_limits<float>::epsilon();
  Tensor inv_rms = rsqrt(mean(x.pow(2.0), {-1}, /*keepdim=*/true) + e);  // (*, 1)
  Tensor y = x * inv_rms;                                                // (*, C)
  return weight.defined() ? y * weight : y;
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << "(" << normalized_shape << ",), eps=" << (eps ? nn::repr_float(*eps) : "None")
     << ", elementwise_affine=" << (elementwise_affine ? "True" : "False");
  return os.str();
}

}  // namespace ext
