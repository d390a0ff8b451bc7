// <xgrad/xtensor.h>: xtensor arrays as xgrad Tensors and Tensors as xtensor expressions.
//
// The only xgrad header that includes xtensor: the library itself never uses xtensor, so a
// program that includes this header links xtensor itself (CMake: `find_package(xtensor)`,
// `target_link_libraries(app PRIVATE xgrad::xgrad xtensor)`). examples/xtensor_interop.cpp
// walks through everything below.
//
// xtensor -> xgrad, named after what a PyTorch user knows from NumPy:
//
//   from_xtensor(std::make_shared<xt::xarray<float>>(...))  shares the memory and keeps the
//                     array alive (torch.from_numpy): writes on either side show on the other
//   from_xtensor(std::move(a))      takes the array over: no copy, `a` is left empty
//   from_xtensor(a, xgrad::borrow)  borrows any strided expression (an array, a transpose, a
//                     strided view, a slice): no copy, and YOU keep `a` alive and unresized
//                     while the tensor (or any view of it) is used
//   xgrad::tensor(expr)             copies any expression, lazy ones too (torch.tensor(ndarray))
//
//   `from_xtensor(a)` on a named array or a view does not compile: say which you mean.
//   Zero-copy works for every layout with non-negative strides: row- or column-major,
//   transposed, sliced, strides of 0 (a broadcast adaptor). Negative strides (xt::flip) throw
//   xgrad::Error, as torch.from_numpy does; xgrad::tensor(expr) copies them. Element types:
//   float, double, int64_t and bool map to float32, float64, int64 and bool; any other type
//   (int32, uint8, half, ...) throws xgrad::Error naming the shape and the type (convert
//   first: xgrad::tensor(xt::cast<int64_t>(a))).
//
// xgrad -> xtensor:
//
//   auto v = to_xtensor<float>(t);  an xt::xarray_adaptor over t's memory (t.numpy()): no
//                     copy, any strides; it holds a reference to the storage, so it stays valid
//                     after `t` is gone. `xt::xarray<float> a = to_xtensor<float>(t);` copies.
//
// Autograd: a tensor made from xtensor memory is a leaf that does not require grad (call
// `.requires_grad_()` on it to train it). to_xtensor of a tensor that requires grad throws, as
// torch's .numpy() does: use `to_xtensor<float>(t.detach())`. Writes made through xtensor are
// invisible to autograd's version counter (as NumPy writes are to torch's): do not modify
// memory that a recorded op saved for backward.
//
// xtensor's assignment rules that apply here: assigning an expression of a
// different shape to an adaptor reshapes or resizes it instead of broadcasting (use
// `xt::noalias(v) = expr` with the same shape, or element-wise ops like `v *= 2`); resizing a
// shared or borrowed array moves its memory away from every tensor that views it (don't).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xtensor.hpp>

#include "xgrad/error.h"
#include "xgrad/tensor.h"

namespace xgrad {

// The tag that asks from_xtensor to borrow: from_xtensor(a, xgrad::borrow).
struct Borrow {
  explicit Borrow() = default;
};
inline constexpr Borrow borrow{};

namespace xtensor_detail {

// The xgrad dtype of a C++ element type; other types are refused at run time with their name.
template <class T>
constexpr bool has_dtype = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                           (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 8);

template <class T>
constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  else if constexpr (std::is_same_v<T, double>) return kFloat64;
  else if constexpr (std::is_same_v<T, bool>) return kBool;
  else return kInt64;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_floating_point_v<T>) {
    return sizeof(T) == 4 ? "float32" : sizeof(T) == 8 ? "float64" : "a floating type xgrad lacks";
  } else if constexpr (std::is_integral_v<T>) {
    constexpr bool s = std::is_signed_v<T>;
    switch (sizeof(T)) {
      case 1:
        return s ? "int8" : "uint8";
      case 2:
        return s ? "int16" : "uint16";
      case 4:
        return s ? "int32" : "uint32";
      default:
        return s ? "int64" : "uint64";
    }
  } else {
    return "a non-arithmetic type";
  }
}

