// core/src/kernels/adam_kernel.h (private, the kernel floor): the fused Adam/AdamW update,
// adam_step, for optim/src/adam.cpp.
//
// One streaming pass reads p, g, m, v (and max_exp_avg_sq) and writes them back: xsimd
// batches, then a scalar tail, both through adam_element so every element sees the same
// operations. The operation order, the fused multiply-adds and the roundings are torch
// 1.13's CPU kernels' (adam_element says which), so the results equal torch's to the bit; a
// split of the range at a multiple of kParallelAlign leaves every element's operations as in
// the serial pass.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

namespace xgrad::kernels {

// The per-step scalars, as T or as a SIMD batch of T (V).
template <class V>
struct AdamScalars {
  V decay;  // AdamW: 1 - lr * weight_decay
  V wd;     // Adam: weight_decay
  V beta1, one_minus_beta1, beta2, one_minus_beta2;
  V bc2_sqrt;  // sqrt(1 - beta2^step)
  V eps;
  V neg_step_size;  // -lr / (1 - beta1^step)
};

// max(old, v) with torch.maximum's NaN propagation, for scalars and SIMD batches.
inline float nan_max(float old, float v) { return (old >= v || old != old) ? old : v; }
inline double nan_max(double old, double v) { return (old >= v || old != old) ? old : v; }

// The value of a product as rounded on its own: keeps the compiler from contracting it into
// a later addition (torch rounds param * (1 - lr * wd) before adding the update).
template <class V>
inline V rounded(V v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(v));
#endif
  return v;
}

template <class T, class A>
inline xsimd::batch<T, A> nan_max(const xsimd::batch<T, A>& old, const xsimd::batch<T, A>& v) {
  return xsimd::select((old >= v) || (old != old), old, v);
}
template <class T, class A>
inline xsimd::batch<T, A> rounded(const xsimd::batch<T, A>& v) {
  typename xsimd::batch<T, A>::register_type r = v;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+v"(r));
#endif
  return r;
}
// A fused multiply-add of batches that is really fused: xsimd 8's fma for AVX-512 is
// x * y + z, which GCC may contract the wrong way (fusing a product inside z instead).
template <class T, class A>
inline xsimd::batch<T, A> fused_fma(const xsimd::batch<T, A>& x, const xsimd::batch<T, A>& y,
                                    const xsimd::batch<T, A>& z) {
  constexpr std::size_t bytes = sizeof(typename xsimd::batch<T, A>::register_type);
  constexpr bool f32 = std::is_same_v<T, float>, f64 = std::is_same_v<T, double>;
#if defined(__AVX512F__)
  if constexpr (bytes == 64 && f32) return _mm512_fmadd_ps(x, y, z);
  if constexpr (bytes == 64 && f64) return _mm512_fmadd_pd(x, y, z);
#endif
#if defined(__FMA__)
  if constexpr (bytes == 32 && f32) return _mm256_fmadd_ps(x, y, z);
  if constexpr (bytes == 32 && f64) return _mm256_fmadd_pd(x, y, z);
  if constexpr (bytes == 16 && f32) return _mm_fmadd_ps(x, y, z);
  if constexpr (bytes == 16 && f64) return _mm_fmadd_pd(x, y, z);
#endif
  alignas(64) T a[xsimd::batch<T, A>::size], b[xsimd::batch<T, A>::size], c[xsimd::batch<T, A>::size];
  x.store_aligned(a);
  y.store_aligned(b);
  z.store_aligned(c);
  for (std::size_t k = 0; k < xsimd::batch<T, A>::size; ++k) a[k] = std::fma(a[k], b[k], c[k]);
  return xsimd::batch<T, A>::load_aligned(a);
}
using xsimd::sqrt;
inline float fused_fma(float x, float y, float z) { return std::fma(x, y, z); }
inline double fused_fma(double x, double y, double z) { return std::fma(x, y, z); }
using std::sqrt;

