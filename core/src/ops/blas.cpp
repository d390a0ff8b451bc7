// core/src/ops/blas.cpp: the only file that includes <cblas.h>. Checked wrappers over
// OpenBLAS's cblas_sgemm / cblas_dgemm (row-major), threaded by xgrad.
//
// OpenBLAS itself runs on one thread (xgrad/parallel.h pins it): a GEMM of at least
// kSplitFlops is cut here into one block per xgrad thread, each a single-threaded cblas call
// on a sub-matrix: row blocks of C (rows of op(A)), or column blocks (columns of op(B)) when C
// has few rows. Every element of C is still computed by one cblas call over the full K, in
// the same order as one big call, so the result does not depend on the thread count (the
// tests check this bit for bit). Inside a parallel region (e.g. one matrix of a batched
// matmul per thread) a GEMM is a single plain cblas call.
#include "blas.h"

#include <cblas.h>

#include <algorithm>
#include <climits>

#include "xgrad/backend.h"
#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace xgrad::blas {

namespace {

constexpr double kSplitFlops = kParallelFlops;
// Blocks are multiples of this many rows / columns (OpenBLAS's AVX-512 sgemm kernel works
// on 16 x 4 tiles), and C needs at least two of them along the split dim.
constexpr int64_t kBlock = 16;

// BLAS dimensions are 32-bit ints: refuse (clearly) what would silently overflow.
blasint narrow(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    fail("gemm", what, " = ", v, " does not fit BLAS's 32-bit int (the matrix is too large)");
  return static_cast<blasint>(v);
}
CBLAS_TRANSPOSE flag(bool t) { return t ? CblasTrans : CblasNoTrans; }

void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, flag(ta), flag(tb), narrow(m, "m"), narrow(n, "n"), narrow(k, "k"),
              alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c, narrow(ldc, "ldc"));
}
void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, flag(ta), flag(tb), narrow(m, "m"), narrow(n, "n"), narrow(k, "k"),
              alpha, a, narrow(lda, "lda"), b, narrow(ldb, "ldb"), beta, c, narrow(ldc, "ldc"));
}

template <class T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // validate once up front: a block's sizes are smaller and its lds are the same
  narrow(m, "m");
  narrow(n, "n");
  narrow(k, "k");
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int threads = get_num_threads();
  const bool split_rows = m >= 2 * kBlock && (m >= n || n < 2 * kBlock);
  const bool split_cols = !split_rows && n >= 2 * kBlock;
  if (threads == 1 || in_parallel_region() || flops < kSplitFlops || !(split_rows || split_cols)) {
    call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (split_rows) {
    // C rows [r0, r1) = op(A) rows [r0, r1) @ op(B): A stored (m, k) -> row offset r0 * lda,
    // stored (k, m) (trans) -> column offset r0
    parallel_for(0, (m + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
      const int64_t r0 = b0 * kBlock, r1 = std::min(b1 * kBlock, m);
      call(ta, tb, r1 - r0, n, k, alpha, a + (ta ? r0 : r0 * lda), lda, b, ldb, beta,
           c + r0 * ldc, ldc);
    });
  } else {
    // C columns [c0, c1) = op(A) @ op(B) columns [c0, c1): B stored (k, n) -> column offset
    // c0, stored (n, k) (trans) -> row offset c0 * ldb
    parallel_for(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
      const int64_t c0 = b0 * kBlock, c1 = std::min(b1 * kBlock, n);
      call(ta, tb, m, c1 - c0, k, alpha, a, lda, b + (tb ? c0 * ldb : c0), ldb, beta, c + c0,
           ldc);
    });
  }
}

}  // namespace

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_impl<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_impl<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool gemm_splits(int64_t m, int64_t n, int64_t k) {
  const bool dims = m >= 2 * kBlock || n >= 2 * kBlock;
  return get_num_threads() > 1 && dims && 2.0 * double(m) * double(n) * double(k) >= kSplitFlops;
}

}  // namespace xgrad::blas

extern "C" char* openblas_get_corename(void);

std::string xgrad::gemm_backend() {
  return std::string("OpenBLAS ") + openblas_get_corename() + " (cblas, one thread per block)";
}
