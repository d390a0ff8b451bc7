// xgrad/arg_types.h: parameter types that make a torch spelling mean what it means in torch,
// or not compile.
//
// C++ converts int, bool and double into one another without a word, so with plain `bool`
// and `int64_t` parameters `x.var(-1)` would be var(unbiased=true) over every element, and
// `x.sum(0, 1)` a keepdim sum over dim 0. torch's argument parser takes only a bool
// for a bool and only an integer (not a bool, not a float) for an int; these types do the
// same at compile time:
//
//   Flag   a bool parameter (keepdim, unbiased, largest, ...): binds to `bool` only.
//   Int    one dim, index, size or count: binds to any integer type except `bool`.
//   Dims   the dims of a reduction: one Int (x.sum(-1)), a braced list (x.sum({0, 2})) or a
//          Shape; `{}` means every dim, as torch's dim=().
//
// tests/core/test_api_spellings.cpp checks, with static_asserts, that each such spelling
// either means torch's thing or does not compile.
#pragma once
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "xgrad/error.h"  // Shape

namespace xgrad {

// An integer type that is not bool: what torch accepts for an `int` argument.
template <class T>
concept Integer = std::integral<T> && !std::same_as<T, bool>;

// What C++ would silently turn into an int64_t but torch rejects for an `int`: a bool or a
// floating-point value (the view methods delete these spellings, see tensor.h).
template <class T>
concept NotAnInt = std::same_as<T, bool> || std::floating_point<T>;

class Flag {
 public:
  template <std::same_as<bool> B>
  constexpr Flag(B value) noexcept : value_(value) {}  // NOLINT: implicit on purpose
  constexpr operator bool() const noexcept { return value_; }

 private:
  bool value_;
};

class Int {
 public:
  template <Integer I>
  constexpr Int(I value) noexcept : value_(static_cast<int64_t>(value)) {}  // NOLINT
  constexpr operator int64_t() const noexcept { return value_; }
  constexpr int64_t get() const noexcept { return value_; }

 private:
  int64_t value_;
};

struct Dims : Shape {
  Dims() = default;  // {}: every dim
  template <Integer I>
  Dims(I dim) : Shape{static_cast<int64_t>(dim)} {}           // NOLINT: x.sum(-1)
  Dims(std::initializer_list<int64_t> dims) : Shape(dims) {}  // x.sum({0, 2})
  Dims(Shape dims) : Shape(std::move(dims)) {}                // NOLINT: x.sum(dims)
};

}  // namespace xgrad
