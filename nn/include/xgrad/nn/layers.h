// xgrad/nn/layers.h: parameter-light layers with torch's names, defaults and initialisation:
// Dropout, Embedding, LayerNorm, GELU, ReLU, Tanh, Sigmoid, Identity.
#pragma once
#include <cstdint>
#include <string>

#include "xgrad/nn/module.h"

namespace xgrad::nn {

// Inverted dropout while training (zero with probability p, scale the rest by 1/(1-p),
// masks from the default generator like torch); the identity after eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // "p=0.1, inplace=False"
  double p;
};

// A lookup table: int64 indices of any shape -> indices.shape + (embedding_dim,).
// weight (num_embeddings, embedding_dim) ~ N(0, 1), as torch.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) override;
  void reset_parameters();
  std::string extra_repr() const override;  // "50257, 768"
  int64_t num_embeddings;
  int64_t embedding_dim;
  Tensor weight;
};

// torch.nn.LayerNorm: normalises over the trailing `normalized_shape` dims with the biased
// variance, then weight * x_hat + bias (weight = 1, bias = 0 at init).
// reference: Ba et al. 2016, https://pytorch.org/docs/stable/generated/torch.nn.LayerNorm.html
// Raschka's from-scratch LayerNorm computes the same with parameters named scale/shift; ours
// keeps torch's names weight/bias.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // "(768,), eps=1e-05, elementwise_affine=True"
  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight;  // normalized_shape, undefined without elementwise_affine
  Tensor bias;
};

// approximate "none" (erf, torch's default) or "tanh" (GPT-2's).
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;  // "approximate='tanh'"
  std::string approximate;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
};

class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
};

}  // namespace xgrad::nn
