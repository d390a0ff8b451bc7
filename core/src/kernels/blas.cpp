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
#include <atomic>
#include <cstdlib>
#include <string>

#include "gemm_bf16_amx.h"
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

namespace {

std::atomic<int64_t> bf16_block_elements{gemm_bf16_kernel::kBlockElements};

// The checks of both gemm_bf16 forms; returns the path to run (Build resolved).
Bf16Path check_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
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
  if (path == Bf16Path::Amx && !gemm_bf16_amx::amx_usable())
    fail("gemm_bf16", "the AMX path needs a CPU with AMX-BF16 and the tile state granted by the kernel");
  return path;
}

// C (float32) on `path` (not Build; k > 0).
void run_bf16(Bf16Path path, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
              const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
              int64_t ldc, const float* bias, bool threaded) {
  switch (path) {
    case Bf16Path::Dpbf16:
#if XGRAD_BF16_AVX512
      gemm_bf16_kernel::gemm_dpbf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded);
#endif
      return;
    case Bf16Path::Dpbf16Portable:
      gemm_bf16_kernel::gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc);
      return;
    case Bf16Path::Amx:
#if XGRAD_AMX_BUILD
      gemm_bf16_amx::gemm_amx(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded);
#endif
      return;
    case Bf16Path::AmxPortable:
      gemm_bf16_amx::gemm_portable(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc);
      return;
    default:
      gemm_bf16_kernel::gemm_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded,
                                     bf16_block_elements.load(std::memory_order_relaxed));
  }
}

}  // namespace

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias,
               Bf16Path path) {
  path = check_bf16(ta, tb, m, n, k, lda, ldb, ldc, path);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C, or the bias
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  run_bf16(path, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias, gemm_splits(m, n, k));
}

// The widened path blocks the product itself; the others run per C block (every element of C
// is one chain on each path, whatever the block, so the blocks have the bits of one call).
void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
               const uint16_t* b, int64_t ldb, float beta, uint16_t* c, int64_t ldc, const float* bias,
               Bf16Path path) {
  namespace K = gemm_bf16_kernel;
  path = check_bf16(ta, tb, m, n, k, lda, ldb, ldc, path);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C, or the bias, rounded
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        uint16_t& cij = c[i * ldc + j];
        cij = kernels::float_to_bf16(bias           ? bias[j]
                                     : beta == 0.0f ? 0.0f
                                                    : beta * kernels::bf16_to_float(cij));
      }
    return;
  }
  const bool threaded = gemm_splits(m, n, k);
  const int64_t budget = bf16_block_elements.load(std::memory_order_relaxed);
  if (path == Bf16Path::Widened) {
    K::gemm_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, threaded, budget);
    return;
  }
  const K::Blocks bl = K::blocking(m, n, k, true, false, budget);
  float* cw = gemm_kernel::scratch<float, 7>(bl.mb * bl.nb);
  for (int64_t i0 = 0; i0 < m; i0 += bl.mb)
    for (int64_t j0 = 0; j0 < n; j0 += bl.nb) {
      const int64_t mc = std::min(bl.mb, m - i0), nc = std::min(bl.nb, n - j0);
      uint16_t* cb = c + i0 * ldc + j0;
      if (beta != 0.0f && !bias) K::widen(cb, mc, nc, ldc, cw, nc, threaded);
      run_bf16(path, ta, tb, mc, nc, k, alpha, ta ? a + i0 : a + i0 * lda, lda, tb ? b + j0 * ldb : b + j0,
               ldb, beta, cw, nc, bias ? bias + j0 : nullptr, threaded);
      K::narrow(cw, mc, nc, nc, cb, ldc, threaded);
    }
}

void set_bf16_block_elements(int64_t elements) {
  bf16_block_elements.store(
      elements <= 0 ? gemm_bf16_kernel::kBlockElements : std::max(elements, gemm_bf16_kernel::kWideKC),
      std::memory_order_relaxed);
}

Bf16Path gemm_bf16_build_path() {
  static const Bf16Path path = [] {
    const char* env = std::getenv("XGRAD_BF16_GEMM");
    const std::string want = env ? env : "";
    if (want.empty()) return gemm_bf16_kernel::kBuildDpbf16 ? Bf16Path::Dpbf16 : Bf16Path::Widened;
    if (want == "widened") return Bf16Path::Widened;
    if (want == "dpbf16" && gemm_bf16_kernel::kHasDpbf16) return Bf16Path::Dpbf16;
    if (want == "amx" && gemm_bf16_amx::amx_usable()) return Bf16Path::Amx;
    if (want == "dpbf16" || want == "amx")
      fail("gemm_bf16", "XGRAD_BF16_GEMM=", want, ": this ",
           want == "amx" ? "CPU does not grant AMX-BF16 tiles" : "build has no AVX512_BF16");
    fail("gemm_bf16", "XGRAD_BF16_GEMM=", want, ": expected widened, dpbf16 or amx (or unset)");
  }();
  return path;
}

void row_sums(bool ta, int64_t m, int64_t k, const float* a, int64_t lda, float* sums) {
  gemm_kernel::row_sums(ta, m, k, a, lda, sums, get_num_threads() > 1 && !in_parallel_region());
}

void row_sums(bool ta, int64_t m, int64_t k, const double* a, int64_t lda, double* sums) {
  gemm_kernel::row_sums(ta, m, k, a, lda, sums, get_num_threads() > 1 && !in_parallel_region());
}

void row_sums(bool ta, int64_t m, int64_t k, const uint16_t* a, int64_t lda, uint16_t* sums) {
  gemm_kernel::row_sums(
      ta, m, k, a, lda, sums, get_num_threads() > 1 && !in_parallel_region(),
      [](uint16_t x) { return static_cast<double>(kernels::bf16_to_float(x)); },
      [](double acc) { return kernels::float_to_bf16(static_cast<float>(acc)); });
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
  const std::string tile = std::to_string(K::kMR) + "x" + std::to_string(K::kNR);
  const blas::Bf16Path path = blas::gemm_bf16_build_path();
  if (path == blas::Bf16Path::Amx) return "amx_bf16 tdpbf16ps 32x32";
  if (path == blas::Bf16Path::Dpbf16) return "avx512_bf16 vdpbf16ps " + tile;
  using L = gemm_kernel::Tile<float>;
  return std::string("widened to float32 FMAs ") + std::to_string(L::kMR) + "x" + std::to_string(L::kNR) +
         (K::kHasDpbf16 && !std::getenv("XGRAD_BF16_GEMM")
              ? " (vdpbf16ps: half the FMA's flops on this CPU class)"
              : "");
}

bool xgrad::bf16_gemm_has_path(Bf16GemmPath path) {
  switch (path) {
    case Bf16GemmPath::Dpbf16:
      return gemm_bf16_kernel::kHasDpbf16;
    case Bf16GemmPath::Amx:
      return gemm_bf16_amx::amx_usable();
    default:
      return true;
  }
}

static_assert(static_cast<int>(xgrad::Bf16GemmPath::AmxPortable) ==
              static_cast<int>(xgrad::blas::Bf16Path::AmxPortable));  // the same order

void xgrad::gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                      int64_t ldc, const float* bias, Bf16GemmPath path) {
  blas::gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias,
                  static_cast<blas::Bf16Path>(static_cast<int>(path)));
}

void xgrad::gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, uint16_t* c,
                      int64_t ldc, const float* bias, Bf16GemmPath path) {
  blas::gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias,
                  static_cast<blas::Bf16Path>(static_cast<int>(path)));
}

void xgrad::set_bf16_gemm_block_elements(int64_t elements) { blas::set_bf16_block_elements(elements); }
