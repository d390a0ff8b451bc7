// core/src/op_helpers.h (private): the small helpers every op file shares, one body each.
//
// - wrap_dim: a dim counted from 0 (negative from the end), range-checked.
// - contig / dense_copy: a contiguous tensor to read a kernel's input from, unrecorded.
// - checked_mul: a product in shape and stride arithmetic, overflow-checked.
// - check_same_dtype: both operands of a binary op have one dtype (xgrad does not promote).
// - bfloat16: widened / rounded (unrecorded float32 <-> bfloat16 copies), in_float (a kernel
//   run in float32 on widened inputs, its output rounded once), scalar_as (a number as a
//   tensor's dtype holds it), promote (torch's dtype promotion where bfloat16 meets another).
// - linear_map: a backward that is a linear map of dout computed by a kernel (scattering a
//   view's gradient, gather's scatter), recorded so that it can be differentiated again.
//
// The version counter has one spelling too: Tensor::bump_version() (xgrad/tensor.h).
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

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

// ---- bfloat16
// A contiguous float32 copy of a bfloat16 tensor (exact), and a bfloat16 copy of a float32
// tensor (each element rounded to nearest even); neither is recorded.
Tensor widened(const Tensor& t);
Tensor rounded(const Tensor& t);

// A reduction of a bfloat16 tensor runs on its float32 copy (accumulating in float32 or wider)
// and rounds its result once: compute_copy(a) is that copy (a itself for another dtype), and
// result_as(out, a) rounds out back when a is bfloat16.
inline Tensor compute_copy(const Tensor& a) { return a.dtype() == kBFloat16 ? widened(a) : a; }
inline Tensor result_as(const Tensor& out, const Tensor& a) {
  return a.dtype() == kBFloat16 ? rounded(out) : out;
}

// out = k(x, out) for a kernel writing a fresh contiguous tensor of x's shape and dtype from
// contiguous inputs: for a bfloat16 x the kernel runs on float32 copies of x (and of `more`,
// widened when bfloat16) and its float32 output is rounded once, which is what torch's CPU
// kernels compute for bfloat16 (float32 arithmetic inside, one rounding of the result).
//   Tensor out = in_float(a, [&](const Tensor& x, const Tensor& o) { kernels::relu_forward(x, o); });
template <class K>
Tensor in_float(const Tensor& x, K k) {
  if (x.dtype() != kBFloat16) {
    Tensor out = empty(x.shape(), x.dtype());
    k(contig(x), out);
    return out;
  }
  Tensor out = empty(x.shape(), kFloat32);
  k(widened(x), out);
  return rounded(out);
}
// The same for a kernel of two inputs of one shape (a backward: x or y, and dout).
template <class K>
Tensor in_float(const Tensor& x, const Tensor& dout, K k) {
  if (x.dtype() != kBFloat16) {
    Tensor out = empty(x.shape(), x.dtype());
    k(contig(x), contig(dout), out);
    return out;
  }
  Tensor out = empty(x.shape(), kFloat32);
  k(widened(x), widened(dout), out);
  return rounded(out);
}

// Throws naming `op`, t's dtype and shape unless t is floating (float32, float64, bfloat16):
// the check of the ops that compute bfloat16 (kernels::check_floating refuses it).
inline void check_floating_any(const char* op, const Tensor& t) {
  if (!t.is_floating_point())
    fail(op, "expected a floating-point tensor (float32, float64 or bfloat16), got ", dtype_name(t.dtype()),
         " of shape ", t.shape());
}

// The number s as a tensor of t's dtype holds it in arithmetic: rounded to bfloat16 for a
// bfloat16 t (torch 1.13 casts a Python number to the tensor's dtype: bf16 x + 0.1 adds
// bfloat16(0.1)); s itself otherwise.
double scalar_as(const Tensor& t, double s);

// torch's type promotion where a bfloat16 tensor meets a tensor of another dtype: with
// float32 / float64 both compute in that dtype, with int64 / bool both compute in bfloat16.
// Returns the pair converted with recorded to() (so the gradient reaching the bfloat16
// operand is rounded back to bfloat16 once, as torch's ToCopyBackward does), or nothing when
// neither is bfloat16 or the dtypes agree (float32 with float64 stays an error: xgrad does
// not promote between them).
std::optional<std::pair<Tensor, Tensor>> promote(const Tensor& a, const Tensor& b);

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
