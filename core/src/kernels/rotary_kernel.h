// core/src/kernels/rotary_kernel.h (private, the kernel floor): the forward/backward kernel
// pair of core/src/ops/rotary.cpp: rotary embeddings in the rotate-half convention.
//
// A row is the last dim of x (D = 2h elements) at position p, the row's index in dim -2;
// cos and sin are contiguous (t, D) tables of x's dtype (float32 for a bfloat16 x, whose
// rows are computed in float32 and rounded once). With x = (x1, x2) in halves:
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
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include "bf16_kernel.h"
#include "kernels.h"

namespace xgrad::kernels {

namespace rotary {

// The pair map on elements i of the halves: the forward's (Transposed false) or its transpose,
// as above. Called with batches and with scalars.
template <bool Transposed, class V>
inline void rotate_pair(V a1, V a2, V c1, V c2, V s1, V s2, V& o1, V& o2) {
  if constexpr (Transposed) {
    o1 = a1 * c1 + a2 * s2;
    o2 = a2 * c2 - a1 * s1;
  } else {
    o1 = a1 * c1 - a2 * s1;
    o2 = a2 * c2 + a1 * s2;
  }
}

// Elements i .. of the halves in batches of B while a whole batch fits; returns the next i.
template <class B, bool Transposed, class T>
inline int64_t rotate_batches(const T* a, const T* c, const T* s, T* out, int64_t h, int64_t i) {
  constexpr int64_t W = static_cast<int64_t>(B::size);
  for (; i + W <= h; i += W) {
    B o1, o2;
    rotate_pair<Transposed>(B::load_unaligned(a + i), B::load_unaligned(a + h + i), B::load_unaligned(c + i),
                            B::load_unaligned(c + h + i), B::load_unaligned(s + i),
                            B::load_unaligned(s + h + i), o1, o2);
    o1.store_unaligned(out + i);
    o2.store_unaligned(out + h + i);
  }
  return i;
}

// One row a = (a1, a2) in halves of h with the tables' rows c = (c1, c2), s = (s1, s2): whole
// batches, then half batches (a head_dim of 16 floats has halves of 8), then scalars.
template <class T, bool Transposed>
inline void rotate_row(const T* a, const T* c, const T* s, T* out, int64_t h) {
  using B = xsimd::batch<T>;
  using Half = xsimd::make_sized_batch_t<T, B::size / 2>;
  int64_t i = rotate_batches<B, Transposed>(a, c, s, out, h, 0);
  if constexpr (!std::is_void_v<Half>) i = rotate_batches<Half, Transposed>(a, c, s, out, h, i);
  for (; i < h; ++i)
    rotate_pair<Transposed>(a[i], a[h + i], c[i], c[h + i], s[i], s[h + i], out[i], out[h + i]);
}

// row(r, off, p) for every row r of x (shape `shape`, strides `strides`), off its offset in x
// and p its position (its index in dim -2), rows split over threads. A thread finds its first
// row's index in x's leading dims once, then steps it like an odometer.
template <class Row>
void for_each_row(const Shape& shape, const Shape& strides, Row&& row) {
  const int64_t lead = static_cast<int64_t>(shape.size()) - 1;  // x's dims before the last
  const int64_t D = shape[lead];
  const int64_t rows = D == 0 ? 0 : numel_of(shape) / D;
  parallel_rows(rows, D, kGrain, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> idx(static_cast<std::size_t>(lead));  // row r0's index in each leading dim
    int64_t off = 0;                                           // and its offset in x
    for (int64_t d = lead - 1, rem = r0; d >= 0; --d) {
      idx[d] = rem % shape[d];
      off += idx[d] * strides[d];
      rem /= shape[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(r, off, idx[lead - 1]);
      for (int64_t d = lead - 1; d >= 0; --d) {  // the next row
        off += strides[d];
        if (++idx[d] < shape[d]) break;
        off -= idx[d] * strides[d];
        idx[d] = 0;
      }
    }
  });
}

// rotate_row over every row of x (last stride 1) into the contiguous out of x's shape.
template <class T, bool Transposed>
void rotate_rows(const T* x, const Shape& shape, const Shape& strides, const T* c, const T* s, T* out) {
  const int64_t D = shape.back(), h = D / 2;
  for_each_row(shape, strides, [&](int64_t r, int64_t off, int64_t p) {
    rotate_row<T, Transposed>(x + off, c + p * D, s + p * D, out + r * D, h);
  });
}

// The same for bfloat16 x and out with float32 tables: each row is widened, rotated in
// float32 and rounded once, the float32 kernel's bits on a widened copy of x.
template <bool Transposed>
void rotate_rows_bf16(const bf16* x, const Shape& shape, const Shape& strides, const float* c, const float* s,
                      bf16* out) {
  const int64_t D = shape.back(), h = D / 2;
  for_each_row(shape, strides, [&](int64_t r, int64_t off, int64_t p) {
    thread_local std::vector<float> buf;  // the widened row, then its rotation
    buf.resize(static_cast<std::size_t>(2 * D));
    bf16_to_float_n(&x[off].bits, buf.data(), D);
    rotate_row<float, Transposed>(buf.data(), c + p * D, s + p * D, buf.data() + D, h);
    float_to_bf16_n(buf.data() + D, &out[r * D].bits, D);
  });
}

}  // namespace rotary

// out = x * cos + rotate_half(x) * sin for x (..., t, D) of any strides with stride(-1) == 1,
// into the contiguous out. A bfloat16 x (and out) takes float32 tables.
inline void rotary_emb_forward(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) {
  if (x.dtype() == kBFloat16)
    return rotary::rotate_rows_bf16<false>(x.data_ptr<bf16>(), x.shape(), x.strides(), cos.data_ptr<float>(),
                                           sin.data_ptr<float>(), out.data_ptr<bf16>());
  dispatch_float(x.dtype(), "apply_rotary_emb", [&](auto tag) {
    using T = decltype(tag);
    rotary::rotate_rows<T, false>(x.data_ptr<T>(), x.shape(), x.strides(), cos.data_ptr<T>(),
                                  sin.data_ptr<T>(), out.data_ptr<T>());
  });
}

// dx = dout * cos - rotate_half(dout * sin) for dout (..., t, D) with stride(-1) == 1, into
// the contiguous dx. A bfloat16 dout (and dx) takes float32 tables.
inline void rotary_emb_backward(const Tensor& dout, const Tensor& cos, const Tensor& sin, const Tensor& dx) {
  if (dout.dtype() == kBFloat16)
    return rotary::rotate_rows_bf16<true>(dout.data_ptr<bf16>(), dout.shape(), dout.strides(),
                                          cos.data_ptr<float>(), sin.data_ptr<float>(), dx.data_ptr<bf16>());
  dispatch_float(dout.dtype(), "apply_rotary_emb_backward", [&](auto tag) {
    using T = decltype(tag);
    rotary::rotate_rows<T, true>(dout.data_ptr<T>(), dout.shape(), dout.strides(), cos.data_ptr<T>(),
                                 sin.data_ptr<T>(), dx.data_ptr<T>());
  });
}

}  // namespace xgrad::kernels
