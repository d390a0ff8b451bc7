// xgrad/nn/rope.h: rotary position embeddings (RoPE) in Llama's rotate-half convention, as
// the book's Llama 2 / Llama 3.2 code computes them (Raschka, LLMs-from-scratch,
// ch05/07_gpt_to_llama, compute_rope_params / apply_rope), with the Llama 3 frequency scaling
// and a position offset for a KV cache.
//
// The head dim is split in halves (x1, x2); position p rotates the pair (x1[i], x2[i]) by the
// angle p * inv_freq[i], inv_freq[i] = theta_base^(-2i / head_dim):
//   rope(x)_p = x * cos_p + cat(-x2, x1) * sin_p,   cos_p = cos(p * cat(inv_freq, inv_freq))
// reference: Su et al. 2021, "RoFormer", https://arxiv.org/abs/2104.09864
//
//   RoPEParams rope = compute_rope_params(head_dim, 500000, context_length, RoPEFreqConfig{});
//   Tensor q = apply_rope(queries, rope.cos, rope.sin, cache_len);  // (b, heads, seq, head_dim)
#pragma once
#include <cstdint>
#include <optional>

#include "xgrad/tensor.h"

namespace xgrad::nn {

// Llama 3's frequency scaling (the book's freq_config; Llama 3.2's values by default).
// With wavelen = 2 pi / inv_freq, low_wavelen = original_context_length / low_freq_factor and
// high_wavelen = original_context_length / high_freq_factor:
//   wavelen > low_wavelen                   inv_freq / factor
//   high_wavelen <= wavelen <= low_wavelen  (1 - s) inv_freq / factor + s inv_freq,
//                                           s = (original_context_length / wavelen - low_freq_factor)
//                                               / (high_freq_factor - low_freq_factor)
//   wavelen < high_wavelen                  inv_freq
struct RoPEFreqConfig {
  double factor = 32.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context_length = 8192;
};

// The tables of positions 0 .. context_length - 1, each (context_length, head_dim).
struct RoPEParams {
  Tensor cos;
  Tensor sin;
};

// The book's compute_rope_params. As there, the inverse frequencies (and their scaling) are
// computed in float32 whatever `dtype` is; the angles, cos and sin in `dtype` (float32 or
// float64). Throws for an odd or non-positive head_dim, a non-positive context_length or
// theta_base, or a freq_config without 0 < low_freq_factor < high_freq_factor, factor > 0 and
// original_context_length > 0.
RoPEParams compute_rope_params(int64_t head_dim, double theta_base = 10000.0, int64_t context_length = 4096,
                               std::optional<RoPEFreqConfig> freq_config = std::nullopt,
                               DType dtype = kFloat32);

// x (batch, heads, seq, head_dim) at positions offset .. offset + seq - 1 -> the same shape and
// dtype: the fused op apply_rotary_emb (xgrad/ops.h) with the tables' rows offset .. offset +
// seq - 1. cos and sin are compute_rope_params' tables (context_length, head_dim), taken in x's
// dtype (for float64 x and float32 tables this is the book's promotion), in float32 for a
// bfloat16 x (under autocast: the rotation in float32, rounded once). Differentiable in x
// (and in cos and sin). Throws when x is not 4-D, head_dim is odd or differs from the
// tables', the tables' shapes differ, or offset + seq exceeds the tables' context_length.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t offset = 0);

}  // namespace xgrad::nn
