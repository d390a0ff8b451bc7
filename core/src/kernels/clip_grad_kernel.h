// core/src/kernels/clip_grad_kernel.h (private, the kernel floor): the loops of
// nn::utils::clip_grad_norm_ and clip_grad_value_ (nn/src/clip_grad.cpp) over one contiguous
// gradient: its p-norm, and the in-place scaling and clamping.
#pragma once
#include <cmath>
#include <cstdint>

namespace xgrad::kernels {

// The p-norm of x[0..n) (torch.norm(x, p) for a vector). The common cases keep eight
// independent accumulators so the loop vectorises without reassociating one sum.
template <class T>
double vector_norm(const T* x, int64_t n, double p) {
  constexpr int K = 8;
  if (p == 2.0 || p == 1.0) {
    double acc[K] = {};
    int64_t i = 0;
    for (; i + K <= n; i += K)
      for (int k = 0; k < K; ++k) {
        const double v = static_cast<double>(x[i + k]);
        acc[k] += p == 2.0 ? v * v : std::fabs(v);
      }
    for (; i < n; ++i) {
      const double v = static_cast<double>(x[i]);
      acc[0] += p == 2.0 ? v * v : std::fabs(v);
    }
    double sum = 0;
    for (double a : acc) sum += a;
    return p == 2.0 ? std::sqrt(sum) : sum;
  }
  if (std::isinf(p)) {
    // max (p = inf) or min (p = -inf) of |x|; a NaN element makes the result NaN
    const bool want_max = p > 0;
    double best = n == 0 ? 0.0 : std::fabs(static_cast<double>(x[0]));
    for (int64_t i = 0; i < n; ++i) {
      const double v = std::fabs(static_cast<double>(x[i]));
      if (v != v || (want_max ? v > best : v < best)) best = v;
      if (best != best) break;
    }
    return best;
  }
  if (p == 0.0) {
    double count = 0;
    for (int64_t i = 0; i < n; ++i) count += x[i] != T(0) ? 1.0 : 0.0;
    return count;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::pow(std::fabs(static_cast<double>(x[i])), p);
  return std::pow(sum, 1.0 / p);
}

// x[i] *= c for i < n (in x's dtype).
template <class T>
void scale(T* x, int64_t n, T c) {
  for (int64_t i = 0; i < n; ++i) x[i] *= c;
}

template <class T>
void clamp_values(T* x, int64_t n, T lo, T hi) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);  // NaN stays
}

}  // namespace xgrad::kernels
