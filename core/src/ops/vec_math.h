// core/src/ops/vec_math.h (private): SIMD loops over contiguous buffers for the activation
// and nn_functional families (softmax rows, exp, erf, tanh maps).
//
// The maps run on xsimd::batch<T> (Debian's libxsimd-dev, header-only, required by the build)
// with its vectorised exp/erf/tanh (AVX-512 under -march=native, SSE2 otherwise). A map's
// functor is a generic lambda called both with a batch and with a scalar (for the tail), so
// write it with the v* helpers below and T-typed constants:
//
//   vec::map(x, y, n, [](auto v) { return T(1) / (T(1) + vec::vexp(-v)); });
//
// xsimd's exp flushes results below the smallest normal float to 0 and returns inf from
// ~88.7 up (std::exp: denormals, inf from ~88.72); every caller here feeds it x - max <= 0
// or tolerates that.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <tuple>
#include <utility>

#include <xsimd/xsimd.hpp>

namespace xgrad::vec {

template <class V>
inline V vexp(const V& v) {
  return xsimd::exp(v);
}
template <class V>
inline V verf(const V& v) {
  return xsimd::erf(v);
}
template <class V>
inline V vtanh(const V& v) {
  return xsimd::tanh(v);
}
template <class V>
inline V vlog(const V& v) {
  return xsimd::log(v);
}

// y[i] = f(x[i]) for i < n (x and y may alias).
template <class T, class F>
inline void map(const T* x, T* y, int64_t n, F&& f) {
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  for (; i + W <= n; i += W) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(x[i]);
}

// (y[i], z[i]) = f(x[i]) for i < n; f returns a std::pair (a value and its derivative, say).
template <class T, class F>
inline void map_pair(const T* x, T* y, T* z, int64_t n, F&& f) {
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  for (; i + W <= n; i += W) {
    const auto [a, b] = f(B::load_unaligned(x + i));
    a.store_unaligned(y + i);
    b.store_unaligned(z + i);
  }
  for (; i < n; ++i) std::tie(y[i], z[i]) = f(x[i]);
}

// y[i] = f(a[i], b[i]) for i < n.
template <class T, class F>
inline void map2(const T* a, const T* b, T* y, int64_t n, F&& f) {
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  for (; i + W <= n; i += W) f(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = f(a[i], b[i]);
}

// max over x[0..n); -inf for n == 0. NaNs are not propagated (std::max semantics), but a
// NaN in a row still makes that row's softmax NaN through exp.
template <class T>
inline T max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  if (n >= W) {
    B acc = B::load_unaligned(x);
    for (i = W; i + W <= n; i += W) acc = xsimd::max(acc, B::load_unaligned(x + i));
    alignas(64) T lanes[W];
    acc.store_aligned(lanes);
    for (int64_t k = 0; k < W; ++k) m = std::max(m, lanes[k]);
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// y[i] = exp(x[i] - shift) (y may be null: only the sum is wanted); returns the sum of them.
template <class T>
inline T exp_sub_sum(const T* x, T* y, int64_t n, T shift) {
  T s = 0;
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  const B sh(shift);
  for (; i + W <= n; i += W) {
    const B e = xsimd::exp(B::load_unaligned(x + i) - sh);
    if (y) e.store_unaligned(y + i);
    acc += e;
  }
  s = xsimd::hadd(acc);
  for (; i < n; ++i) {
    const T e = std::exp(x[i] - shift);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

// sum of a[i] * b[i]
template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  for (; i + W <= n; i += W) acc = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc);
  s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// sum of a[i]
template <class T>
inline T sum(const T* a, int64_t n) {
  T s = 0;
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  for (; i + W <= n; i += W) acc += B::load_unaligned(a + i);
  s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i];
  return s;
}

// GELU and its derivative, (y, dy/dx), of a batch or a scalar v of type T (reference: torch
// aten/src/ATen/native/cpu/Activation.cpp, GeluKernelImpl and GeluBackwardKernelImpl: the same
// constants and formulas). The tanh form (GPT-2's), u = beta * (x + kappa * x^3):
//   y = 0.5 x (1 + tanh(u)),  dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) beta (1 + 3 kappa x^2)
template <class T, class V>
inline auto gelu_tanh(V v) {
  const T beta = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi), kappa = T(0.044715);  // sqrt(2/pi)
  const auto t = vtanh(beta * (v + kappa * v * v * v));
  const auto left = T(0.5) * v, right = T(1) + t;
  const auto left_derivative = T(0.5) * right;
  const auto right_derivative = left * (T(1) - t * t) * (beta * (T(1) + T(3) * kappa * v * v));
  return std::make_pair(left * right, left_derivative + right_derivative);
}

// The exact form: y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), dy/dx = Phi(x) + x phi(x).
template <class T, class V>
inline auto gelu_erf(V v) {
  const T sqrt_half = T(1.0 / std::numbers::sqrt2);
  const T inv_sqrt_2pi = T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);  // 1 / sqrt(2 pi)
  const auto one_plus_erf = T(1) + verf(v * sqrt_half);
  const auto cdf = T(0.5) * one_plus_erf;
  const auto pdf = inv_sqrt_2pi * vexp(v * v * T(-0.5));
  return std::make_pair(v * T(0.5) * one_plus_erf, cdf + v * pdf);
}

// out[i] = x[i] * (keep[i] * scale): inverted dropout's x * noise with noise = mask / (1 - p),
// bit for bit (keep * scale is exactly scale or 0), branch-free. The mask is read as bytes:
// GCC vectorises a uint8_t -> float conversion but not a bool one. out may be x.
template <class T>
inline void mul_keep_mask(const T* x, const bool* keep, T scale, T* out, int64_t n) {
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(keep);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * (static_cast<T>(mask[i]) * scale);
}

}  // namespace xgrad::vec
