// core/src/kernels/vec_math.h (private): SIMD loops over contiguous buffers for the activation
// and nn_functional families, in this order: element maps (exp, erf, tanh), row reductions
// (max, exp sums, log-sum-exp rows, dot, sum), GELU, layer_norm's forward and backward rows,
// the bernoulli mask of torch's mt19937 stream (random.cpp) and dropout's mask multiply.
// A few loops take an AVX-512 branch in intrinsics (under #if, next to their portable loop)
// where xsimd 8 has no operation for it: a two-register permute, a mask register.
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
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <xsimd/xsimd.hpp>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

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
// c ? a : b, lane by lane for a batch (xsimd 8 has no scalar select)
template <class C, class V>
inline V vselect(const C& c, const V& a, const V& b) {
  if constexpr (std::is_arithmetic_v<V>) return c ? a : b;
  else return xsimd::select(c, a, b);
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

// exp(z) of a float batch or scalar for z clamped to [-80, 80] (so 2^n below is a normal
// float and the result never overflows): z = n ln2 + r with |r| <= ln2 / 2, exp(r) =
// 1 + r + r^2 P(r) with P of degree 4 (a minimax fit of (exp(r) - 1 - r) / r^2 on
// [-ln2/2, ln2/2], relative error 4e-9 before rounding, so within about 1 ulp; Cephes' expf
// needs a degree-5 P for the same), times 2^n built in the exponent bits. No special cases
// and no division: about 14 instructions for a whole batch, where xsimd::exp also handles the
// full range. NaN in gives NaN for a scalar only: a batch's clamp returns a bound for a NaN
// lane (maxps and minps return their second operand then, and AVX-512DQ's vrangeps returns
// 80), so a batch gives a finite value: callers multiply by x, or use exp_nonpositive.
// reference: Cephes expf.c (the two-part ln2); the ISA-neutral form of ggml's ggml_v_expf.
template <class V>
inline V exp_clamped(V z) {
  if constexpr (std::is_same_v<V, float>) {
    if (std::isnan(z)) return z;  // (a NaN's int conversion below would be undefined)
  }
#if defined(__AVX512DQ__)
  if constexpr (std::is_same_v<V, float>) {
    z = std::copysign(std::min(std::fabs(z), 80.0f), z);  // what vrangeps gives, for the tail
  } else if constexpr (sizeof(V) == 64 && std::is_same_v<typename V::value_type, float>) {
    // sign(z) * min(|z|, 80) in one vrangeps instead of a min and a max
    z = V(_mm512_range_ps(z, _mm512_set1_ps(80.0f), 0x02));
  } else {
    z = xsimd::min(xsimd::max(z, V(-80.0f)), V(80.0f));
  }
#else
  z = xsimd::min(xsimd::max(z, V(-80.0f)), V(80.0f));
#endif
  const V n = xsimd::nearbyint(z * V(1.44269504088896341f));  // round(z / ln2)
  V r = xsimd::fma(n, V(-0.693359375f), z);                   // z - n ln2, ln2 in two parts
  r = xsimd::fma(n, V(2.12194440e-4f), r);
  V p = V(1.3753953389823437e-3f);
  p = xsimd::fma(p, r, V(8.36891308426857e-3f));
  p = xsimd::fma(p, r, V(4.1669487953186035e-2f));
  p = xsimd::fma(p, r, V(1.66665181517601e-1f));
  p = xsimd::fma(p, r, V(4.9999988079071045e-1f));
  p = xsimd::fma(p, r, V(1.0f));
  p = xsimd::fma(p, r, V(1.0f));  // exp(r)
  if constexpr (std::is_same_v<V, float>) {
    return p * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
#if defined(__AVX512F__)
  } else if constexpr (sizeof(V) == 64 && std::is_same_v<typename V::value_type, float>) {
    // p * 2^n in one instruction (vscalefps) instead of a convert, an add, a shift and a
    // multiply: the same bits, since 2^n and the product are normal floats here
    return V(_mm512_scalef_ps(p, n));
#endif
  } else {
    using I = xsimd::batch<int32_t, typename V::arch_type>;
    return p * xsimd::bitwise_cast<V>((xsimd::to_int(n) + I(127)) << 23);  // 2^n
  }
}

// exp(z) for z <= 0 (a log-softmax's x - max or x - lse): float runs exp_clamped's
// polynomial, and gives exactly 0 below -80 (where exp < 2e-35, next to the row's largest
// term exp(0) = 1: an absolute error below 2e-35 instead of denormals, and exp(-inf) = 0, so
// masked logits get exactly zero probability and gradient); NaN stays NaN. double runs
// xsimd::exp.
template <class T, class V>
inline V exp_nonpositive(V z) {
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (std::is_same_v<V, float>) {
      return z < -80.0f ? 0.0f : (z == z ? exp_clamped(z) : z);
    } else {
      return xsimd::select(z < V(-80.0f), V(0.0f), xsimd::select(xsimd::isnan(z), z, exp_clamped(z)));
    }
  } else {
    return vexp(z);
  }
}

