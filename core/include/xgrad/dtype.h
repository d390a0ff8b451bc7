// xgrad/dtype.h: element types. float32 is the default (like torch.get_default_dtype());
// float64 runs gradchecks in double precision; int64 holds indices and token ids; bool
// holds masks and comparison results; bfloat16 (torch.bfloat16: float32's sign and exponent
// with 7 mantissa bits) stores weights and activations in half the bytes. bfloat16 is a
// floating dtype (is_floating, like torch's is_floating_point) that tensors hold and move
// (creation, to() both ways, item, printing, copies, views, safetensors). The elementwise,
// reduction, activation and indexing ops compute on it as torch's CPU ops do: each element
// widened to float32, the arithmetic in float32, the result rounded once to bfloat16; an op
// that does not take it yet throws naming itself and the dtype (dispatch_float below).
#pragma once
#include <cstddef>
#include <cstdint>

#include "xgrad/error.h"

namespace xgrad {

enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;

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
    case DType::BFloat16:
      return 2;
  }
  return 0;
}

// "torch.float32"-style names without the "torch." prefix: float32, float64, int64, bool,
// bfloat16.
const char* dtype_name(DType t);

constexpr bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16;
}

// One bfloat16 element as it is stored: the top 16 bits of a float32. It has no arithmetic:
// kernels widen it to float32 (bf16_kernel.h) and round their float32 result back.
struct bf16 {
  uint16_t bits;
};

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
template <>
struct dtype_of<bf16> {
  static constexpr DType value = DType::BFloat16;
};

// Calls f(float{}) or f(double{}) for a float32 / float64 dtype, so one generic lambda serves
// both (the element type is decltype(tag)); throws "<op>: expected a floating-point tensor"
// for int64 / bool, and "<op>: does not take bfloat16 tensors yet" for bfloat16.
//   dispatch_float(p.dtype(), "SGD", [&](auto tag) { using T = decltype(tag); ... });
template <class F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::BFloat16:
      fail(op, "does not take bfloat16 tensors yet; convert with .to(kFloat32)");
    default:
      fail(op, "expected a floating-point tensor (float32 or float64), got ", dtype_name(t));
  }
}

}  // namespace xgrad
