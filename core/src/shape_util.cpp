// core/src/shape_util.cpp: element counts and row-major strides of a shape, with every
// product checked for int64 overflow (a shape too large to address throws naming it).
#include <algorithm>
#include <limits>

#include "op_helpers.h"
#include "xgrad/tensor.h"

namespace xgrad {

int64_t checked_mul(int64_t a, int64_t b, const Shape& shape) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail("shape", "the element count or a stride of shape ", shape, " overflows int64");
  return r;
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (s == 0) return 0;  // a zero makes any product 0 (torch: zeros(0, 2**40, 2**40) is fine)
  for (int64_t s : shape) n = checked_mul(n, s, shape);
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  const bool empty = numel_of(shape) == 0;  // no element is addressed: a stride may saturate
  int64_t acc = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    if (d == 0) break;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(shape[d], 1), &acc)) {
      if (!empty) checked_mul(acc, shape[d], shape);  // throws naming the shape
      acc = std::numeric_limits<int64_t>::max();
    }
  }
  return st;
}

}  // namespace xgrad
