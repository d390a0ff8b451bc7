// core/src/ops/creation.cpp: tensors from nothing (zeros, ones, full, arange, linspace, eye),
// from random streams (rand, randn, randint: torch's streams, see random.h), from values
// (tensor({...}), from_vector) and the *_like forms. None of these record gradients.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "bf16_kernel.h"
#include "kernels.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

Tensor zeros(const Shape& shape, DType dtype) {
  profiler::RecordFunction rec("zeros");
  Tensor t = empty(shape, dtype);
  std::memset(t.raw_data_ptr(), 0, static_cast<std::size_t>(t.numel()) * itemsize(dtype));
  return t;
}

Tensor detail::full_impl(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (dtype == kBFloat16) {  // value -> float32 -> bfloat16, as c10::BFloat16 converts a double
    const uint16_t v = kernels::float_to_bf16(static_cast<float>(value));
    std::fill_n(static_cast<uint16_t*>(t.raw_data_ptr()), t.numel(), v);
    return t;
  }
  kernels::dispatch_all(dtype, "full", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    const T v = static_cast<T>(value);
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = v;
  });
  return t;
}

Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }

Tensor detail::arange_impl(double start, double end, double step, DType dtype) {
  if (step == 0) fail("arange", "step must be nonzero");
  if ((end - start) / step < 0)
    fail("arange", "upper bound and step sign are inconsistent: start ", start, ", end ", end, ", step ",
         step);
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  Tensor t = empty({n}, dtype);
  kernels::dispatch_all(dtype, "arange", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<double>(i) * step);
  });
  return t;
}

Tensor linspace(double start, double end, Int steps, DType dtype) {
  profiler::RecordFunction rec("linspace");
  if (steps < 0) fail("linspace", "number of steps must be non-negative, got ", steps);
  if (!is_floating(dtype)) fail("linspace", "expects a floating dtype, got ", dtype_name(dtype));
  Tensor t = empty({steps}, dtype);
  kernels::dispatch_float(dtype, "linspace", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    if (steps == 1) p[0] = static_cast<T>(start);
    if (steps < 2) return;
    // reference: torch's linspace kernel fills the first half from start and the second
    // half from end, which keeps both endpoints exact
    const double step = (end - start) / static_cast<double>(steps - 1);
    const int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i)
      p[i] = i < half ? static_cast<T>(start + step * static_cast<double>(i))
                      : static_cast<T>(end - step * static_cast<double>(steps - i - 1));
  });
  return t;
}

Tensor eye(Int n, Int m, DType dtype) {
  profiler::RecordFunction rec("eye");
  if (m < 0) m = n;
  if (n < 0) fail("eye", "n must be non-negative, got ", n);
  Tensor t = zeros({n, m}, dtype);
  kernels::dispatch_all(dtype, "eye", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = static_cast<T>(1);
  });
  return t;
}

Tensor rand(const Shape& shape, Generator* gen, DType dtype) {
  profiler::RecordFunction rec("rand");
  if (!is_floating(dtype)) fail("rand", "expects a floating dtype, got ", dtype_name(dtype));
  if (dtype == kBFloat16)
    fail("rand", "does not take bfloat16 yet; draw float32 and convert with .to(kBFloat16)");
  Tensor t = empty(shape, dtype);
  t.uniform_(0.0, 1.0, gen);
  return t;
}

Tensor randn(const Shape& shape, Generator* gen, DType dtype) {
  profiler::RecordFunction rec("randn");
  if (!is_floating(dtype)) fail("randn", "expects a floating dtype, got ", dtype_name(dtype));
  if (dtype == kBFloat16)
    fail("randn", "does not take bfloat16 yet; draw float32 and convert with .to(kBFloat16)");
  Tensor t = empty(shape, dtype);
  t.normal_(0.0, 1.0, gen);
  return t;
}

Tensor randint(Int low, Int high, const Shape& shape, Generator* gen) {
  profiler::RecordFunction rec("randint");
  if (high <= low) fail("randint", "expects low < high, got low ", low, " and high ", high);
  Tensor t = empty(shape, kInt64);
  Generator& g = gen ? *gen : default_generator();
  g.random_int(t.data_ptr<int64_t>(), t.numel(), low, high);
  return t;
}

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, t.dtype()); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype()); }
Tensor rand_like(const Tensor& t, Generator* gen) { return rand(t.shape(), gen, t.dtype()); }
Tensor randn_like(const Tensor& t, Generator* gen) { return randn(t.shape(), gen, t.dtype()); }

template <class T>
static Tensor from_vector_impl(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != numel_of(shape))
    fail("from_vector", values.size(), " values do not fill shape ", shape, " (", numel_of(shape),
         " elements)");
  Tensor t = empty(shape, dtype_of<T>::value);
  if (!values.empty()) std::memcpy(t.raw_data_ptr(), values.data(), values.size() * sizeof(T));
  return t;
}
Tensor from_vector(const std::vector<float>& v, const Shape& s) { return from_vector_impl(v, s); }
Tensor from_vector(const std::vector<double>& v, const Shape& s) { return from_vector_impl(v, s); }
Tensor from_vector(const std::vector<int64_t>& v, const Shape& s) { return from_vector_impl(v, s); }

namespace detail {
Tensor tensor_from_values(const std::vector<double>& values, const Shape& shape, DType dtype) {
  profiler::RecordFunction rec("tensor_from_values");
  Tensor t = empty(shape, dtype);
  if (dtype == kBFloat16) {  // each value -> float32 -> bfloat16
    auto* p = static_cast<uint16_t*>(t.raw_data_ptr());
    for (std::size_t i = 0; i < values.size(); ++i)
      p[i] = kernels::float_to_bf16(static_cast<float>(values[i]));
    return t;
  }
  kernels::dispatch_all(dtype, "tensor", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return t;
}

Shape nested_shape_checked(const char* op, const std::vector<Shape>& row_shapes, Shape outer) {
  if (row_shapes.empty()) return outer;
  for (const Shape& r : row_shapes)
    if (r != row_shapes.front()) fail(op, "nested lists have ragged sizes: ", row_shapes.front(), " vs ", r);
  outer.insert(outer.end(), row_shapes.front().begin(), row_shapes.front().end());
  return outer;
}
}  // namespace detail

}  // namespace xgrad
