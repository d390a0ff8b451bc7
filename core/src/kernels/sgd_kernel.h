// core/src/kernels/sgd_kernel.h (private, the kernel floor): SGD's fused update, sgd_step,
// for optim/src/sgd.cpp: one pass over param, grad and the momentum buffer (a plain loop the
// compiler vectorises), with torch 1.13's roundings.
#pragma once
#include <cmath>
#include <cstdint>

namespace xgrad::kernels {

// The step's options, as SGDOptions holds them (rounded to T inside the kernel).
struct SgdScalars {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// One fused pass. kFirst: the momentum buffer is created from this step's d_p. torch's
// add(other, alpha) computes fma(alpha, other, self); std::fma does the same here, so the
// results agree to the bit.
template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, const SgdScalars& o) {
  const T neg_lr = static_cast<T>(-o.lr);
  const T wd = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1.0 - o.dampening);
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if constexpr (kDecay) d = std::fma(wd, p[i], d);  // grad.add(p, alpha=wd)
    if constexpr (kMomentum) {
      T b;
      if constexpr (kFirst) b = d;                    // clone(d_p)
      else b = std::fma(keep, d, buf[i] * momentum);  // buf.mul_(m).add_(d_p, alpha=1-damp)
      buf[i] = b;
      if constexpr (kNesterov) d = std::fma(momentum, b, d);  // d_p.add(buf, alpha=m)
      else d = b;
    }
    p[i] = std::fma(neg_lr, d, p[i]);  // p.add_(d_p, alpha=-lr)
  }
}

template <class T, bool kDecay>
void sgd_dispatch(T* p, const T* g, T* buf, int64_t n, bool first, const SgdScalars& o) {
  if (o.momentum == 0) sgd_kernel<T, kDecay, false, false, false>(p, g, buf, n, o);
  else if (first && o.nesterov) sgd_kernel<T, kDecay, true, true, true>(p, g, buf, n, o);
  else if (first) sgd_kernel<T, kDecay, true, true, false>(p, g, buf, n, o);
  else if (o.nesterov) sgd_kernel<T, kDecay, true, false, true>(p, g, buf, n, o);
  else sgd_kernel<T, kDecay, true, false, false>(p, g, buf, n, o);
}

// One step of one contiguous parameter p (n elements) with gradient g and, with momentum, the
// buffer buf (first: created from this step's d_p).
template <class T>
void sgd_step(T* p, const T* g, T* buf, int64_t n, bool first, const SgdScalars& o) {
  if (o.weight_decay != 0) sgd_dispatch<T, true>(p, g, buf, n, first, o);
  else sgd_dispatch<T, false>(p, g, buf, n, first, o);
}

}  // namespace xgrad::kernels
