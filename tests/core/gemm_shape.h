// tests/core/gemm_shape.h: a GEMM test case's sizes and operand layouts, printed in test names
// as MxNxK with _At / _Bt for an operand stored transposed.
#pragma once
#include <cstdint>
#include <ostream>

namespace xgrad {

struct Shape3 {
  int64_t m, n, k;
  bool ta, tb;  // operand stored transposed: A (k, m), B (n, k)
};

inline std::ostream& operator<<(std::ostream& os, const Shape3& s) {
  return os << s.m << "x" << s.n << "x" << s.k << (s.ta ? "_At" : "") << (s.tb ? "_Bt" : "");
}

}  // namespace xgrad
