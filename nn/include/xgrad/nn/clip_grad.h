// xgrad/nn/clip_grad.h: gradient clipping, as torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_ (torch/nn/utils/clip_grad.py; here in the nn layer, like torch's). Parameters without a
// gradient are skipped; gradients are modified in place (their version counters are bumped).
//
//   double norm = xgrad::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
#pragma once
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad::nn::utils {

// Scales all gradients by min(1, max_norm / (total_norm + 1e-6)), total_norm being the
// norm_type-norm of all gradients together (norm_type may be INFINITY); returns total_norm.
// Like torch 1.13, a non-finite total norm still scales the gradients (a NaN norm makes
// every gradient NaN; an infinite one zeroes the finite entries) unless error_if_nonfinite,
// which throws xgrad::Error instead and leaves the gradients untouched. No gradients: 0.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

// Clamps every gradient element to [-clip_value, clip_value] (NaN stays NaN).
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
void clip_grad_value_(const Tensor& parameter, double clip_value);

}  // namespace xgrad::nn::utils
