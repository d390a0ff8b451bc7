// nn/src/attention.cpp: SelfAttention, CausalAttention, MultiHeadAttentionWrapper,
// MultiHeadAttention and MHLinear. Each forward mirrors the book's code it comes from
// (comments give the shapes); the backward is the tape's, through the ops used.
// MultiHeadAttention runs the fused scaled_dot_product_attention (core/src/ops/attention.cpp)
// where the others spell out matmul / masked_fill / softmax / dropout / matmul.
#include "xgrad/nn/attention.h"

#include <cmath>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

namespace {
Tensor causal_mask(int64_t context_length) {
  // torch.triu(torch.ones(context_length, context_length), diagonal=1).bool()
  return triu(ones({context_length, context_length}), 1).to(kBool);
}

void check_positive(const char* who, const char* what, int64_t v) {
  if (v <= 0) fail(who, what, " must be positive, got ", v);
}

// (b, T, d_in) with T <= context_length
void check_tokens(const char* who, const Tensor& x, int64_t d_in, int64_t context_length) {
  if (x.dim() != 3 || x.size(2) != d_in)
    fail(who, "expected input of shape (batch, num_tokens, ", d_in, "), got ", x.shape());
  if (x.size(1) > context_length)
    fail(who, "input has ", x.size(1), " tokens but context_length is ", context_length, " (shape ",
         x.shape(), ")");
}
}  // namespace

// ------------------------------------------------------------------ SelfAttention
SelfAttention::SelfAttention(int64_t d_in, int64_t d_out_, bool qkv_bias) : d_out(d_out_) {
  check_positive("SelfAttention", "d_in", d_in);
  check_positive("SelfAttention", "d_out", d_out);
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
}

Tensor SelfAttention::forward(const Tensor& x) {
  Tensor keys = W_key(x);  // (..., T, d_out)
  Tensor queries = W_query(x);
  Tensor values = W_value(x);
  Tensor attn_scores = matmul(queries, keys.transpose(-2, -1));  // (..., T, T)
  Tensor attn_weights = softmax(attn_scores / std::sqrt(double(keys.size(-1))), -1);
  return matmul(attn_weights, values);  // (..., T, d_out)
}

// ------------------------------------------------------------------ CausalAttention
CausalAttention::CausalAttention(int64_t d_in, int64_t d_out_, int64_t context_length_, double dropout_p,
                                 bool qkv_bias)
    : d_out(d_out_), context_length(context_length_) {
  check_positive("CausalAttention", "d_in", d_in);
  check_positive("CausalAttention", "d_out", d_out);
  check_positive("CausalAttention", "context_length", context_length);
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  mask = register_buffer("mask", causal_mask(context_length));
}

Tensor CausalAttention::forward(const Tensor& x) {
  check_tokens("CausalAttention", x, W_query->in_features, context_length);
  auto [b, num_tokens, d_in] = x.shape3();
  Tensor keys = W_key(x);  // (b, T, d_out)
  Tensor queries = W_query(x);
  Tensor values = W_value(x);

  Tensor attn_scores = matmul(queries, keys.transpose(1, 2));  // (b, T, T)
  attn_scores.masked_fill_(mask.slice(0, 0, num_tokens).slice(1, 0, num_tokens), -INFINITY);
  Tensor attn_weights = softmax(attn_scores / std::sqrt(double(keys.size(-1))), -1);
  attn_weights = dropout(attn_weights);

  return matmul(attn_weights, values);  // (b, T, d_out)
}

// ------------------------------------------------------------------ MultiHeadAttentionWrapper
MultiHeadAttentionWrapper::MultiHeadAttentionWrapper(int64_t d_in, int64_t d_out, int64_t context_length,
                                                     double dropout, int64_t num_heads, bool qkv_bias) {
  check_positive("MultiHeadAttentionWrapper", "num_heads", num_heads);
  heads = register_module("heads", std::make_shared<ModuleList>());
  for (int64_t h = 0; h < num_heads; ++h)
    heads->push_back(std::make_shared<CausalAttention>(d_in, d_out, context_length, dropout, qkv_bias));
}

Tensor MultiHeadAttentionWrapper::forward(const Tensor& x) {
  std::vector<Tensor> outputs;  // num_heads x (b, T, d_out)
  for (const auto& head : *heads) outputs.push_back((*head)(x));
  return cat(outputs, -1);  // (b, T, num_heads * d_out)
}