template <class T>
DType checked_dtype(const char* op, const Shape& shape) {
  if constexpr (has_dtype<T>) {
    (void)op, (void)shape;
    return dtype_for<T>();
  } else {
    fail(op, "xgrad has no ", type_name<T>(), " dtype (an xtensor expression of shape ", shape,
         "); xgrad has float32, float64, int64 and bool: convert first, e.g. "
         "xgrad::tensor(xt::cast<int64_t>(a)) or xt::cast<float>(a)");
  }
}

// xarray / xtensor / xtensor_fixed containers own their memory; views and adaptors do not.
template <class E>
struct is_owning_container : std::false_type {};
template <class EC, xt::layout_type L, class SC, class Tag>
struct is_owning_container<xt::xarray_container<EC, L, SC, Tag>> : std::true_type {};
template <class EC, std::size_t N, xt::layout_type L, class Tag>
struct is_owning_container<xt::xtensor_container<EC, N, L, Tag>> : std::true_type {};
template <class E>
concept OwningContainer = is_owning_container<std::remove_cvref_t<E>>::value;

// An expression with memory behind it: a pointer, an element offset and element strides.
template <class E>
concept Strided = requires(const E& e) {
  e.data();
  e.data_offset();
  e.strides();
  e.shape();
};

template <class E>
struct is_shared_ptr : std::false_type {};
template <class T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};

template <class>
inline constexpr bool always_false = false;

// Wraps the memory of a strided expression (its first element at e.data() + e.data_offset()).
template <class E>
Tensor wrap(const E& e, std::shared_ptr<void> owner, const char* op) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(e.data())>>;
  Shape shape(e.shape().begin(), e.shape().end());
  Shape strides(e.strides().begin(), e.strides().end());
  const DType dtype = checked_dtype<T>(op, shape);
  for (int64_t s : strides)
    if (s < 0)
      fail(op, "cannot share an xtensor expression of shape ", shape, " with strides ", strides,
           ": xgrad tensors, like torch's, have no negative strides (torch.from_numpy refuses "
           "them too); copy it with xgrad::tensor(expr)");
  // xtensor gives size-1 dims a stride of 0; any stride addresses the same element there, so
  // they get the row-major one, as torch's tensors have.
  int64_t row_major = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) strides[d] = row_major;
    row_major *= shape[d] == 0 ? 1 : shape[d];
  }
  // xt views over a const-returning data() (xt::view) point into a mutable array: the tensor
  // writes where the view would.
  T* first = const_cast<T*>(e.data()) + e.data_offset();
  return from_blob(static_cast<void*>(first), shape, strides, dtype, std::move(owner));
}

}  // namespace xtensor_detail

// ------------------------------------------------------------------ xtensor -> xgrad

// Shares the memory of an xarray / xtensor held by a shared_ptr, like torch.from_numpy: no
// copy, writes on either side show on the other, and the tensor (and every view of it) keeps
// the container alive. Do not resize the container while tensors use it.
template <class C>
requires xtensor_detail::OwningContainer<C> &&(!std::is_const_v<C>)Tensor
    from_xtensor(std::shared_ptr<C> container) {
  if (!container) throw Error("from_xtensor: null shared_ptr");
  const C& c = *container;
  return xtensor_detail::wrap(c, std::shared_ptr<void>(std::move(container)), "from_xtensor");
}

// Takes an xarray / xtensor over (pass it with std::move): no copy; the tensor owns it now.
template <class C>
requires xtensor_detail::OwningContainer<C> &&(!std::is_lvalue_reference_v<C>)Tensor
    from_xtensor(C&& container) {
  return from_xtensor(std::make_shared<std::remove_cvref_t<C>>(std::move(container)));
}

