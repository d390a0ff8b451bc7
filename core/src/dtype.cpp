// core/src/dtype.cpp: dtype names (xgrad/dtype.h).
#include "xgrad/dtype.h"

namespace xgrad {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
    case DType::BFloat16:
      return "bfloat16";
  }
  return "?";
}

}  // namespace xgrad