// ------------------------------------------------------------------ MultiHeadAttention
MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out_, int64_t context_length_,
                                       double dropout_p, int64_t num_heads_, bool qkv_bias)
    : d_out(d_out_), num_heads(num_heads_), context_length(context_length_) {
  check_positive("MultiHeadAttention", "d_in", d_in);
  check_positive("MultiHeadAttention", "d_out", d_out);
  check_positive("MultiHeadAttention", "num_heads", num_heads);
  check_positive("MultiHeadAttention", "context_length", context_length);
  if (d_out % num_heads != 0)
    fail("MultiHeadAttention", "d_out (", d_out, ") must be divisible by num_heads (", num_heads, ")");
  head_dim = d_out / num_heads;
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, d_out, qkv_bias));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  mask = register_buffer("mask", causal_mask(context_length));
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  check_tokens("MultiHeadAttention", x, W_query->in_features, context_length);
  auto [b, num_tokens, d_in] = x.shape3();
  Tensor queries = W_query(x)
                       .view({b, num_tokens, num_heads, head_dim})  // (b, T, H, D)
                       .transpose(1, 2);                            // (b, H, T, D)
  Tensor keys = W_key(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
  Tensor values = W_value(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);

  // Raschka's MHAPyTorchScaledDotProduct: one fused op for the composed
  //   attn_scores = queries @ keys.transpose(2, 3)
  //   attn_scores.masked_fill_(mask[:T, :T], -inf)
  //   attn_weights = dropout(softmax(attn_scores / sqrt(head_dim), -1))
  //   context_vec = attn_weights @ values
  // with the same numbers (up to float rounding) and, in training, the same dropout draws
  // from the same (default) generator as the Dropout module would make. is_causal is the
  // `mask` triangle (the buffer is only a state_dict key, see attention.h); the Dropout
  // module gives the probability and the train/eval switch.
  const double use_dropout = dropout->is_training() ? dropout->p : 0.0;
  Tensor context_vec = scaled_dot_product_attention(queries, keys, values, use_dropout,
                                                    /*is_causal=*/true);  // (b, H, T, D)
  context_vec = context_vec
                    .transpose(1, 2)  // (b, T, H, D)
                    .contiguous()
                    .view({b, num_tokens, d_out});  // (b, T, d_out)
  return out_proj(context_vec);                     // (b, T, d_out)
}

Tensor MultiHeadAttention::forward(const Tensor& x, LayerKVCache& cache) {
  check_tokens("MultiHeadAttention", x, W_query->in_features, context_length);
  auto [b, num_tokens, d_in] = x.shape3();
  const int64_t past = cache.size();
  if (past > 0 && (cache.keys.size(0) != b || past + num_tokens > context_length))
    fail("MultiHeadAttention", "a KV cache of ", past, " tokens (keys ", cache.keys.shape(),
         ") cannot take input of shape ", x.shape(), " (context_length ", context_length, ")");
  Tensor queries = W_query(x)
                       .view({b, num_tokens, num_heads, head_dim})  // (b, T, H, D)
                       .transpose(1, 2);                            // (b, H, T, D)
  Tensor keys = W_key(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
  Tensor values = W_value(x).view({b, num_tokens, num_heads, head_dim}).transpose(1, 2);
  if (past > 0) {
    keys = cat({cache.keys, keys}, 2);  // (b, H, past + T, D)
    values = cat({cache.values, values}, 2);
  }
  cache.keys = keys;
  cache.values = values;

  const double use_dropout = dropout->is_training() ? dropout->p : 0.0;
  Tensor context_vec;
  if (past == 0 || num_tokens == 1) {
    // a fresh cache is the plain causal case; one new token sees every key
    context_vec = scaled_dot_product_attention(queries, keys, values, use_dropout,
                                               /*is_causal=*/past == 0);  // (b, H, T, D)
  } else {
    // query i sits at position past + i: the mask's rows past .. past + T
    Tensor attn_scores = matmul(queries, keys.transpose(2, 3));  // (b, H, T, past + T)
    attn_scores = masked_fill(
        attn_scores, mask.slice(0, past, past + num_tokens).slice(1, 0, past + num_tokens), -INFINITY);
    Tensor attn_weights = dropout(softmax(attn_scores / std::sqrt(double(head_dim)), -1));
    context_vec = matmul(attn_weights, values);  // (b, H, T, D)
  }
  context_vec = context_vec
                    .transpose(1, 2)  // (b, T, H, D)
                    .contiguous()
                    .view({b, num_tokens, d_out});  // (b, T, d_out)
  return out_proj(context_vec);                     // (b, T, d_out)
}

// ------------------------------------------------------------------ MHLinear
MHLinear::MHLinear(int64_t n_heads_, int64_t d_in_, int64_t d_k_)
    : n_heads(n_heads_), d_in(d_in_), d_k(d_k_) {
  check_positive("MHLinear", "n_heads", n_heads);
  check_positive("MHLinear", "d_in", d_in);
  check_positive("MHLinear", "d_k", d_k);
  // weights ~ U(-b, b) with b = d_in**-0.5, shape (d_in, n_heads, d_k)
  const double bound = 1.0 / std::sqrt(double(d_in));
  Tensor w = empty({d_in, n_heads, d_k});
  w.uniform_(-bound, bound);
  weights = register_parameter("weights", w);
}

Tensor MHLinear::forward(const Tensor& x) {
  if (x.dim() != 3 || x.size(2) != d_in)
    fail("MHLinear", "expected input of shape (B, N, ", d_in, "), got ", x.shape());
  auto [B, N, T] = x.shape3();
  Tensor x_unrolled = x.view({-1, T});                                       // (B*N, T)
  Tensor w_unrolled = weights.view({T, -1});                                 // (T, n_heads*d_k)
  Tensor projected = matmul(x_unrolled, w_unrolled);                         // (B*N, n_heads*d_k)
  return projected.view({B, N, n_heads, d_k}).transpose(1, 2).contiguous();  // (B, n_heads, N, d_k)
}

std::string MHLinear::extra_repr() const {
  return "n_heads=" + std::to_string(n_heads) + ", d_in=" + std::to_string(d_in) +
         ", d_k=" + std::to_string(d_k);
}

}  // namespace xgrad::nn
