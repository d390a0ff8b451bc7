// examples/seeds/check.h: how a seed program checks itself against its notebook.
//
// Each program prints what its notebook printed, then compares the tensor with the numbers
// the notebook printed, hard-coded in the program (flat, row-major, one printed row per source
// line). Printed numbers are rounded, so the comparison allows for the rounding:
//   kFixed  the notebook printed 4 decimals ("-0.3453"):         |actual - printed| <= 1e-4
//   kSci    it printed scientific notation ("4.4967e-05"):       relative error <= 2e-4
//           (plus 1e-6 absolute: float32 rounding in a sum of O(1) terms)
// -inf must be -inf, and the shape must match exactly. At the end, finish() prints
// "<program>: N passed, N failed" and returns the exit status (1 on any mismatch), so ctest
// fails on a wrong number.
#pragma once
#include <xgrad/xgrad.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace seeds {

using xgrad::Shape;
using xgrad::Tensor;

inline constexpr double inf = INFINITY;

struct Tolerance {
  double atol;
  double rtol;
};
inline constexpr Tolerance kFixed{1e-4, 0.0};
inline constexpr Tolerance kSci{1e-6, 2e-4};

class Checker {
 public:
  explicit Checker(std::string program) : program_(std::move(program)) {}

  // The tensor `t` has shape `shape` and, element by element, the printed values `expected`.
  void tensor(const std::string& what, const Tensor& t, const Shape& shape,
              const std::vector<double>& expected, Tolerance tol = kFixed) {
    if (t.shape() != shape) {
      mismatch(what, "shape " + xgrad::shape_str(t.shape()) + ", notebook " + xgrad::shape_str(shape));
      return;
    }
    if (static_cast<int64_t>(expected.size()) != t.numel()) {
      mismatch(what, "the program lists " + std::to_string(expected.size()) + " expected values for " +
                         std::to_string(t.numel()) + " elements");
      return;
    }
    const std::vector<double> got = t.to_vector<double>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double a = got[i], e = expected[i];
      const bool ok = std::isinf(e) ? a == e : std::abs(a - e) <= tol.atol + tol.rtol * std::abs(e);
      if (!ok) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "element %zu is %.6g, notebook printed %.6g", i, a, e);
        mismatch(what, buf);
        return;
      }
    }
    ++passed_;
  }

  // Only the shape (the notebook printed `x.shape`).
  void shape(const std::string& what, const Tensor& t, const Shape& shape) {
    if (t.shape() == shape) {
      ++passed_;
    } else {
      mismatch(what, "shape " + xgrad::shape_str(t.shape()) + ", notebook " + xgrad::shape_str(shape));
    }
  }

  void is_true(const std::string& what, bool ok) {
    if (ok) ++passed_;
    else mismatch(what, "is false");
  }

  void number(const std::string& what, double actual, double expected, double atol) {
    if (std::abs(actual - expected) <= atol) {
      ++passed_;
    } else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "is %.6g, notebook printed %.6g", actual, expected);
      mismatch(what, buf);
    }
  }

  int finish() const {
    std::cout << "\n" << program_ << ": " << passed_ << " passed, " << failed_ << " failed" << std::endl;
    return failed_ == 0 ? 0 : 1;
  }

 private:
  void mismatch(const std::string& what, const std::string& detail) {
    ++failed_;
    std::cout << "MISMATCH " << what << ": " << detail << std::endl;
  }

  std::string program_;
  int passed_ = 0;
  int failed_ = 0;
};

// torch.allclose(a, b) with its defaults (rtol 1e-5, atol 1e-8), for the notebooks that call it.
inline bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}

// "torch.Size([8, 1024, 400])", for the lines where a notebook prints a shape.
inline std::string size_str(const Shape& shape) {
  std::string s = xgrad::shape_str(shape);
  return "torch.Size(" + s + ")";
}

}  // namespace seeds
