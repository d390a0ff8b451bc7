// core/src/error.cpp: how error messages print a shape (xgrad/error.h).
#include "xgrad/error.h"

namespace xgrad {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace xgrad