// lse[r] = log(sum_c exp(x[r, c])) = m + log(sum_c exp(x[r, c] - m)), m the row's max, for
// the rows [r0, r1) of a contiguous (rows, C) x. Rows go in groups of 8 or 16, each step over
// the group (the max, the sums, the logs), so the group's reductions are in flight together;
// every row gets the arithmetic of the one-row form. The exps are exp_nonpositive's.
template <class T>
inline void logsumexp_rows(const T* x, int64_t C, int64_t r0, int64_t r1, T* lse) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  constexpr int64_t G = W < 8 ? 8 : W;  // rows per group, whole batches of them
  T m[G];
  alignas(64) T s[G];
  for (int64_t g0 = r0; g0 < r1; g0 += G) {
    const int64_t g1 = std::min(r1, g0 + G);
    for (int64_t r = g0; r < g1; ++r) m[r - g0] = max(x + r * C, C);
    for (int64_t r = g0; r < g1; ++r) {  // sum of exp(x - m), as exp_sub_sum, on exp_nonpositive
      const T* xr = x + r * C;
      const B sh(m[r - g0]);
      B acc(T(0));
      int64_t i = 0;
      for (; i + W <= C; i += W) acc += exp_nonpositive<T>(B::load_unaligned(xr + i) - sh);
      T sum = xsimd::hadd(acc);
      for (; i < C; ++i) sum += exp_nonpositive<T>(xr[i] - m[r - g0]);
      s[r - g0] = sum;
    }
    // the group's logs as batches (a lane's log does not depend on its neighbours, so neither
    // does a row's lse on the grouping); unused lanes log 1
    std::fill(s + (g1 - g0), s + G, T(1));
    for (int64_t k = 0; k < G; k += W) vlog(B::load_aligned(s + k)).store_aligned(s + k);
    for (int64_t r = g0; r < g1; ++r) lse[r] = m[r - g0] + s[r - g0];
  }
}

