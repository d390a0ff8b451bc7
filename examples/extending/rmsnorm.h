// examples/extending/rmsnorm.h: a module written outside xgrad, with its public API only.
//
// RMSNorm rescales each vector over its last dim by its root mean square, then by a learned
// weight (no mean subtraction, no bias), as in LLaMA. Names, defaults and printing follow
// torch.nn.RMSNorm (torch >= 2.4): eps unset means the machine epsilon of the input's dtype.
// reference: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization",
//            https://pytorch.org/docs/stable/generated/torch.nn.RMSNorm.html
//   y = x / sqrt(mean(x^2, dim=-1) + eps) * weight
// docs/extending.md walks through this file, rmsnorm.cpp and their tests.
#pragma once
#include <xgrad/xgrad.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ext {

class RMSNorm : public xgrad::nn::Module {
 public:
  explicit RMSNorm(int64_t normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  xgrad::Tensor forward(const xgrad::Tensor& x) override;  // (*, normalized_shape) -> same
  void reset_parameters();
  std::string name() const override { return "RMSNorm"; }
  std::string extra_repr() const override;  // "(8,), eps=1e-06, elementwise_affine=True"

  int64_t normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  xgrad::Tensor weight;  // (normalized_shape), ones at init; undefined without elementwise_affine
};

}  // namespace ext
