// core/src/kernels/silu_mul_kernel.h (private, the kernel floor): the forward/backward kernel
// pair of core/src/ops/silu_mul.cpp, SwiGLU's product silu(a) * b over contiguous operands of
// one shape and float dtype. With s = sigmoid(a):
//   out = a * s * b
//   da = dout * b * s * (1 + a * (1 - s)),   db = dout * a * s
// Elementwise: every element's result is its own, whatever the thread count.
#pragma once
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "kernels.h"
#include "vec_math.h"

namespace xgrad::kernels {

inline void silu_mul_forward(const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_float(a.dtype(), "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    T* po = out.data_ptr<T>();
    parallel_elems(out.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      vec::map2(pa + lo, pb + lo, po + lo, hi - lo, [](auto v, auto w) {
        using V = decltype(v);
        const V one(T(1));
        return v / (one + vec::vexp(-v)) * w;  // silu(a) * b
      });
    });
  });
}

// da and db (either may be undefined: not wanted), one pass over a, b and dout
inline void silu_mul_backward(const Tensor& a, const Tensor& b, const Tensor& dout, const Tensor& da,
                              const Tensor& db) {
  dispatch_float(a.dtype(), "silu_mul_backward", [&](auto tag) {
    using T = decltype(tag);
    using B = xsimd::batch<T>;
    constexpr int64_t W = static_cast<int64_t>(B::size);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    const T* pd = dout.data_ptr<T>();
    T* pda = da.defined() ? da.data_ptr<T>() : nullptr;
    T* pdb = db.defined() ? db.data_ptr<T>() : nullptr;
    // one element (a batch or a scalar): s = sigmoid(a), then both gradients
    auto step = [&](auto v, auto w, auto d, int64_t i, auto store) {
      using V = decltype(v);
      const V one(T(1));
      const V s = vec::sigmoid<T>(v);
      if (pda) store(pda + i, d * w * s * (one + v * (one - s)));
      if (pdb) store(pdb + i, d * v * s);
    };
    parallel_elems(a.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      int64_t i = lo;
      for (; i + W <= hi; i += W)
        step(B::load_unaligned(pa + i), B::load_unaligned(pb + i), B::load_unaligned(pd + i), i,
             [](T* p, const B& v) { v.store_unaligned(p); });
      for (; i < hi; ++i) step(pa[i], pb[i], pd[i], i, [](T* p, T v) { *p = v; });
    });
  });
}

}  // namespace xgrad::kernels
