// nn/src/layers.cpp: Dropout, Embedding, LayerNorm, GELU, ReLU, Tanh, Sigmoid.
#include "xgrad/nn/layers.h"

#include "xgrad/nn/init.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

// ---------------------------------------------------------------- Dropout
Dropout::Dropout(double p) : p(p) { check_dropout_p("Dropout", p); }

Tensor Dropout::forward(const Tensor& input) { return dropout(input, p, is_training()); }

std::string Dropout::extra_repr() const { return "p=" + repr_float(p) + ", inplace=False"; }

// ---------------------------------------------------------------- Embedding
// reference: torch/nn/modules/sparse.py (reset_parameters: init.normal_(weight))
Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  if (num_embeddings < 0 || embedding_dim < 0)
    fail("Embedding", "num_embeddings and embedding_dim must be >= 0, got ", num_embeddings, " and ",
         embedding_dim);
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight); }

Tensor Embedding::forward(const Tensor& indices) {
  if (indices.dtype() != kInt64)
    fail("Embedding", "indices must be int64, got ", dtype_name(indices.dtype()), " of shape ",
         indices.shape());
  return embedding(weight, indices);  // indices.shape -> indices.shape + (embedding_dim,)
}

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

// ---------------------------------------------------------------- LayerNorm
LayerNorm::LayerNorm(int64_t normalized_shape, double eps, bool elementwise_affine)
    : LayerNorm(Shape{normalized_shape}, eps, elementwise_affine) {}

LayerNorm::LayerNorm(Shape normalized_shape_, double eps, bool elementwise_affine)
    : normalized_shape(std::move(normalized_shape_)), eps(eps), elementwise_affine(elementwise_affine) {
  for (int64_t d : normalized_shape)
    if (d <= 0) fail("LayerNorm", "normalized_shape must have positive sizes, got ", normalized_shape);
  if (!(eps >= 0)) fail("LayerNorm", "eps must be >= 0, got ", eps);
  if (elementwise_affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  // Python's tuple repr: (768,) or (2, 3)
  std::string shape = "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  shape += normalized_shape.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + repr_float(eps) +
         ", elementwise_affine=" + (elementwise_affine ? "True" : "False");
}

// ---------------------------------------------------------------- GELU, ReLU, Tanh, Sigmoid
GELU::GELU(std::string approximate_) : approximate(std::move(approximate_)) {
  if (approximate != "none" && approximate != "tanh")
    fail("GELU", "approximate must be 'none' or 'tanh', got '", approximate, "'");
}

Tensor GELU::forward(const Tensor& input) { return gelu(input, approximate); }

std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

Tensor ReLU::forward(const Tensor& input) { return relu(input); }

Tensor Tanh::forward(const Tensor& input) { return tanh(input); }

Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(input); }

}  // namespace xgrad::nn