// GELU, y, and its derivative, dy/dx, of a batch or a scalar v of type T (reference: torch
// aten/src/ATen/native/cpu/Activation.cpp, GeluKernelImpl and GeluBackwardKernelImpl: the same
// constants and formulas). The tanh form (GPT-2's), u = beta * (x + kappa * x^3):
//   y = 0.5 x (1 + tanh(u)),  dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) beta (1 + 3 kappa x^2)
// float runs it as 0.5 (1 + tanh(u)) = sigmoid(2u) = s = 1 / (1 + e), e = exp(-2u) (the same
// function; within a few ulp of torch's, closer where 1 + tanh(u) cancels), so that
//   y = x / (1 + e),  dy/dx = s (1 + x 2 beta (1 + 3 kappa x^2) e s)     (s (1 - s) = e s^2)
// costs one exp_clamped and one division per batch instead of xsimd's tanh (an exp, a
// division, a polynomial and a select), so a large tensor runs at memory speed. double keeps
// the tanh form.
// From |x| = 10 on (|u| > 43), 0.5 (1 + tanh(u)) is exactly h = 1 (x > 0) or 0 in float, so
// torch's float formulas give exactly y = x h (x, or -0; NaN at -inf) and dy/dx = h +
// 0.5 x (1 - tanh(u)^2) beta (1 + 3 kappa x^2) = h + x * 0 * x^2 (1 or 0; NaN at +-inf and
// where x^2 overflows, |x| > 1.8e19): float selects those there, where the clamped exp would
// be off (dy/dx 4.86 at x = 1e12, gelu(-1e38) -1.8e3).
template <class T, class V>
inline V gelu_tanh(V v) {
  const T beta = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi), kappa = T(0.044715);  // sqrt(2/pi)
  if constexpr (std::is_same_v<T, float>) {
    const V e = exp_clamped(v * xsimd::fma(v * v, V(-2 * beta * kappa), V(-2 * beta)));  // exp(-2u)
    const V h = vselect(v > V(0), V(1), V(0));  // 0.5 (1 + tanh(u)) from |x| = 10 on
    return vselect(xsimd::abs(v) >= V(10), v * h, v / (V(1) + e));
  } else {
    return T(0.5) * v * (T(1) + vtanh(beta * (v + kappa * v * v * v)));
  }
}
template <class T, class V>
inline V gelu_tanh_grad(V v) {
  const T beta = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi), kappa = T(0.044715);
  if constexpr (std::is_same_v<T, float>) {
    const V x2 = v * v;
    const V e = exp_clamped(v * xsimd::fma(x2, V(-2 * beta * kappa), V(-2 * beta)));  // exp(-2u)
    const V s = V(1) / (V(1) + e);
    const V slope = v * xsimd::fma(x2, V(6 * beta * kappa), V(2 * beta));  // x 2 beta (1 + 3 kappa x^2)
    const V h = vselect(v > V(0), V(1), V(0));                             // as in gelu_tanh
    return vselect(xsimd::abs(v) >= V(10), h + v * V(0) * x2, s * xsimd::fma(slope, e * s, V(1)));
  } else {
    const auto t = vtanh(beta * (v + kappa * v * v * v));
    const auto left = T(0.5) * v, right = T(1) + t;
    const auto left_derivative = T(0.5) * right;
    const auto right_derivative = left * (T(1) - t * t) * (beta * (T(1) + T(3) * kappa * v * v));
    return left_derivative + right_derivative;
  }
}

// The exact form: y = x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), dy/dx = Phi(x) + x phi(x).
template <class T, class V>
inline V gelu_erf(V v) {
  const T sqrt_half = T(1.0 / std::numbers::sqrt2);
  return v * T(0.5) * (T(1) + verf(v * sqrt_half));
}
template <class T, class V>
inline V gelu_erf_grad(V v) {
  const T sqrt_half = T(1.0 / std::numbers::sqrt2);
  const T inv_sqrt_2pi = T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);  // 1 / sqrt(2 pi)
  const auto cdf = T(0.5) * (T(1) + verf(v * sqrt_half));
  const auto pdf = inv_sqrt_2pi * vexp(v * v * T(-0.5));
  return cdf + v * pdf;
}

// The logistic sigmoid s = 1 / (1 + exp(-x)): sigmoid itself, and the s in silu's and
// SwiGLU's gradients.
template <class T, class V>
inline V sigmoid(V v) {
  return T(1) / (T(1) + vexp(-v));
}

// ---- layer_norm rows (reference: llm.c layernorm_forward / layernorm_backward; torch's
// layer_norm_kernel: biased variance, rstd = 1 / sqrt(var + eps) in double).
// One row alone is a chain of latencies (sum, mean, subtract, dot, rstd, scale), so rows go
// in groups of kLayerNormGroup and each step runs over the whole group before the next: the
// group's reductions are in flight together. Each row's arithmetic is exactly the one-row
// loop's, so the bits do not depend on the grouping (nor on which thread takes the row).
inline constexpr int64_t kLayerNormGroup = 8;

