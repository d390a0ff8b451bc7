// core/src/op_helpers.h (private): the small helpers every op file shares, one body each.
//
// - wrap_dim: a dim counted from 0 (negative from the end), range-checked.
// - contig / dense_copy: a contiguous tensor to read a kernel's input from, unrecorded.
// - checked_mul: a product in shape and stride arithmetic, overflow-checked.
// - check_same_dtype: both operands of a binary op have one dtype (xgrad does not promote).
// - linear_map: a backward that is a linear map of dout computed by a kernel (scattering a
//   view's gradient, gather's scatter), recorded so that it can be differentiated again.
//
// The version counter has one spelling too: Tensor::bump_version() (xgrad/tensor.h).
#pragma once
#include <algorithm>
#include <cstdint>

#include "xgrad/autograd.h"
#include "xgrad/tensor.h"

namespace xgrad {

// Dim d of a tensor of `rank` dims and `shape` counted from 0: negative d counts from the end,
// and a 0-d tensor is taken as 1-D, as torch does. `rank` is the shape's size, or one more
// where a new dim is inserted (unsqueeze, stack). Throws naming `op` and the shape when d is
// out of range.
inline int64_t wrap_dim(const char* op, int64_t d, int64_t rank, const Shape& shape) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    fail(op, "dimension ", d, " is out of range for a tensor of shape ", shape, " (expected in [", -r, ", ",
         r - 1, "])");
  return d < 0 ? d + r : d;
}
inline int64_t wrap_dim(const char* op, int64_t d, const Shape& shape) {
  return wrap_dim(op, d, static_cast<int64_t>(shape.size()), shape);
}

// A fresh contiguous copy of `t` (any layout), not recorded: a kernel's dense operand.
Tensor dense_copy(const Tensor& t);
// `t` itself when contiguous, else dense_copy(t); callers record their op against t.
Tensor contig(const Tensor& t);

// a * b; an int64 overflow throws naming `shape` (the shape whose count or stride it is).
int64_t checked_mul(int64_t a, int64_t b, const Shape& shape);

// Both tensors must have one dtype: no silent float32/float64 promotion.
inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(op, "dtype mismatch: ", dtype_name(a.dtype()), " tensor of shape ", a.shape(), " and ",
         dtype_name(b.dtype()), " tensor of shape ", b.shape(),
         " (xgrad does not promote dtypes; convert one with .to(...))");
}

// y = L(x) for a linear map L computed by a kernel (l), whose adjoint L^T is computed by lt.
// When grad mode is on and x requires grad (a backward being recorded: create_graph), y is
// recorded as `name` with backward dx = L^T(dy), itself recorded as `adjoint` with backward L,
// so every order of derivative exists. Otherwise it is l(x) and nothing else. l and lt take a
// tensor without history and capture only values.
//   in the forward pass out = gather(a, index), so da = scatter_add(zeros, index, dout):
//   grads.add(0, linear_map("ScatterAddBackward0", "GatherBackward0", dout, scatter, gather));
template <class L, class Lt>
Tensor linear_map(const char* name, const char* adjoint, const Tensor& x, const L& l, const Lt& lt) {
  if (!GradMode::is_enabled() || !x.requires_grad()) return l(x);
  Tensor y = l(x.detach());
  return record(name, y, {x}, [name, adjoint, l, lt](const Tensor& dy, Grads& grads) {
    // y = L(x), so dx = L^T(dy)
    grads.add(0, linear_map(adjoint, name, dy, lt, l));
  });
}

}  // namespace xgrad
