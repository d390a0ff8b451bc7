// xgrad/dtype.h: element types. float32 is the default (like torch.get_default_dtype());
// float64 runs gradchecks in double precision; int64 holds indices and token ids; bool
// holds masks and comparison results.
#pragma once
#include <cstddef>
#include <cstdint>

#include "xgrad/error.h"

namespace xgrad {

enum class DType : uint8_t { Float32, Float64, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

constexpr std::size_t itemsize(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
  }
  return 0;
}

// "torch.float32"-style names without the "torch." prefix: float32, float64, int64, bool.
const char* dtype_name(DType t);

constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};

// Calls f(float{}) or f(double{}) for a float32 / float64 dtype, so one generic lambda serves
// both (the element type is decltype(tag)); throws "<op>: expected a floating-point tensor"
// for any other dtype.
//   dispatch_float(p.dtype(), "SGD", [&](auto tag) { using T = decltype(tag); ... });
template <class F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    default:
      fail(op, "expected a floating-point tensor (float32 or float64), got ", dtype_name(t));
  }
}

}  // namespace xgrad
