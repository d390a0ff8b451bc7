// core/src/ops/blas.cpp: the only file that includes <cblas.h>. Thin checked wrappers over
// OpenBLAS's cblas_sgemm / cblas_dgemm (row-major). Thread counts are not touched here.
#include "blas.h"

#include <cblas.h>

#include <climits>

#include "xgrad/error.h"

namespace xgrad::blas {

namespace {
// BLAS dimensions are 32-bit ints: refuse (clearly) what would silently overflow.
blasint narrow(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    fail("gemm", what, " = ", v, " does not fit BLAS's 32-bit int (the matrix is too large)");
  return static_cast<blasint>(v);
}
CBLAS_TRANSPOSE flag(bool t) { return t ? CblasTrans : CblasNoTrans; }
}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, flag(ta), flag(tb), narrow(m, "m"), narrow(n, "n"), narrow(k, "k"),
              alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c, narrow(ldc, "ldc"));
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(ta), flag(tb), narrow(m, "m"), narrow(n, "n"), narrow(k, "k"),
              alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c, narrow(ldc, "ldc"));
}

}  // namespace xgrad::blas