// Anything else (a named array, a view, a lazy expression) without xgrad::borrow does not say
// how the memory is shared: refuse it at compile time.
template <class E>
requires(!xtensor_detail::is_shared_ptr<std::remove_cvref_t<E>>::value &&
         !(xtensor_detail::OwningContainer<E> && !std::is_lvalue_reference_v<E>)) Tensor from_xtensor(E&&) {
  static_assert(xtensor_detail::always_false<E>,
                "xgrad::from_xtensor(a): say how the tensor gets the memory: "
                "from_xtensor(std::move(a)) takes the array over, "
                "from_xtensor(std::make_shared<xt::xarray<T>>(...)) shares it (torch.from_numpy), "
                "from_xtensor(a, xgrad::borrow) borrows it (you keep it alive), "
                "xgrad::tensor(a) copies it");
  return Tensor();
}

// Borrows the memory of any strided expression: an array, xt::transpose(a),
// xt::strided_view(a, ...), xt::view(a, xt::range(...), ...), an xt::adapt-ed buffer. No copy;
// the caller keeps that memory alive (and does not resize it) while the tensor or any view of
// it is used. Negative strides throw (copy with xgrad::tensor(expr)).
template <class E>
Tensor from_xtensor(E&& expr, Borrow) {
  using X = std::remove_cvref_t<E>;
  static_assert(xtensor_detail::Strided<X>,
                "from_xtensor(expr, xgrad::borrow): this expression has no memory to borrow "
                "(a lazy expression, or a view with non-strided slices); copy it with "
                "xgrad::tensor(expr)");
  static_assert(!(xtensor_detail::OwningContainer<X> && std::is_rvalue_reference_v<E&&>),
                "from_xtensor(temporary, xgrad::borrow) would dangle at the end of the "
                "statement: use from_xtensor(std::move(a)) to hand the array over");
  return xtensor_detail::wrap(expr, nullptr, "from_xtensor");
}

// Copies any xtensor expression (containers, views, lazy expressions such as a + b, negative
// strides) into a new contiguous tensor, like torch.tensor(ndarray).
template <class E>
Tensor tensor(const xt::xexpression<E>& expression) {
  const E& e = expression.derived_cast();
  using T = std::remove_cv_t<typename E::value_type>;
  Shape shape(e.shape().begin(), e.shape().end());
  const DType dtype = xtensor_detail::checked_dtype<T>("tensor", shape);
  Tensor out = empty(shape, dtype);
  if constexpr (xtensor_detail::has_dtype<T>) {
    using Stored = std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int64_t, T>;
    std::vector<std::size_t> xshape(e.shape().begin(), e.shape().end());
    auto dst =
        xt::adapt(out.data_ptr<Stored>(), static_cast<std::size_t>(out.numel()), xt::no_ownership(), xshape);
    xt::noalias(dst) = e;  // same shape: element by element, in row-major order
  }
  return out;
}

// ------------------------------------------------------------------ xgrad -> xtensor

// What to_xtensor returns: an xt::xarray_adaptor over a tensor's storage, with the tensor's
// shape and strides, that keeps the storage alive.
template <class T>
using XtensorView = xt::xarray_adaptor<xt::xbuffer_adaptor<T*, xt::smart_ownership, std::shared_ptr<Storage>>,
                                       xt::layout_type::dynamic, std::vector<std::size_t>>;

// t as an xtensor expression without a copy (torch's t.numpy()): any strides (transposed,
// sliced, expanded), 0-d included. T must be t's element type (float for float32, ...).
template <class T>
XtensorView<T> to_xtensor(const Tensor& t) {
  T* data = t.data_ptr<T>();  // throws for an undefined tensor or another dtype, naming both
  if (t.requires_grad())
    fail("to_xtensor", "cannot view a tensor that requires grad (shape ", t.shape(),
         ") as an xtensor expression: writes through it would bypass autograd; use "
         "to_xtensor<T>(t.detach()) (torch: .detach().numpy())");
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  std::vector<std::ptrdiff_t> strides(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)  // xtensor wants 0 for size-1 dims (broadcasting)
    strides[d] = shape[d] == 1 ? 0 : static_cast<std::ptrdiff_t>(t.strides()[d]);
  using Buffer = typename XtensorView<T>::storage_type;
  Buffer buffer(data, static_cast<std::size_t>(t.numel()), t.impl()->storage);
  return XtensorView<T>(std::move(buffer), shape, strides);
}

}  // namespace xgrad
