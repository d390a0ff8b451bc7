// xgrad/nn/attention.h: the attention classes of Sebastian Raschka's "Build a Large Language
// Model (From Scratch)", chapter 3, with the book's names (examples/seeds/ re-runs tutorials
// built on them and checks every printed number).
//
// - SelfAttention:             softmax(Q K^T / sqrt(d_out)) V, no mask (section 3.4,
//                              SelfAttention_v2)
// - CausalAttention:           + causal mask buffer and dropout on the weights (section 3.5)
// - MultiHeadAttentionWrapper: a ModuleList of CausalAttention heads, outputs concatenated on
//                              the last dim: d_out per head, num_heads * d_out in all
//                              (section 3.6.1)
// - MultiHeadAttention:        one projection each for Q, K, V, split into heads with view +
//                              transpose, out_proj (section 3.6.2); the attention itself is one
//                              scaled_dot_product_attention call, as in the book's
//                              MHAPyTorchScaledDotProduct (ch03/02_bonus_efficient-multihead-attention)
// - MHLinear:                  a fused multi-head projection, weight (d_in, n_heads, d_k), one
//                              GEMM for all heads (examples/seeds/seed004_mhlinear.cpp)
// Every forward reads line for line like the book's code; the causal mask is a registered
// bool buffer "mask" sliced to the current number of tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "xgrad/nn/containers.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/module.h"

namespace xgrad::nn {

class SelfAttention : public Module {
 public:
  SelfAttention(int64_t d_in, int64_t d_out, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;  // (T, d_in) or (b, T, d_in) -> (..., T, d_out)
  std::string name() const override { return "SelfAttention"; }

  int64_t d_out;
  ModuleHolder<Linear> W_query, W_key, W_value;
};

class CausalAttention : public Module {
 public:
  CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;  // (b, T, d_in) -> (b, T, d_out)
  std::string name() const override { return "CausalAttention"; }

  int64_t d_out;
  int64_t context_length;
  ModuleHolder<Linear> W_query, W_key, W_value;
  ModuleHolder<Dropout> dropout;
  Tensor mask;  // (context_length, context_length) bool, true above the diagonal
};

class MultiHeadAttentionWrapper : public Module {
 public:
  MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length, double dropout,
                            int64_t num_heads, bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;  // (b, T, d_in) -> (b, T, num_heads * d_out)
  std::string name() const override { return "MultiHeadAttentionWrapper"; }

  ModuleHolder<ModuleList> heads;  // of CausalAttention
};

// One attention layer's keys and values of the tokens seen so far, (b, num_heads, T_cached,
// head_dim) each, for generation (GPTModel::generate); empty until the first call.
struct LayerKVCache {
  Tensor keys, values;
  int64_t size() const { return keys.defined() ? keys.size(2) : 0; }  // tokens cached
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                     bool qkv_bias = false);
  Tensor forward(const Tensor& x) override;  // (b, T, d_in) -> (b, T, d_out)
  // The same for x's tokens following the cache.size() tokens in `cache` (the book's KV
  // cache, ch04/03_kv-cache): their keys and values are appended to the cache, their queries
  // attend to every cached key and causally among themselves. cache.size() + T must not
  // exceed context_length.
  Tensor forward(const Tensor& x, LayerKVCache& cache);
  std::string name() const override { return "MultiHeadAttention"; }

  int64_t d_out;
  int64_t num_heads;
  int64_t head_dim;
  int64_t context_length;
  ModuleHolder<Linear> W_query, W_key, W_value, out_proj;
  // forward runs the fused, causal scaled_dot_product_attention, so neither is applied as a
  // module: `dropout` holds p and follows train()/eval() (forward passes p, or 0 in eval, to
  // the fused op), and `mask` is never read: it exists for torch's state_dict key (att.mask).
  ModuleHolder<Dropout> dropout;
  Tensor mask;
};

class MHLinear : public Module {
 public:
  // d_in is the input feature size (T in examples/seeds/seed004_mhlinear.cpp)
  MHLinear(int64_t n_heads, int64_t d_in, int64_t d_k);
  Tensor forward(const Tensor& x) override;  // (B, N, d_in) -> (B, n_heads, N, d_k)
  std::string name() const override { return "MHLinear"; }
  std::string extra_repr() const override;

  int64_t n_heads;
  int64_t d_in;
  int64_t d_k;
  Tensor weights;  // (d_in, n_heads, d_k) ~ U(-1/sqrt(d_in), 1/sqrt(d_in))
};

}  // namespace xgrad::nn