// Rows [r0, r1) of the (M, N) contiguous x: y = (x - mean) * rstd * w + b (w, b may be null),
// and each row's mean and rstd.
//
// A row of K whole batches (N = K W, K <= kLayerNormMaxK: the GPTs' emb 64 and 128) stays in
// registers instead: loaded once, with the same arithmetic in the same order as the loops
// below (vec::sum, vec::dot, then fma(xc * rstd, w, b)), so the same bits. Out-of-order
// execution overlaps the rows' latency chains there, so they need no grouping.
inline constexpr int64_t kLayerNormMaxK = 8;

// f(std::integral_constant<int, k>{}) for a run-time k in [1, Max]: a kernel templated on its
// row length in batches, picked at run time.
template <int Max, class F>
inline void with_constant(int64_t k, F&& f) {
  if constexpr (Max > 0) {
    if (k == Max) return f(std::integral_constant<int, Max>{});
    with_constant<Max - 1>(k, f);
  }
}

template <class T, int K>
inline void layer_norm_rows_k(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, double eps,
                              int64_t r0, int64_t r1) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size), N = K * W;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    B v[K];
    B acc(T(0));
    for (int k = 0; k < K; ++k) {
      v[k] = B::load_unaligned(xr + k * W);
      acc += v[k];
    }
    const T m = xsimd::hadd(acc) / static_cast<T>(N);
    const B mb(m);
    acc = B(T(0));
    for (int k = 0; k < K; ++k) {
      v[k] = v[k] - mb;
      acc = xsimd::fma(v[k], v[k], acc);
    }
    const T var = xsimd::hadd(acc) / static_cast<T>(N);  // biased, two-pass
    const T rs = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var) + eps));
    mean[r] = m;
    rstd[r] = rs;
    const B rsb(rs);
    for (int k = 0; k < K; ++k) {
      B o = v[k] * rsb;
      if (w && b) o = xsimd::fma(o, B::load_unaligned(w + k * W), B::load_unaligned(b + k * W));
      else if (w) o = o * B::load_unaligned(w + k * W);
      else if (b) o = o + B::load_unaligned(b + k * W);
      o.store_unaligned(yr + k * W);
    }
  }
}

template <class T>
inline void layer_norm_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, double eps,
                            int64_t r0, int64_t r1) {
  constexpr int64_t W = static_cast<int64_t>(xsimd::batch<T>::size);
  if (N % W == 0 && N / W <= kLayerNormMaxK && N > 0) {
    return with_constant<kLayerNormMaxK>(N / W, [&](auto K) {
      layer_norm_rows_k<T, decltype(K)::value>(x, w, b, y, mean, rstd, eps, r0, r1);
    });
  }
  for (int64_t g0 = r0; g0 < r1; g0 += kLayerNormGroup) {
    const int64_t g1 = std::min(r1, g0 + kLayerNormGroup);
    for (int64_t r = g0; r < g1; ++r) mean[r] = sum(x + r * N, N) / static_cast<T>(N);
    for (int64_t r = g0; r < g1; ++r) {  // y holds x - mean first
      const T* xr = x + r * N;
      T* yr = y + r * N;
      const T m = mean[r];
      for (int64_t i = 0; i < N; ++i) yr[i] = xr[i] - m;
    }
    for (int64_t r = g0; r < g1; ++r) {
      const T var = dot<T>(y + r * N, y + r * N, N) / static_cast<T>(N);  // biased, two-pass
      rstd[r] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var) + eps));
    }
    for (int64_t r = g0; r < g1; ++r) {
      T* yr = y + r * N;
      const T rs = rstd[r];
      if (w && b) {
        for (int64_t i = 0; i < N; ++i) yr[i] = yr[i] * rs * w[i] + b[i];
      } else if (w) {
        for (int64_t i = 0; i < N; ++i) yr[i] = yr[i] * rs * w[i];
      } else if (b) {
        for (int64_t i = 0; i < N; ++i) yr[i] = yr[i] * rs + b[i];
      } else {
        for (int64_t i = 0; i < N; ++i) yr[i] = yr[i] * rs;
      }
    }
  }
}

