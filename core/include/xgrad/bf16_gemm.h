// xgrad/bf16_gemm.h: the bfloat16 GEMM on raw buffers, bf16 x bf16 -> float32 (or rounded to
// bfloat16), for tests and benchmarks (matmul and linear on bfloat16 tensors call it). Row-major:
//   C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C     (A, B bfloat16 bits; C float32)
//   C (m, n) = (alpha * op(A) @ op(B)) + bias (n float32 values)   (beta not used)
// op(X) is X or X^T (trans_x); lda / ldb / ldc are row strides of the matrices as stored (a
// transposed operand is stored (k, m) or (n, k)).
#pragma once
#include <cstdint>
#include <string>

namespace xgrad {

// Which arithmetic runs the product:
//   Build           what the ops run: the environment's XGRAD_BF16_GEMM (widened, dpbf16 or
//                   amx, read once; a path this machine cannot run throws), else Dpbf16 where
//                   the build has AVX512_BF16 without AVX512_FP16 (AMD Zen 4 / 5, where
//                   vdpbf16ps gives twice the FMA's flops), else Widened (also on Intel's
//                   Sapphire / Emerald Rapids class, where vdpbf16ps gives half). Amx only on
//                   request: that kernel has not yet run on AMX hardware.
//   Dpbf16          vdpbf16ps on a register tile (throws where the build lacks AVX512_BF16)
//   Dpbf16Portable  vdpbf16ps's documented arithmetic in scalar code: the same bits as Dpbf16,
//                   on any CPU (one thread)
//   Widened         A and B widened to float32, then the float32 GEMM's FMAs
//   Amx             tdpbf16ps on AMX tiles (throws where the CPU or the kernel does not give
//                   them)
//   AmxPortable     tdpbf16ps's documented arithmetic (Intel SDM) in scalar code, any CPU
enum class Bf16GemmPath { Build, Dpbf16, Dpbf16Portable, Widened, Amx, AmxPortable };

// Whether `path` runs here (Dpbf16: the build has AVX512_BF16; Amx: the CPU and kernel grant
// AMX tiles; the others always).
bool bf16_gemm_has_path(Bf16GemmPath path);

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc,
               const float* bias = nullptr, Bf16GemmPath path = Bf16GemmPath::Build);

// The same with a bfloat16 C (uint16_t bits), as matmul and linear on bfloat16 tensors run it:
// each element is the float32 value the float32-C form gives (beta reading C widened), rounded
// to bfloat16 once, to nearest even; C is computed a block at a time through a float32 block.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, uint16_t* c, int64_t ldc,
               const float* bias = nullptr, Bf16GemmPath path = Bf16GemmPath::Build);

// The bound on the GEMM's working memory, in float32 values per block: the Widened path widens
// A and B a block at a time (k in chunks of whole float32 k panels where a block would not
// fit), and a bfloat16 C goes through a float32 block of at most this many values. 0 restores
// the default, 2^22 (16 MiB); values below the float32 GEMM's k panel (256) count as it. The
// results' bits do not depend on it (tests set it small to block small products).
void set_bf16_gemm_block_elements(int64_t elements);

// The ops' bfloat16 GEMM path and tile: "amx_bf16 tdpbf16ps 32x32", "avx512_bf16 vdpbf16ps 14x32" or "widened
// to float32 FMAs 14x32", with " (vdpbf16ps: half the FMA's flops on this CPU class)" where the build has
// AVX512_BF16 but does not use it (also part of gemm_backend()).
std::string bf16_gemm_backend();

}  // namespace xgrad
