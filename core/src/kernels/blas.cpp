// core/src/kernels/blas.cpp: the GEMM entry points. Checks the arguments and runs xgrad's own GEMM
// kernel (gemm_kernel.h: packed B panels, an xsimd register tile, masked edges through a
// scratch tile) for float32 and float64.
//
// A GEMM of at least kParallelFlops outside a parallel region splits its tiles over xgrad's
// threads; inside one (e.g. one matrix of a batched matmul per thread) it runs on the calling
// thread. Threads split rows or columns of C, never k, and every element of C is the same
// chain of operations whatever the split (gemm_kernel.h), so results have the same bits at
// any thread count by construction, whatever the machine.
#include "blas.h"

#include <algorithm>
#include <string>

#include "gemm_bf16_kernel.h"
#include "gemm_kernel.h"
#include "xgrad/backend.h"
#include "xgrad/bf16_gemm.h"
#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace xgrad::blas {

namespace {

template <class T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc, const T* bias, T* a_row_sums) {
  if (m < 0 || n < 0 || k < 0) fail("gemm", "negative size (m, n, k) = (", m, ", ", n, ", ", k, ")");
  // the stored matrices: A (m, k) or (k, m), B (k, n) or (n, k), C (m, n)
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  if (lda < std::max<int64_t>(a_cols, 1) || ldb < std::max<int64_t>(b_cols, 1) ||
      ldc < std::max<int64_t>(n, 1))
    fail("gemm", "leading dims (", lda, ", ", ldb, ", ", ldc, ") too small for (m, n, k) = (", m, ", ", n,
         ", ", k, ")");
  gemm_kernel::gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, gemm_splits(m, n, k),
                       a_row_sums);
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias,
          float* a_row_sums) {
  gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, a_row_sums);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc, const double* bias,
          double* a_row_sums) {
  gemm_impl<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, a_row_sums);
}

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias,
               Bf16Path path) {
  if (m < 0 || n < 0 || k < 0) fail("gemm_bf16", "negative size (m, n, k) = (", m, ", ", n, ", ", k, ")");
  const int64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  if (lda < std::max<int64_t>(a_cols, 1) || ldb < std::max<int64_t>(b_cols, 1) ||
      ldc < std::max<int64_t>(n, 1))
    fail("gemm_bf16", "leading dims (", lda, ", ", ldb, ", ", ldc, ") too small for (m, n, k) = (", m, ", ",
         n, ", ", k, ")");
  if (path == Bf16Path::Build) path = gemm_bf16_build_path();
  if (path == Bf16Path::Dpbf16 && !gemm_bf16_kernel::kHasDpbf16)
    fail("gemm_bf16", "the vdpbf16ps path needs a build for AVX512_BF16 (this one is ", simd_level(), ")");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C, or the bias
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const bool threaded = gemm_splits(m, n, k);
  switch (path) {
    case Bf16Path::Dpbf16:
#if XGRAD_BF16_AVX512
      gemm_bf16_kernel::gemm_dpbf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded);
#endif
      return;
    case Bf16Path::Dpbf16Portable:
      gemm_bf16_kernel::gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc);
      return;
    default:
      gemm_bf16_kernel::gemm_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded);
  }
}

Bf16Path gemm_bf16_build_path() {
  return gemm_bf16_kernel::kHasDpbf16 ? Bf16Path::Dpbf16 : Bf16Path::Widened;
}

void row_sums(bool ta, int64_t m, int64_t k, const float* a, int64_t lda, float* sums) {
  gemm_kernel::row_sums(ta, m, k, a, lda, sums, get_num_threads() > 1 && !in_parallel_region());
}

void row_sums(bool ta, int64_t m, int64_t k, const double* a, int64_t lda, double* sums) {
  gemm_kernel::row_sums(ta, m, k, a, lda, sums, get_num_threads() > 1 && !in_parallel_region());
}

bool gemm_splits(int64_t m, int64_t n, int64_t k) {
  return get_num_threads() > 1 && !in_parallel_region() &&
         2.0 * double(m) * double(n) * double(k) >= kParallelFlops;
}

}  // namespace xgrad::blas

std::string xgrad::gemm_backend() {
  using L = gemm_kernel::Tile<float>;
  return "xgrad " + simd_level() + " " + std::to_string(L::kMR) + "x" + std::to_string(L::kNR) +
         " (float32; float64 " + std::to_string(gemm_kernel::Tile<double>::kMR) + "x" +
         std::to_string(gemm_kernel::Tile<double>::kNR) + "; bfloat16 " + bf16_gemm_backend() + ")";
}

std::string xgrad::bf16_gemm_backend() {
  namespace K = gemm_bf16_kernel;
  return K::kHasDpbf16 ? "avx512_bf16 vdpbf16ps " + std::to_string(K::kMR) + "x" + std::to_string(K::kNR)
                       : "widened to float32 FMAs";
}

void xgrad::gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                      int64_t ldc, const float* bias, Bf16GemmPath path) {
  blas::gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias,
                  static_cast<blas::Bf16Path>(static_cast<int>(path)));
}