// layer_norm's backward for rows [r0, r1), given dy (d), the forward's x, w (may be null),
// mean and rstd: with xhat = (x - mean) * rstd and g = dy * w,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))     (when dx is set)
//   dw += sum_rows(dy * xhat), db += sum_rows(dy)         (when set; added in row order)
// Two passes over a row: the first accumulates dw, db and the two means (one batch
// accumulator each, hadd, then the tail, as vec::sum and vec::dot), the second writes dx,
// recomputing xhat and g = dy * w (cheaper than storing and reloading them; that product is
// fused into the FMAs that use it, spelt out so the bits do not depend on the compiler's
// contraction). Rows go in groups as in the forward, so the group's first passes overlap.
//
// A row of K whole batches (K <= kLayerNormMaxK) runs the same arithmetic row by row with dw
// and db in registers across the rows [r0, r1) (loaded once, stored once: the same sums in the
// same order), and its x, dy and xhat in registers between the two passes.
template <class T, int K>
inline void layer_norm_backward_rows_k(const T* x, const T* d, const T* w, const T* mean, const T* rstd,
                                       T* dx, T* dw, T* db, int64_t r0, int64_t r1) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size), N = K * W;
  const T invN = T(1) / static_cast<T>(N);
  B acc_w[K], acc_b[K];
  for (int k = 0; k < K; ++k) {
    if (dw) acc_w[k] = B::load_unaligned(dw + k * W);
    if (db) acc_b[k] = B::load_unaligned(db + k * W);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * N;
    const T* dr = d + r * N;
    const B mb(mean[r]), rsb(rstd[r]);
    B xhat[K], dv[K];
    B acc_g(T(0)), acc_gx(T(0));
    for (int k = 0; k < K; ++k) {
      dv[k] = B::load_unaligned(dr + k * W);
      xhat[k] = (B::load_unaligned(xr + k * W) - mb) * rsb;
      if (dw) acc_w[k] = xsimd::fma(dv[k], xhat[k], acc_w[k]);
      if (db) acc_b[k] = acc_b[k] + dv[k];
      if (w) {
        const B wb = B::load_unaligned(w + k * W);
        acc_g = xsimd::fma(dv[k], wb, acc_g);
        acc_gx = xsimd::fma(dv[k] * wb, xhat[k], acc_gx);
      } else {
        acc_g += dv[k];
        acc_gx = xsimd::fma(dv[k], xhat[k], acc_gx);
      }
    }
    if (!dx) continue;
    const B gmb(xsimd::hadd(acc_g) * invN), gxmb(xsimd::hadd(acc_gx) * invN);
    T* dxr = dx + r * N;
    for (int k = 0; k < K; ++k) {
      const B g_centred = w ? xsimd::fms(dv[k], B::load_unaligned(w + k * W), gmb) : dv[k] - gmb;
      (rsb * xsimd::fnma(xhat[k], gxmb, g_centred)).store_unaligned(dxr + k * W);
    }
  }
  for (int k = 0; k < K; ++k) {
    if (dw) acc_w[k].store_unaligned(dw + k * W);
    if (db) acc_b[k].store_unaligned(db + k * W);
  }
}

