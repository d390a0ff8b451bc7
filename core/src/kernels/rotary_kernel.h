// core/src/kernels/rotary_kernel.h (private, the kernel floor): the forward/backward kernel
// pair of core/src/ops/rotary.cpp: rotary embeddings in the rotate-half convention.
//
// A row is the last dim of x (D = 2h elements) at position p, the row's index in dim -2;
// cos and sin are contiguous (t, D) tables of x's dtype. With x = (x1, x2) in halves:
//   out = x * cos + cat(-x2, x1) * sin
//     out[i]     = x1[i] * cos[i]     - x2[i] * sin[i]          i < h
//     out[h + i] = x2[i] * cos[h + i] + x1[i] * sin[h + i]
// Its transpose (the backward) maps dout = (d1, d2) to
//   dx = dout * cos - cat(-(dout * sin)_2, (dout * sin)_1)
//     dx[i]     = d1[i] * cos[i]     + d2[i] * sin[h + i]
//     dx[h + i] = d2[i] * cos[h + i] - d1[i] * sin[i]
// Each row is computed whole by one thread from its own elements, so no result depends on
// the thread count or on x's layout.
#pragma once
#include <cstdint>

#include <xsimd/xsimd.hpp>

#include "kernels.h"

namespace xgrad::kernels {

namespace rotary {

// One row a = (a1, a2) in halves of h with the tables' rows c = (c1, c2), s = (s1, s2): the
// forward's map (Transposed false) or its transpose, as above.
template <class T, bool Transposed>
inline void rotate_row(const T* a, const T* c, const T* s, T* out, int64_t h) {
  using B = xsimd::batch<T>;
  constexpr int64_t W = static_cast<int64_t>(B::size);
  auto pair = [&](auto a1, auto a2, auto c1, auto c2, auto s1, auto s2, auto& o1, auto& o2) {
    if constexpr (Transposed) {
      o1 = a1 * c1 + a2 * s2;
      o2 = a2 * c2 - a1 * s1;
    } else {
      o1 = a1 * c1 - a2 * s1;
      o2 = a2 * c2 + a1 * s2;
    }
  };
  int64_t i = 0;
  for (; i + W <= h; i += W) {
    B o1, o2;
    pair(B::load_unaligned(a + i), B::load_unaligned(a + h + i), B::load_unaligned(c + i),
         B::load_unaligned(c + h + i), B::load_unaligned(s + i), B::load_unaligned(s + h + i), o1, o2);
    o1.store_unaligned(out + i);
    o2.store_unaligned(out + h + i);
  }
  for (; i < h; ++i) pair(a[i], a[h + i], c[i], c[h + i], s[i], s[h + i], out[i], out[h + i]);
}

// rotate_row over every row of x (shape `shape`, strides `strides`, last stride 1) into the
// contiguous out of the same shape.
template <class T, bool Transposed>
void rotate_rows(const T* x, const Shape& shape, const Shape& strides, const T* c, const T* s, T* out) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t D = shape[nd - 1], t = shape[nd - 2], h = D / 2;
  const int64_t rows = D == 0 ? 0 : numel_of(shape) / D;
  parallel_rows(rows, D, kGrain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off = 0;  // x's offset of row r: its index in each leading dim times that stride
      for (int64_t d = nd - 2, rem = r; d >= 0; --d) {
        off += (rem % shape[d]) * strides[d];
        rem /= shape[d];
      }
      const int64_t p = r % t;  // the row's position
      rotate_row<T, Transposed>(x + off, c + p * D, s + p * D, out + r * D, h);
    }
  });
}

}  // namespace rotary

// out = x * cos + rotate_half(x) * sin for x (..., t, D) of any strides with stride(-1) == 1,
// into the contiguous out.
inline void rotary_emb_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  dispatch_float(x.dtype(), "apply_rotary_emb", [&](auto tag) {
    using T = decltype(tag);
    rotary::rotate_rows<T, false>(x.data_ptr<T>(), x.shape(), x.strides(), cos.data_ptr<T>(),
                                  sin.data_ptr<T>(), out.data_ptr<T>());
  });
}

// dx = dout * cos - rotate_half(dout * sin) for dout (..., t, D) with stride(-1) == 1, into
// the contiguous dx.
inline void rotary_emb_backward(const Tensor& dout, const Tensor& cos, const Tensor& sin, const Tensor& dx) {
  dispatch_float(dout.dtype(), "apply_rotary_emb_backward", [&](auto tag) {
    using T = decltype(tag);
    rotary::rotate_rows<T, true>(dout.data_ptr<T>(), dout.shape(), dout.strides(), cos.data_ptr<T>(),
                                 sin.data_ptr<T>(), dx.data_ptr<T>());
  });
}

}  // namespace xgrad::kernels
