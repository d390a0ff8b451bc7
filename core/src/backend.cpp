// core/src/backend.cpp: xgrad/backend.h's simd_level(); gemm_backend() lives with the GEMM in
// kernels/blas.cpp.
#include "xgrad/backend.h"

#include <xsimd/xsimd.hpp>

namespace xgrad {

std::string simd_level() { return xsimd::default_arch::name(); }

}  // namespace xgrad
