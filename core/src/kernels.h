// core/src/kernels.h (private): the loops every op family builds on.
//
// - dispatch_float / dispatch_all: call a generic lambda with a value of the element type.
// - for_each_row: walk N strided operands of one shape row by row, innermost dim last, after
//   merging dims that are contiguous in every operand (so a contiguous tensor is one row).
// - broadcast_shapes / broadcast_strides: NumPy broadcasting (stride 0 on expanded dims).
// - copy_into: dst[...] = src[...] for any layouts, broadcasting src, converting dtype.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "xgrad/tensor.h"

namespace xgrad::kernels {

template <class F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    default: fail(op, "expected a floating-point tensor (float32 or float64), got ", dtype_name(t));
  }
}

template <class F>
decltype(auto) dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Bool: return f(bool{});
  }
  return f(float{});
}

// NumPy broadcasting of two shapes; throws naming `op` and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides of `t` seen as a tensor of shape `target` (t's shape must broadcast to it).
Shape broadcast_strides(const Tensor& t, const Shape& target);

// Calls body(offsets, len, inner) once per innermost row: offsets[k] is operand k's element
// offset of the row start, inner[k] its stride along the row.
template <std::size_t N, class Body>
void for_each_row(const Shape& shape, const std::array<Shape, N>& strides, Body&& body) {
  // merge dims: drop size-1 dims, fuse d with d+1 when contiguous for every operand
  int64_t nd = 0;
  std::array<std::array<int64_t, 16>, N> st{};
  std::array<int64_t, 16> sz{};
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank > 16) fail("for_each_row", "tensors of more than 16 dims are not supported");
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    bool fuse = nd > 0;
    for (std::size_t k = 0; k < N && fuse; ++k)
      fuse = st[k][nd - 1] == strides[k][d] * shape[d];
    if (fuse) {
      sz[nd - 1] *= shape[d];
      for (std::size_t k = 0; k < N; ++k) st[k][nd - 1] = strides[k][d];
    } else {
      sz[nd] = shape[d];
      for (std::size_t k = 0; k < N; ++k) st[k][nd] = strides[k][d];
      ++nd;
    }
  }
  std::array<int64_t, N> off{};
  std::array<int64_t, N> inner{};
  if (nd == 0) {  // a single element
    body(off, int64_t{1}, inner);
    return;
  }
  for (std::size_t k = 0; k < N; ++k) inner[k] = st[k][nd - 1];
  const int64_t len = sz[nd - 1];
  std::array<int64_t, 16> idx{};
  while (true) {
    body(off, len, inner);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      ++idx[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += st[k][d];
      if (idx[d] < sz[d]) break;
      for (std::size_t k = 0; k < N; ++k) off[k] -= st[k][d] * sz[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// dst = src (src broadcast to dst's shape, converted to dst's dtype). No autograd record,
// no version bump: callers do that.
void copy_into(const Tensor& dst, const Tensor& src);

// out = f(a) elementwise for same-typed a/out (out contiguous, same shape as a).
template <class T, class U, class F>
void map_unary(const Tensor& a, const Tensor& out, F&& f) {
  const T* pa = a.data_ptr<T>();
  U* po = out.data_ptr<U>();
  std::array<Shape, 2> st{out.strides(), a.strides()};
  for_each_row<2>(a.shape(), st, [&](const std::array<int64_t, 2>& off, int64_t n,
                                     const std::array<int64_t, 2>& in) {
    U* o = po + off[0];
    const T* x = pa + off[1];
    if (in[0] == 1 && in[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * in[0]] = f(x[i * in[1]]);
    }
  });
}

// out = f(a, b) with a and b broadcast to out's shape (out contiguous).
template <class T, class U, class F>
void map_binary(const Tensor& a, const Tensor& b, const Tensor& out, F&& f) {
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  U* po = out.data_ptr<U>();
  std::array<Shape, 3> st{out.strides(), broadcast_strides(a, out.shape()),
                          broadcast_strides(b, out.shape())};
  for_each_row<3>(out.shape(), st, [&](const std::array<int64_t, 3>& off, int64_t n,
                                       const std::array<int64_t, 3>& in) {
    U* o = po + off[0];
    const T* x = pa + off[1];
    const T* y = pb + off[2];
    if (in[0] == 1 && in[1] == 1 && in[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (in[0] == 1 && in[1] == 1 && in[2] == 0) {
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * in[0]] = f(x[i * in[1]], y[i * in[2]]);
    }
  });
}

}  // namespace xgrad::kernels
