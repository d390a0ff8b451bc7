// core/src/kernels/norm_kernel.h (private, the kernel floor): the forward/backward kernel pair
// of core/src/ops/norm.cpp: rms_norm over the last N elements of M contiguous rows.
//
// reference: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; torch 2.4's
// rms_norm (aten/src/ATen/native/layer_norm.cpp):
//   rstd = 1 / sqrt(mean(x^2) + eps),  y = x * rstd * w
// The operands are contiguous tensors of one float dtype (the op checks them and makes them
// contiguous); w may be undefined (no affine weight). Rows are split over xgrad's pool, each
// computed whole by one thread; the weight gradient adds per-block partials in block order, so
// no result depends on the thread count.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "kernels.h"

namespace xgrad::kernels {

constexpr int64_t kRmsNormRowBlock = 64;  // rows per partial dw sum in the backward

namespace rms {

// sum of a[i] * b[i]: one batch accumulator, its horizontal sum, then the tail
template <class T>
inline T dot(const T* a, const T* b, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  B acc(T(0));
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = xsimd::fma(B::load_unaligned(a + i), B::load_unaligned(b + i), acc);
  T s = xsimd::hadd(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y[i] = x[i] * rs * w[i] (w null: x[i] * rs)
template <class T>
inline void scale_row(const T* x, const T* w, T rs, T* y, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const B rsb(rs);
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    B v = B::load_unaligned(x + i) * rsb;
    if (w) v = v * B::load_unaligned(w + i);
    v.store_unaligned(y + i);
  }
  for (; i < n; ++i) y[i] = w ? x[i] * rs * w[i] : x[i] * rs;
}

// One row of the backward. With xhat = x * rstd and g = dy * w (dy without a weight):
//   dx = rstd * (g - xhat * mean(g * xhat)) = rstd * g - c * x,  c = rstd^3 * mean(g * x)
//   dw += dy * xhat
// The first pass accumulates dw and sum(g * x), the second writes dx.
template <class T>
inline void backward_row(const T* x, const T* d, const T* w, T rs, T* dx, T* dw, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const B rsb(rs);
  B acc(T(0));  // sum(g * x)
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const B xv = B::load_unaligned(x + i), dv = B::load_unaligned(d + i);
    if (dw) xsimd::fma(dv, xv * rsb, B::load_unaligned(dw + i)).store_unaligned(dw + i);
    acc = xsimd::fma(w ? dv * B::load_unaligned(w + i) : dv, xv, acc);
  }
  T gx = xsimd::hadd(acc);
  for (; i < n; ++i) {
    if (dw) dw[i] += d[i] * (x[i] * rs);
    gx += (w ? d[i] * w[i] : d[i]) * x[i];
  }
  if (!dx) return;
  const T c = rs * rs * rs * (gx / static_cast<T>(n));
  const B cb(c);
  i = 0;
  for (; i + W <= n; i += W) {
    const B g = w ? B::load_unaligned(d + i) * B::load_unaligned(w + i) : B::load_unaligned(d + i);
    xsimd::fnma(cb, B::load_unaligned(x + i), rsb * g).store_unaligned(dx + i);
  }
  for (; i < n; ++i) dx[i] = rs * (w ? d[i] * w[i] : d[i]) - c * x[i];
}

}  // namespace rms

// y = x * rstd * w row by row (M rows of N), saving each row's rstd (M), computed in double
// from the row's mean square as torch's 1 / sqrt(mean(x^2) + eps).
inline void rms_norm_forward(const Tensor& x, const Tensor& w, double eps, int64_t M, int64_t N,
                             const Tensor& y, const Tensor& rstd) {
  dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    T* py = y.data_ptr<T>();
    T* pr = rstd.data_ptr<T>();
    parallel_rows(M, N, kGrain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = px + r * N;
        const T ms = rms::dot(xr, xr, N) / static_cast<T>(N);  // mean(x^2)
        pr[r] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ms) + eps));
        rms::scale_row(xr, pw, pr[r], py + r * N, N);
      }
    });
  });
}

// dx = rstd * (g - xhat * mean(g * xhat)) with g = dy * w and dw = sum_rows(dy * xhat), into
// dx (M, N) and the zeroed dw (N); either may be undefined (not wanted). Rows go in fixed
// blocks of kRmsNormRowBlock, each computing dx for its rows and its own partial dw (its rows
// in order); dw adds the partials in block order, whatever the thread count.
inline void rms_norm_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& rstd,
                              int64_t M, int64_t N, const Tensor& dx, const Tensor& dw) {
  dispatch_float(x.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    const T* pd = dy.data_ptr<T>();
    const T* pr = rstd.data_ptr<T>();
    T* pdx = dx.defined() ? dx.data_ptr<T>() : nullptr;
    T* pdw = dw.defined() ? dw.data_ptr<T>() : nullptr;
    const int64_t blocks = (M + kRmsNormRowBlock - 1) / kRmsNormRowBlock;
    std::vector<T> part(pdw ? blocks * N : 0, T(0));
    parallel_rows(blocks, kRmsNormRowBlock * N, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        for (int64_t r = b * kRmsNormRowBlock; r < std::min(M, (b + 1) * kRmsNormRowBlock); ++r)
          rms::backward_row(px + r * N, pd + r * N, pw, pr[r], pdx ? pdx + r * N : nullptr,
                            pdw ? part.data() + b * N : nullptr, N);
    });
    if (pdw)
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t i = 0; i < N; ++i) pdw[i] += part[b * N + i];
  });
}

}  // namespace xgrad::kernels
