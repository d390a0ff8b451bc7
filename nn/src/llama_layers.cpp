// nn/src/llama_layers.cpp: SiLU, RMSNorm and LlamaFeedForward.
#include "xgrad/nn/llama_layers.h"

#include <memory>

#include "xgrad/ops.h"

namespace xgrad::nn {

// ---------------------------------------------------------------- SiLU
Tensor SiLU::forward(const Tensor& input) { return silu(input); }

// ---------------------------------------------------------------- RMSNorm
// reference: torch 2.4, aten/src/ATen/native/layer_norm.cpp (rms_norm)
RMSNorm::RMSNorm(int64_t normalized_shape, std::optional<double> eps, bool elementwise_affine)
    : RMSNorm(Shape{normalized_shape}, eps, elementwise_affine) {}

RMSNorm::RMSNorm(Shape normalized_shape_, std::optional<double> eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape_)), eps(eps), elementwise_affine(elementwise_affine) {
  for (int64_t d : normalized_shape)
    if (d <= 0) fail("RMSNorm", "normalized_shape must have positive sizes, got ", normalized_shape);
  if (eps && !(*eps >= 0)) fail("RMSNorm", "eps must be >= 0, got ", *eps);
  if (elementwise_affine) weight = register_parameter("weight", ones(normalized_shape));
}

Tensor RMSNorm::forward(const Tensor& x) {
  const Shape& shape = x.shape();
  const auto k = static_cast<int64_t>(normalized_shape.size());
  bool matches = x.dim() >= k;
  for (int64_t i = 0; matches && i < k; ++i) matches = shape[x.dim() - k + i] == normalized_shape[i];
  if (!matches)
    fail("RMSNorm", "normalized_shape ", normalized_shape,
         " must match the trailing dims of the input, got input of shape ", shape);
  if (x.dtype() != kFloat32 && x.dtype() != kFloat64)
    fail("RMSNorm", "expected a float32 or float64 input, got ", dtype_name(x.dtype()), " of shape ", shape);
  return rms_norm(x, normalized_shape, weight, eps);  // eps: torch.finfo(x.dtype).eps when unset
}

std::string RMSNorm::extra_repr() const {
  // Python's tuple repr: (768,) or (2, 3)
  std::string shape = "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + (eps ? repr_float(*eps) : "None") +
         ", elementwise_affine=" + (elementwise_affine ? "True" : "False");
}

// ---------------------------------------------------------------- LlamaFeedForward
LlamaFeedForward::LlamaFeedForward(int64_t emb_dim, int64_t hidden_dim) {
  if (emb_dim <= 0 || hidden_dim <= 0)
    fail("LlamaFeedForward", "emb_dim and hidden_dim must be > 0, got ", emb_dim, " and ", hidden_dim);
  fc1 = register_module("fc1", std::make_shared<Linear>(emb_dim, hidden_dim, false));
  fc2 = register_module("fc2", std::make_shared<Linear>(emb_dim, hidden_dim, false));
  fc3 = register_module("fc3", std::make_shared<Linear>(hidden_dim, emb_dim, false));
}

Tensor LlamaFeedForward::forward(const Tensor& x) {
  Tensor gate = fc1(x), up = fc2(x);  // (*, hidden_dim) each
  return fc3(silu_mul(gate, up));     // fc3(silu(gate) * up): (*, emb_dim)
}

}  // namespace xgrad::nn
