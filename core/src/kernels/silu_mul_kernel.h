// core/src/kernels/silu_mul_kernel.h (private, the kernel floor): the forward/backward kernel
// pair of core/src/ops/silu_mul.cpp, SwiGLU's product silu(a) * b over contiguous operands of
// one shape and float dtype (bfloat16: float32 arithmetic on widened blocks, each result
// rounded once). With s = sigmoid(a):
//   out = a * s * b
//   da = dout * b * s * (1 + a * (1 - s)),   db = dout * a * s
// Elementwise: every element's result is its own, whatever the thread count.
#pragma once
#include <algorithm>
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "bf16_kernel.h"
#include "kernels.h"
#include "vec_math.h"

namespace xgrad::kernels {

namespace silu_mul_detail {

// out = silu(a) * b over n elements
template <class T>
void forward_range(const T* pa, const T* pb, T* po, int64_t n) {
  vec::map2(pa, pb, po, n, [](auto v, auto w) {
    using V = decltype(v);
    const V one(T(1));
    return v / (one + vec::vexp(-v)) * w;  // silu(a) * b
  });
}

// da and db (either may be null: not wanted) over n elements, one pass over a, b and dout
template <class T>
void backward_range(const T* pa, const T* pb, const T* pd, T* pda, T* pdb, int64_t n) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  // one element (a batch or a scalar): s = sigmoid(a), then both gradients
  auto step = [&](auto v, auto w, auto d, int64_t i, auto store) {
    using V = decltype(v);
    const V one(T(1));
    const V s = vec::sigmoid<T>(v);
    if (pda) store(pda + i, d * w * s * (one + v * (one - s)));
    if (pdb) store(pdb + i, d * v * s);
  };
  int64_t i = 0;
  for (; i + W <= n; i += W)
    step(B::load_unaligned(pa + i), B::load_unaligned(pb + i), B::load_unaligned(pd + i), i,
         [](T* p, const B& v) { v.store_unaligned(p); });
  for (; i < n; ++i) step(pa[i], pb[i], pd[i], i, [](T* p, T v) { *p = v; });
}

}  // namespace silu_mul_detail

inline void silu_mul_forward(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.dtype() == kBFloat16) {  // float32 on widened blocks, rounded once
    const bf16* pa = a.data_ptr<bf16>();
    const bf16* pb = b.data_ptr<bf16>();
    bf16* po = out.data_ptr<bf16>();
    return parallel_elems(out.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      map2_bf16_blocks(pa + lo, pb + lo, po + lo, hi - lo,
                       [](const float* af, const float* bf, float* yf, int64_t m) {
                         silu_mul_detail::forward_range<float>(af, bf, yf, m);
                       });
    });
  }
  dispatch_float(a.dtype(), "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    T* po = out.data_ptr<T>();
    parallel_elems(out.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      silu_mul_detail::forward_range<T>(pa + lo, pb + lo, po + lo, hi - lo);
    });
  });
}

// da and db (either may be undefined: not wanted), one pass over a, b and dout. bfloat16:
// computed in float32 on widened blocks, each gradient rounded once.
inline void silu_mul_backward(const Tensor& a, const Tensor& b, const Tensor& dout, const Tensor& da,
                              const Tensor& db) {
  if (a.dtype() == kBFloat16) {
    const bf16* pa = a.data_ptr<bf16>();
    const bf16* pb = b.data_ptr<bf16>();
    const bf16* pd = dout.data_ptr<bf16>();
    bf16* pda = da.defined() ? da.data_ptr<bf16>() : nullptr;
    bf16* pdb = db.defined() ? db.data_ptr<bf16>() : nullptr;
    return parallel_elems(a.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      alignas(64) float af[kBf16Block], bf[kBf16Block], df[kBf16Block], daf[kBf16Block], dbf[kBf16Block];
      for (int64_t i = lo; i < hi; i += kBf16Block) {
        const int64_t m = std::min(kBf16Block, hi - i);
        bf16_to_float_n(&pa[i].bits, af, m);
        bf16_to_float_n(&pb[i].bits, bf, m);
        bf16_to_float_n(&pd[i].bits, df, m);
        silu_mul_detail::backward_range<float>(af, bf, df, pda ? daf : nullptr, pdb ? dbf : nullptr, m);
        if (pda) float_to_bf16_n(daf, &pda[i].bits, m);
        if (pdb) float_to_bf16_n(dbf, &pdb[i].bits, m);
      }
    });
  }
  dispatch_float(a.dtype(), "silu_mul_backward", [&](auto tag) {
    using T = decltype(tag);
    T* pda = da.defined() ? da.data_ptr<T>() : nullptr;
    T* pdb = db.defined() ? db.data_ptr<T>() : nullptr;
    parallel_elems(a.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      silu_mul_detail::backward_range<T>(a.data_ptr<T>() + lo, b.data_ptr<T>() + lo, dout.data_ptr<T>() + lo,
                                         pda ? pda + lo : nullptr, pdb ? pdb + lo : nullptr, hi - lo);
    });
  });
}

}  // namespace xgrad::kernels
