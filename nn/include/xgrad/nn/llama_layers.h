// xgrad/nn/llama_layers.h: the layers that turn the book's GPT into Llama (Raschka, "Build a
// Large Language Model (From Scratch)", ch05/07_gpt_to_llama): SiLU, RMSNorm and the SwiGLU
// feed-forward LlamaFeedForward. Rotary position embeddings are in rope.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "xgrad/nn/linear.h"
#include "xgrad/nn/module.h"

namespace xgrad::nn {

// torch.nn.SiLU: x * sigmoid(x), elementwise.
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

// torch.nn.RMSNorm (torch 2.4): over the trailing `normalized_shape` dims,
//   y = x * rsqrt(mean(x^2) + eps) * weight
// with eps = std::nullopt meaning the machine epsilon of x's dtype (torch.finfo(x.dtype).eps)
// and weight = 1 at init. Computed by the fused op rms_norm (xgrad/ops.h).
// reference: Zhang & Sennrich 2019, https://pytorch.org/docs/stable/generated/torch.nn.RMSNorm.html
// The book's hand-written RMSNorm(emb_dim, eps=1e-5) (converting-gpt-to-llama2) differs from torch's
// module in its defaults only: it normalises over the last dim, its eps defaults to 1e-5 (torch's
// to None, the dtype's epsilon) and it always has a weight; same math, same parameter name
// `weight`. Its Llama 3.2 code uses nn.RMSNorm(emb_dim, eps=1e-5), which is RMSNorm(emb_dim, 1e-5).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  explicit RMSNorm(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // "(8,), eps=None, elementwise_affine=True"
  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;  // normalized_shape, undefined without elementwise_affine
};

// The book's Llama FeedForward (SwiGLU), (*, emb_dim) -> (*, emb_dim):
//   fc3(silu(fc1(x)) * fc2(x))     (the product by the fused op silu_mul, xgrad/ops.h)
// fc1, fc2: Linear(emb_dim, hidden_dim), fc3: Linear(hidden_dim, emb_dim), all without bias,
// created in that order (so manual_seed initialises them like torch). Named apart from the
// GPT FeedForward of transformer.h.
class LlamaFeedForward : public Module {
 public:
  LlamaFeedForward(int64_t emb_dim, int64_t hidden_dim);
  Tensor forward(const Tensor& x) override;
  ModuleHolder<Linear> fc1, fc2, fc3;
};

}  // namespace xgrad::nn
