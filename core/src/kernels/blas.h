// core/src/kernels/blas.h (private, the kernel floor): xgrad's GEMM entry points, the
// BLAS-style calls under matmul and linear (no external BLAS library is used:
// xgrad's own kernel, gemm_kernel.h, runs them). Row-major GEMM on raw pointers,
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C
// where op(X) is X or X^T (trans_x); with a bias (n values, contiguous) instead
//   C (m, n) = (alpha * op(A) @ op(B)) + bias      (each row; beta is then not used)
// with the same bits as the GEMM followed by adding the bias. With a_row_sums (m values), also
//   a_row_sums[i] = sum over k of op(A)[i, k]      (accumulated in double, k in order)
// the linear layer's bias gradient beside its weight gradient (A = dY^T), read from A's packed
// copy where the GEMM packs A. lda/ldb/ldc are row strides in elements of the matrices as
// stored (for a transposed operand, the stored matrix is (k, m) or (n, k)). Large GEMMs split
// over xgrad's threads with the same bits at any thread count (blas.cpp).
#pragma once
#include <cstdint>

namespace xgrad::blas {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
          const float* bias = nullptr, float* a_row_sums = nullptr);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc,
          const double* bias = nullptr, double* a_row_sums = nullptr);

// sums[i] = the sum over k of op(A)[i, k], accumulated in double, k in order: what gemm's
// a_row_sums gives, without the product (the bias gradient when the weight needs none).
void row_sums(bool trans_a, int64_t m, int64_t k, const float* a, int64_t lda, float* sums);
void row_sums(bool trans_a, int64_t m, int64_t k, const double* a, int64_t lda, double* sums);
// ... of bfloat16 bits, each sum rounded to float32, then to bfloat16 (as the float32 sums of a
// float32 copy would be)
void row_sums(bool trans_a, int64_t m, int64_t k, const uint16_t* a, int64_t lda, uint16_t* sums);

// The bfloat16 GEMM: A and B bfloat16 (uint16_t bit patterns), C and the bias float32, with the
// same arguments and epilogue as gemm above, accumulated in float32 (gemm_bf16_kernel.h):
//   C (m, n) = alpha * op(A) @ op(B) + beta * C,  or  (alpha * op(A) @ op(B)) + bias
// `path` picks the arithmetic: Build (the ops' path, gemm_bf16_build_path()), Dpbf16
// (vdpbf16ps; throws where the build has no AVX512_BF16), Dpbf16Portable (its scalar twin, the
// same bits, any CPU, one thread), Widened (float32 FMAs on widened copies), Amx (tdpbf16ps
// tiles; throws where the CPU or kernel does not grant them) or AmxPortable (its scalar twin).
enum class Bf16Path { Build, Dpbf16, Dpbf16Portable, Widened, Amx, AmxPortable };
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
               const float* bias = nullptr, Bf16Path path = Bf16Path::Build);

// The same with a bfloat16 C (uint16_t bits): each element is the float32 value above (beta
// reading C widened), rounded to bfloat16 once, to nearest even. C is computed a block at a
// time through a float32 block (gemm_bf16_kernel.h: blocking), never a whole float32 copy.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, uint16_t* c, int64_t ldc,
               const float* bias = nullptr, Bf16Path path = Bf16Path::Build);

// The bound on gemm_bf16's blocks, in float32 values per block (a widened block of A or B; a
// bfloat16 C's float32 block): 0 restores the default (gemm_bf16_kernel::kBlockElements);
// values below the float32 GEMM's k panel count as it. The bits do not depend on it.
void set_bf16_block_elements(int64_t elements);

// The path gemm_bf16 runs for Bf16Path::Build (the ops' path): the environment's
// XGRAD_BF16_GEMM (widened, dpbf16 or amx; read once, throws for a path this machine cannot
// run), else Dpbf16 or Widened as the build decides (gemm_bf16_kernel.h). AMX is never the
// default: its kernel has not yet run on AMX hardware (tests/core/test_gemm_bf16.cpp checks it
// there).
Bf16Path gemm_bf16_build_path();

// Work (flops, 2 m n k) below which a GEMM, or a batch of them, stays on one thread.
inline constexpr double kParallelFlops = 4e6;

// Whether gemm splits an (m, n, k) product over the threads (never inside a parallel region).
bool gemm_splits(int64_t m, int64_t n, int64_t k);

}  // namespace xgrad::blas