// GCC 12 warns that _mm512_sqrt_p[sd]'s _mm512_undefined_p[sd]() operand "may be used
// uninitialized" (a false positive inside the intrinsic).
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One element (or one SIMD batch) of the update, with torch's CPU kernels' roundings:
// add(other, alpha) is fma(alpha, other, self), addcmul(t1, t2, value) is
// fma(value * t1, t2, self), addcdiv(t1, t2, value) is self + (value * t1) / t2, and the
// division by sqrt(bias_correction2) is a true division.
template <bool kDecoupled, bool kL2, bool kAmsgrad, class V>
inline void adam_element(V& p, V g, V& m, V& v, V& vmax, const AdamScalars<V>& s) {
  if constexpr (kDecoupled) p = rounded(p * s.decay);    // param.mul_(1 - lr * wd)
  if constexpr (kL2) g = fused_fma(s.wd, p, g);          // grad.add(param, alpha=wd)
  m = fused_fma(s.one_minus_beta1, g, m * s.beta1);      // exp_avg.mul_(b1).add_(g, 1-b1)
  v = fused_fma(s.one_minus_beta2 * g, g, v * s.beta2);  // .mul_(b2).addcmul_(g, g, 1-b2)
  V vv = v;
  if constexpr (kAmsgrad) vv = vmax = nan_max(vmax, v);  // torch.maximum(max, v)
  const V denom = sqrt(vv) / s.bc2_sqrt + s.eps;         // (sqrt(v) / sqrt(bc2)).add_(eps)
  p = p + (s.neg_step_size * m) / denom;                 // addcdiv_(m, denom, -step_size)
}

// adam_element over n contiguous elements: SIMD batches, then a scalar tail.
template <class T, bool kDecoupled, bool kL2, bool kAmsgrad>
void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
               int64_t n, const AdamScalars<T>& s) {
  int64_t i = 0;
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  const AdamScalars<B> sb{B(s.decay),           B(s.wd),       B(s.beta1), B(s.one_minus_beta1), B(s.beta2),
                          B(s.one_minus_beta2), B(s.bc2_sqrt), B(s.eps),   B(s.neg_step_size)};
  for (; i + W <= n; i += W) {
    B pb = B::load_unaligned(p + i), mb = B::load_unaligned(m + i), vb = B::load_unaligned(v + i);
    B xb = kAmsgrad ? B::load_unaligned(vmax + i) : B(T(0));
    adam_element<kDecoupled, kL2, kAmsgrad>(pb, B::load_unaligned(g + i), mb, vb, xb, sb);
    pb.store_unaligned(p + i);
    mb.store_unaligned(m + i);
    vb.store_unaligned(v + i);
    if constexpr (kAmsgrad) xb.store_unaligned(vmax + i);
  }
  for (; i < n; ++i) {
    T x = kAmsgrad ? vmax[i] : T(0);
    adam_element<kDecoupled, kL2, kAmsgrad>(p[i], g[i], m[i], v[i], x, s);
    if constexpr (kAmsgrad) vmax[i] = x;
  }
}

// The fused update of one contiguous parameter (p, g, m, v and, with amsgrad, vmax: n
// elements each), with the per-step scalars s; kDecoupled: AdamW, l2: Adam's weight decay.
template <class T, bool kDecoupled>
void adam_step(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, bool l2, bool amsgrad,
               const AdamScalars<T>& s) {
  if (l2 && amsgrad) adam_loop<T, kDecoupled, true, true>(p, g, m, v, vmax, n, s);
  else if (l2) adam_loop<T, kDecoupled, true, false>(p, g, m, v, vmax, n, s);
  else if (amsgrad) adam_loop<T, kDecoupled, false, true>(p, g, m, v, vmax, n, s);
  else adam_loop<T, kDecoupled, false, false>(p, g, m, v, vmax, n, s);
}
#pragma GCC diagnostic pop

}  // namespace xgrad::kernels