template <class T>
inline void layer_norm_backward_rows(const T* x, const T* d, const T* w, const T* mean, const T* rstd, T* dx,
                                     T* dw, T* db, int64_t N, int64_t r0, int64_t r1) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  if (N % W == 0 && N / W <= kLayerNormMaxK && N > 0) {
    return with_constant<kLayerNormMaxK>(N / W, [&](auto K) {
      layer_norm_backward_rows_k<T, decltype(K)::value>(x, d, w, mean, rstd, dx, dw, db, r0, r1);
    });
  }
  const int64_t nb = N / W * W;  // elements in whole batches
  const T invN = T(1) / static_cast<T>(N);
  T g_mean[kLayerNormGroup], gx_mean[kLayerNormGroup];
  for (int64_t g0 = r0; g0 < r1; g0 += kLayerNormGroup) {
    const int64_t g1 = std::min(r1, g0 + kLayerNormGroup);
    for (int64_t r = g0; r < g1; ++r) {  // dw, db, mean(g), mean(g * xhat)
      const T* xr = x + r * N;
      const T* dr = d + r * N;
      const T m = mean[r], rs = rstd[r];
      const B mb(m), rsb(rs);
      B acc_g(T(0)), acc_gx(T(0));
      for (int64_t i = 0; i < nb; i += W) {
        const B db_ = B::load_unaligned(dr + i);
        const B xhat = (B::load_unaligned(xr + i) - mb) * rsb;
        if (dw) xsimd::fma(db_, xhat, B::load_unaligned(dw + i)).store_unaligned(dw + i);
        if (db) (B::load_unaligned(db + i) + db_).store_unaligned(db + i);
        if (w) {
          const B wb = B::load_unaligned(w + i);
          acc_g = xsimd::fma(db_, wb, acc_g);
          acc_gx = xsimd::fma(db_ * wb, xhat, acc_gx);
        } else {
          acc_g += db_;
          acc_gx = xsimd::fma(db_, xhat, acc_gx);
        }
      }
      T sg = xsimd::hadd(acc_g), sgx = xsimd::hadd(acc_gx);
      for (int64_t i = nb; i < N; ++i) {
        const T xhat = (xr[i] - m) * rs;
        if (dw) dw[i] = xsimd::fma(dr[i], xhat, dw[i]);
        if (db) db[i] += dr[i];
        sg = w ? std::fma(dr[i], w[i], sg) : sg + dr[i];
        sgx = std::fma(w ? dr[i] * w[i] : dr[i], xhat, sgx);
      }
      g_mean[r - g0] = sg * invN;
      gx_mean[r - g0] = sgx * invN;
    }
    if (!dx) continue;
    for (int64_t r = g0; r < g1; ++r) {  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
      const T* xr = x + r * N;
      const T* dr = d + r * N;
      T* dxr = dx + r * N;
      const T m = mean[r], rs = rstd[r], gm = g_mean[r - g0], gxm = gx_mean[r - g0];
      const B mb(m), rsb(rs), gmb(gm), gxmb(gxm);
      for (int64_t i = 0; i < nb; i += W) {
        const B xhat = (B::load_unaligned(xr + i) - mb) * rsb;
        const B db_ = B::load_unaligned(dr + i);
        const B g_centred = w ? xsimd::fms(db_, B::load_unaligned(w + i), gmb) : db_ - gmb;  // g - mean(g)
        (rsb * xsimd::fnma(xhat, gxmb, g_centred)).store_unaligned(dxr + i);
      }
      for (int64_t i = nb; i < N; ++i) {
        const T xhat = (xr[i] - m) * rs;
        const T g_centred = w ? std::fma(dr[i], w[i], -gm) : dr[i] - gm;
        dxr[i] = rs * std::fma(-xhat, gxm, g_centred);
      }
    }
  }
}

// out[i] = x[i] * (keep[i] * scale): inverted dropout's x * noise with noise = mask / (1 - p),
// bit for bit (keep * scale is exactly scale or 0), branch-free. The mask is read as bytes:
// GCC vectorises a uint8_t -> float conversion but not a bool one. out may be x.
// Under AVX-512 (float), 16 at a time: the 16 mask bytes become a bit mask that picks
// x * scale or x * 0 (what x * noise gives: -0 for negative x, NaN for inf or NaN).
template <class T>
inline void mul_keep_mask(const T* x, const bool* keep, T scale, T* out, int64_t n) {
  const uint8_t* mask = reinterpret_cast<const uint8_t*>(keep);
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  if constexpr (std::is_same_v<T, float>) {
    const __m512 s = _mm512_set1_ps(scale), zero = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + i));
      const __m512 v = _mm512_loadu_ps(x + i);
      _mm512_storeu_ps(out + i,
                       _mm512_mask_mul_ps(_mm512_mul_ps(v, zero), _mm_test_epi8_mask(bytes, bytes), v, s));
    }
  }
#endif
  for (; i < n; ++i) out[i] = x[i] * (static_cast<T>(mask[i]) * scale);
}

}  // namespace xgrad::vec
