// xgrad/bf16_gemm.h: the bfloat16 GEMM on raw buffers, bf16 x bf16 -> float32, for tests and
// benchmarks (matmul and linear on bfloat16 tensors call it). Row-major:
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C     (A, B bfloat16 bits; C float32)
//   C (m, n) = (alpha * op(A) @ op(B)) + bias (n float32 values)   (beta not used)
// op(X) is X or X^T (trans_x); lda / ldb / ldc are row strides of the matrices as stored (a
// transposed operand is stored (k, m) or (n, k)).
#pragma once
#include <cstdint>
#include <string>

namespace xgrad {

// Which arithmetic runs the product:
//   Build           the build's own path (what the ops run): Dpbf16 where it was compiled for
//                   AVX512_BF16, else Widened
//   Dpbf16          vdpbf16ps on a register tile (throws where the build lacks AVX512_BF16)
//   Dpbf16Portable  vdpbf16ps's documented arithmetic in scalar code: the same bits as Dpbf16,
//                   on any CPU (one thread)
//   Widened         A and B widened to float32, then the float32 GEMM's FMAs
enum class Bf16GemmPath { Build, Dpbf16, Dpbf16Portable, Widened };

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
               const float* bias = nullptr, Bf16GemmPath path = Bf16GemmPath::Build);

// The build's bfloat16 GEMM path and tile, e.g. "avx512_bf16 vdpbf16ps 14x32" (also part of
// gemm_backend()).
std::string bf16_gemm_backend();

}  // namespace xgrad
