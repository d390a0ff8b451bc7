// core/src/op_helpers.h (private): the small helpers every op file shares, one body each.
//
// - wrap_dim: a dim counted from 0 (negative from the end), range-checked.
// - contig / dense_copy: a contiguous tensor to read a kernel's input from, unrecorded.
// - checked_mul: a product in shape and stride arithmetic, overflow-checked.
//
// The version counter has one spelling too: Tensor::bump_version() (xgrad/tensor.h).
#pragma once
#include <algorithm>
#include <cstdint>

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

}  // namespace xgrad
