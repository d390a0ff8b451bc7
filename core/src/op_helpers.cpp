// core/src/op_helpers.cpp: the dense copies op files read their inputs from, and the
// bfloat16 conversions and promotion (op_helpers.h).
#include "op_helpers.h"

#include "bf16_kernel.h"
#include "kernels.h"

namespace xgrad {

Tensor dense_copy(const Tensor& t) {
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

Tensor contig(const Tensor& t) { return t.is_contiguous() ? t : dense_copy(t); }

Tensor widened(const Tensor& t) {
  Tensor c = empty(t.shape(), kFloat32);
  kernels::copy_into(c, t);
  return c;
}

Tensor rounded(const Tensor& t) {
  Tensor c = empty(t.shape(), kBFloat16);
  kernels::copy_into(c, t);
  return c;
}

double scalar_as(const Tensor& t, double s) {
  if (t.dtype() != kBFloat16) return s;
  return kernels::bf16_to_float(kernels::float_to_bf16(static_cast<float>(s)));
}

std::optional<std::pair<Tensor, Tensor>> promote(const Tensor& a, const Tensor& b) {
  const DType da = a.dtype(), db = b.dtype();
  if (da == db || (da != kBFloat16 && db != kBFloat16)) return std::nullopt;
  const DType other = da == kBFloat16 ? db : da;
  const DType common = (other == kFloat32 || other == kFloat64) ? other : kBFloat16;
  return std::pair{da == common ? a : a.to(common), db == common ? b : b.to(common)};
}

}  // namespace xgrad
