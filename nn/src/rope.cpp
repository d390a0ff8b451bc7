// nn/src/rope.cpp: compute_rope_params and apply_rope (see rope.h for the math).
#include "xgrad/nn/rope.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "xgrad/ops.h"

namespace xgrad::nn {

namespace {

// inv_freq[i] = 1 / theta_base^(2i / head_dim), then Llama 3's scaling, in float32 and in the
// order of the book's torch expressions (a python scalar meets a float32 tensor as a float32;
// `scalar / t` is reciprocal(t) * scalar).
std::vector<float> inverse_frequencies(int64_t head_dim, double theta_base,
                                       const std::optional<RoPEFreqConfig>& freq_config) {
  std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta_base), exponent);
  }
  if (!freq_config) return inv_freq;
  const RoPEFreqConfig& c = *freq_config;
  const auto original = static_cast<double>(c.original_context_length);
  const auto low_wavelen = static_cast<float>(original / c.low_freq_factor);
  const auto high_wavelen = static_cast<float>(original / c.high_freq_factor);
  const auto factor = static_cast<float>(c.factor);
  for (float& f : inv_freq) {
    float wavelen = (1.0f / f) * static_cast<float>(2 * std::numbers::pi);
    if (wavelen > low_wavelen) {
      f = f / factor;  // low frequencies: slowed down by `factor`
    } else if (wavelen >= high_wavelen) {
      // medium: blended between the slowed and the original frequency
      float smooth =
          ((1.0f / wavelen) * static_cast<float>(original) - static_cast<float>(c.low_freq_factor)) /
          static_cast<float>(c.high_freq_factor - c.low_freq_factor);
      f = (1.0f - smooth) * (f / factor) + smooth * f;
    }  // high frequencies are kept
  }
  return inv_freq;
}

// cos and sin of angles[p][j] = p * inv_freq[j mod head_dim/2], computed in T.
template <class T>
RoPEParams rope_tables(const std::vector<float>& inv_freq, int64_t context_length) {
  const auto half = static_cast<int64_t>(inv_freq.size());
  const int64_t head_dim = 2 * half;
  std::vector<T> cos_v(static_cast<std::size_t>(context_length * head_dim));
  std::vector<T> sin_v(cos_v.size());
  for (int64_t p = 0; p < context_length; ++p)
    for (int64_t j = 0; j < head_dim; ++j) {
      T angle = static_cast<T>(p) * static_cast<T>(inv_freq[static_cast<std::size_t>(j % half)]);
      cos_v[static_cast<std::size_t>(p * head_dim + j)] = std::cos(angle);
      sin_v[static_cast<std::size_t>(p * head_dim + j)] = std::sin(angle);
    }
  return {from_vector(cos_v, {context_length, head_dim}), from_vector(sin_v, {context_length, head_dim})};
}

}  // namespace

RoPEParams compute_rope_params(int64_t head_dim, double theta_base, int64_t context_length,
                               std::optional<RoPEFreqConfig> freq_config, DType dtype) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    fail("compute_rope_params", "head_dim must be even and positive, got ", head_dim);
  if (context_length <= 0)
    fail("compute_rope_params", "context_length must be positive, got ", context_length);
  if (!(theta_base > 0)) fail("compute_rope_params", "theta_base must be positive, got ", theta_base);
  if (dtype != kFloat32 && dtype != kFloat64)
    fail("compute_rope_params", "dtype must be float32 or float64, got ", dtype_name(dtype));
  if (freq_config) {
    const RoPEFreqConfig& c = *freq_config;
    if (!(c.factor > 0) || !(c.low_freq_factor > 0) || !(c.high_freq_factor > c.low_freq_factor) ||
        c.original_context_length <= 0)
      fail("compute_rope_params",
           "freq_config needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_context_length "
           "> 0, "
           "got factor ",
           c.factor, ", low_freq_factor ", c.low_freq_factor, ", high_freq_factor ", c.high_freq_factor,
           ", original_context_length ", c.original_context_length);
  }
  std::vector<float> inv_freq = inverse_frequencies(head_dim, theta_base, freq_config);
  return dtype == kFloat32 ? rope_tables<float>(inv_freq, context_length)
                           : rope_tables<double>(inv_freq, context_length);
}

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t offset) {
  if (x.dim() != 4) fail("apply_rope", "x must be (batch, heads, seq, head_dim), got shape ", x.shape());
  const int64_t seq = x.shape()[2], head_dim = x.shape()[3];
  if (head_dim % 2 != 0) fail("apply_rope", "head_dim must be even, got x of shape ", x.shape());
  if (cos.dim() != 2 || cos.shape() != sin.shape() || cos.shape()[1] != head_dim)
    fail("apply_rope",
         "cos and sin must both be (context_length, head_dim) with x's head_dim, got x of shape ", x.shape(),
         ", cos of shape ", cos.shape(), " and sin of shape ", sin.shape());
  const int64_t context_length = cos.shape()[0];
  if (offset < 0 || offset + seq > context_length)
    fail("apply_rope", "positions ", offset, " .. ", offset + seq - 1, " (offset ", offset, ", x of shape ",
         x.shape(), ") are outside the tables' context_length ", context_length, " (cos of shape ",
         cos.shape(), ")");

  // the rows of positions offset .. offset + seq - 1, (seq, head_dim), broadcast over batch and
  // heads; in x's dtype, but float32 for a bfloat16 x (the book's float32 tables: the rotation
  // is computed in float32 and rounded once to x's dtype)
  const DType table_dtype = x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  Tensor c = cos.narrow(0, offset, seq).to(table_dtype);
  Tensor s = sin.narrow(0, offset, seq).to(table_dtype);
  return apply_rotary_emb(x, c, s);  // x * c + cat(-x2, x1) * s
}

}  // namespace xgrad::nn
