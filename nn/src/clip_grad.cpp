// nn/src/clip_grad.cpp: clip_grad_norm_ and clip_grad_value_.
//
// reference: torch/nn/utils/clip_grad.py (torch 1.13):
//   norms = [norm(g, p) for g in grads]; total = norm(stack(norms), p)   (inf: max of maxes)
//   clip_coef = max_norm / (total + 1e-6); g *= clamp(clip_coef, max=1)   (NaN passes)
// The per-gradient norms accumulate in double (torch: in the gradient's dtype).
#include <cmath>
#include <limits>

#include "clip_grad_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/nn/clip_grad.h"
#include "xgrad/ops.h"

namespace xgrad::nn::utils {

namespace {

double tensor_norm(const Tensor& g, double p) {
  const Tensor c = g.contiguous();
  if (c.dtype() == kFloat32) return kernels::vector_norm(c.data_ptr<float>(), c.numel(), p);
  if (c.dtype() == kFloat64) return kernels::vector_norm(c.data_ptr<double>(), c.numel(), p);
  fail("clip_grad_norm_", "gradients must be float32 or float64, got ", dtype_name(c.dtype()));
}

std::vector<Tensor> defined_grads(const char* op, const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].defined()) fail(op, "parameter ", i, " is an undefined tensor");
    Tensor g = parameters[i].grad();
    if (!g.defined()) continue;
    if (!g.is_floating_point())
      fail(op, "the gradient of parameter ", i, " is ", dtype_name(g.dtype()),
           ", expected float32 or float64");
    grads.push_back(g);
  }
  return grads;
}

// g *= coef in place (in g's dtype, like torch's mul_ by a 0-d tensor).
void scale_(Tensor g, double coef) {
  if (!g.is_contiguous()) {
    g.mul_(coef);
    return;
  }
  if (g.dtype() == kFloat32) kernels::scale(g.data_ptr<float>(), g.numel(), static_cast<float>(coef));
  else kernels::scale(g.data_ptr<double>(), g.numel(), coef);
  g.bump_version();
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  const char* op = "clip_grad_norm_";
  if (!(max_norm >= 0)) fail(op, "max_norm must be >= 0, got ", max_norm);
  if (std::isnan(norm_type)) fail(op, "norm_type must be a number or inf, got nan");
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = defined_grads(op, parameters);
  if (grads.empty()) return 0.0;

  std::vector<double> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(tensor_norm(g, norm_type));
  const double total = kernels::vector_norm(norms.data(), static_cast<int64_t>(norms.size()), norm_type);
  if (error_if_nonfinite && !std::isfinite(total))
    fail(op, "the total norm of order ", norm_type, " for gradients from `parameters` is ", "non-finite (",
         total, "), so it cannot be clipped. To disable this error and scale ",
         "the gradients by the non-finite norm anyway, set error_if_nonfinite=false");

  const double clip_coef = max_norm / (total + 1e-6);
  // torch.clamp(clip_coef, max=1.0) keeps a NaN
  const double coef = std::isnan(clip_coef) ? clip_coef : std::min(clip_coef, 1.0);
  if (coef != 1.0)  // multiplying by exactly 1 changes nothing
    for (const Tensor& g : grads) scale_(g, coef);
  return total;
}

double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  const char* op = "clip_grad_value_";
  if (!(clip_value >= 0)) fail(op, "clip_value must be >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (Tensor g : defined_grads(op, parameters)) {
    if (!g.is_contiguous()) {
      g.copy_(clamp(g, -clip_value, clip_value));
      continue;
    }
    if (g.dtype() == kFloat32)
      kernels::clamp_values(g.data_ptr<float>(), g.numel(), static_cast<float>(-clip_value),
                            static_cast<float>(clip_value));
    else kernels::clamp_values(g.data_ptr<double>(), g.numel(), -clip_value, clip_value);
    g.bump_version();
  }
}

void clip_grad_value_(const Tensor& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}

}  // namespace xgrad::nn::utils
