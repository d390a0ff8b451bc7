// core/src/ops/compare.cpp: the comparisons (eq, ne, lt, le, gt, ge, tensor against tensor or
// against a scalar) and logical_not. They have no gradient and take every dtype; the result
// is a bool tensor of the broadcast shape, from one map_typed loop
// (kernels/elementwise_kernel.h). bfloat16 elements compare widened to float32 (exact), against
// a number rounded to bfloat16 first, or promoted as torch does against another dtype.
#include <type_traits>

#include "elementwise_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

using kernels::map_typed;
using kernels::types;
using kernels::widen;

template <class Cmp>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, Cmp cmp) {
  if (auto p = promote(a, b)) return compare(op, p->first, p->second, cmp);
  check_same_dtype(op, a, b);
  const Shape shape = kernels::broadcast_shapes(op, a.shape(), b.shape());
  if (a.dtype() == kBFloat16)
    return map_typed<bool>(
        kBool, shape, {a, b}, [cmp](bf16 x, bf16 y) { return cmp(widen(x), widen(y)); }, types<bf16, bf16>{});
  return kernels::dispatch_all(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return map_typed<bool>(kBool, shape, {a, b}, cmp, types<T, T>{});
  });
}

// Float tensors compare against the scalar cast to their dtype (torch.tensor([0.1]) == 0.1
// is true); int64 and bool compare exactly in double.
template <class Cmp>
Tensor compare(const char* op, const Tensor& a, double s, Cmp cmp) {
  if (a.dtype() == kBFloat16)
    return map_typed<bool>(
        kBool, a.shape(), {a},
        [v = static_cast<float>(scalar_as(a, s)), cmp](bf16 x) { return cmp(widen(x), v); }, types<bf16>{});
  return kernels::dispatch_all(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      return map_typed<bool>(
          kBool, a.shape(), {a}, [v = static_cast<T>(s), cmp](T x) { return cmp(x, v); }, types<T>{});
    } else {
      return map_typed<bool>(
          kBool, a.shape(), {a}, [s, cmp](T x) { return cmp(static_cast<double>(x), s); }, types<T>{});
    }
  });
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}
Tensor eq(const Tensor& a, double b) {
  return compare("eq", a, b, [](auto x, auto y) { return x == y; });
}
Tensor ne(const Tensor& a, double b) {
  return compare("ne", a, b, [](auto x, auto y) { return x != y; });
}
Tensor lt(const Tensor& a, double b) {
  return compare("lt", a, b, [](auto x, auto y) { return x < y; });
}
Tensor le(const Tensor& a, double b) {
  return compare("le", a, b, [](auto x, auto y) { return x <= y; });
}
Tensor gt(const Tensor& a, double b) {
  return compare("gt", a, b, [](auto x, auto y) { return x > y; });
}
Tensor ge(const Tensor& a, double b) {
  return compare("ge", a, b, [](auto x, auto y) { return x >= y; });
}

Tensor logical_not(const Tensor& a) {
  profiler::RecordFunction rec("logical_not");
  if (a.dtype() == kBFloat16)
    return map_typed<bool>(
        kBool, a.shape(), {a}, [](bf16 x) { return widen(x) == 0.0f; }, types<bf16>{});
  return kernels::dispatch_all(a.dtype(), "logical_not", [&](auto tag) {
    using T = decltype(tag);
    return map_typed<bool>(
        kBool, a.shape(), {a}, [](T x) { return x == T(0); }, types<T>{});
  });
}

}  // namespace xgrad
