// examples/extending/silu.h: an op written outside xgrad, with its public API only.
//
// silu(x) = x * sigmoid(x) (torch.nn.functional.silu, a.k.a. swish), with its own backward
// recorded on xgrad's tape, and SiLU, the module that wraps it (torch.nn.SiLU).
// docs/extending.md walks through this file, silu.cpp and their tests.
#pragma once
#include <xgrad/xgrad.h>

#include <string>

namespace ext {

// Elementwise x * sigmoid(x), any shape, float32 or float64; grad_fn "SiluBackward0".
xgrad::Tensor silu(const xgrad::Tensor& x);

class SiLU : public xgrad::nn::Module {
 public:
  xgrad::Tensor forward(const xgrad::Tensor& input) override { return ext::silu(input); }
  std::string name() const override { return "SiLU"; }
};

}  // namespace ext
