// xgrad/backend.h: what this build of xgrad runs its kernels on (like torch.__config__.show()).
// Benchmarks and the trainer print these so every figure says which code produced it.
#pragma once
#include <string>

namespace xgrad {

// The SIMD instruction set the element-wise and row kernels were compiled for, as xsimd
// names it ("avx512bw", "avx2", "sse2", ...). Fixed at build time (-march).
std::string simd_level();

// The GEMM backend behind matmul/linear/attention for float32 and float64, with its register
// tile (e.g. "xgrad avx512bw 14x32"). Fixed at build time.
std::string gemm_backend();

}  // namespace xgrad
