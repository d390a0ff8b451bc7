// core/src/ops/linalg.cpp: matmul (torch.matmul semantics) and linear (F.linear) on xgrad's
// GEMM; at the end, outer (torch.outer). (norm, the p-norm, is in norm.cpp.)
//
// Everything funnels into bmm_into(): out[i] (+)= a[i] @ b[i] for every index i of a broadcast
// batch, where each operand's batch strides may be 0 (a broadcast input, or a gradient summed
// over the batch dims its input was broadcast along). Each matrix goes to the GEMM as stored:
// row-major (NoTrans, ld = row stride) or as the plain transpose of a row-major matrix (Trans,
// ld = column stride), so views like k.transpose(2, 3) and weight.t() are never copied; only a
// matrix that is neither (e.g. an expanded one) is. Batches fold into a single GEMM when memory
// allows: into the rows (x (B, T, C) @ W, the Linear hot path) or into the inner dim (the weight
// gradient x^T @ dout summed over B*T); when only an operand's layout blocks the fold and the
// folded dim is small, that operand is copied once instead of running many tiny GEMMs.
// Threads: a single GEMM is split by blas::gemm itself; the per-matrix loop (case 3) hands
// whole matrices to the threads (each a one-thread GEMM) unless their products are summed
// into one output. Either way every output element comes from one GEMM call, as serially.
//
// bfloat16 (both operands bfloat16, as torch requires; a bias too): the GEMMs take the bf16
// operands, accumulate in float32 and round each element of the output to bfloat16 once
// (blas::gemm_bf16, a block at a time; through a float32 copy of the output only where several
// GEMMs sum into it); the gradients likewise, and linear's bias gradient is summed from dout's
// widened values, then rounded.
//
// The backward closures of matmul and linear call bmm_into too, unless grad mode is on inside
// them (backward with create_graph): then they compute the same products with matmul itself,
// recorded, so the gradient can be differentiated again (tests/core/test_fused_composed.cpp
// pins that both paths agree). outer is written in recorded ops throughout.
//
// Adding a linalg op: write its forward with bmm_into, its backward right below, and add a row
// to tests/core/gradcheck_rows_linalg.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "blas.h"
#include "kernels.h"
#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// How the GEMM can read a (rows, cols) matrix with element strides (sr, sc).
struct MatLayout {
  bool ok = false;
  bool trans = false;  // stored as its transpose: a row-major (cols, rows) matrix
  int64_t ld = 0;
};

MatLayout layout_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  // row-major: unit column stride, rows at least a row apart (one row: any row stride)
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1)))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
  // a transposed row-major matrix (k.transpose(-1, -2), weight.t())
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1)))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
  return {};
}

MatLayout layout_of(const Tensor& t) { return layout_of(t.size(-2), t.size(-1), t.stride(-2), t.stride(-1)); }

// Strides of t's batch dims (all but its last two) seen over `batch`: 0 where t is broadcast.
Shape batch_strides(const Tensor& t, const Shape& batch) {
  const std::size_t nb = static_cast<std::size_t>(t.dim() - 2);
  const std::size_t lead = batch.size() - nb;
  Shape out(batch.size(), 0);
  for (std::size_t i = 0; i < nb; ++i) out[lead + i] = t.shape()[i] == batch[lead + i] ? t.strides()[i] : 0;
  return out;
}

bool all_broadcast(const Shape& batch, const Shape& strides) {
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (batch[i] != 1 && strides[i] != 0) return false;
  return true;
}

// Can the dims (batch..., d) be addressed as one dim of size numel(batch) * size? Returns the
// merged stride (the stride of the innermost dim of size > 1).
std::optional<int64_t> merged_stride(const Shape& batch, const Shape& bstrides, int64_t size,
                                     int64_t stride) {
  std::optional<int64_t> inner;  // stride of the innermost kept dim
  int64_t next_outer = 0;        // the stride the next kept outer dim must have
  auto visit = [&](int64_t n, int64_t s) {
    if (n == 1) return true;
    if (inner && s != next_outer) return false;
    if (!inner) inner = s;
    next_outer = s * n;
    return true;
  };
  if (!visit(size, stride)) return std::nullopt;
  for (int64_t i = static_cast<int64_t>(batch.size()) - 1; i >= 0; --i)
    if (!visit(batch[i], bstrides[i])) return std::nullopt;
  return inner.value_or(1);
}

// A matrix operand's elements: T, or a bfloat16 tensor's bits (TI = uint16_t).
template <class TI>
const TI* operand(const Tensor& t) {
  if constexpr (std::is_same_v<TI, uint16_t>) return static_cast<const uint16_t*>(t.raw_data_ptr());
  else return t.data_ptr<TI>();
}

// The output's elements: T, or a bfloat16 tensor's bits (TO = uint16_t).
template <class TO>
TO* output(const Tensor& t) {
  if constexpr (std::is_same_v<TO, uint16_t>) return static_cast<uint16_t*>(t.raw_data_ptr());
  else return t.data_ptr<TO>();
}

// C = op(A) @ op(B) + beta * C (or + bias), with op(A)'s row sums where sums is given: the
// float32 / float64 GEMM, or the bfloat16 one (float32 C; no row sums: sums is null).
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc, const std::type_identity_t<T>* bias, std::type_identity_t<T>* sums) {
  blas::gemm(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc, bias, sums);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
          const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc, const float* bias,
          float* /*sums: null*/) {
  blas::gemm_bf16(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, bias);
}
// ... and with a bfloat16 C, each element rounded once from its float32 value (beta reading C
// widened), a block of C at a time
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t lda,
          const uint16_t* b, int64_t ldb, float beta, uint16_t* c, int64_t ldc, const float* bias,
          float* /*sums: null*/) {
  blas::gemm_bf16(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc, bias);
}

// Below this size of the dim a batch folds into, one copy of an operand that blocks the fold
// is cheaper than bn small GEMMs; above it the per-matrix GEMMs are efficient and copying
// would only add memory traffic.
constexpr int64_t kSmallFoldDim = 64;

// out (batch_o..., M, N) (+)= a (batch_a..., M, K) @ b (batch_b..., K, N) over `batch`, the
// broadcast of the three batch shapes. Where out's batch dims are broadcast (stride 0) the
// products are summed into it. accumulate: add to out's contents instead of overwriting.
// out must be a contiguous tensor the caller owns; a and b may be any views.
// out[i] (+)= a[i] @ b[i]; with a bias (a contiguous (N) tensor, not with accumulate, K > 0)
// out[i] = a[i] @ b[i] + bias, added in the GEMM's epilogue (linear's forward).
// With a_sums (a contiguous (M) tensor): also a_sums = a summed over its batch and last dims,
// where one GEMM does it all (linear's bias gradient beside its weight gradient: the GEMM reads
// dY once for both); returns whether it did (if not, a_sums is not written).
// One bmm_into call as its three strategies see it: the operands (a and b replaced by dense
// copies where a strategy needs them, with their batch strides), the sizes and the pointers.
// T is the GEMM's arithmetic type (float32 or float64), TI the operands' (T, or uint16_t:
// bfloat16 bits, with T float32), TO C's (T, or uint16_t: a bfloat16 C the GEMM rounds).
template <class T, class TI = T, class TO = T>
struct BatchedGemm {
  const Tensor& out;
  Tensor a, b;
  const Shape& batch;
  Shape so, sa, sb;  // batch strides of out, a, b
  int64_t M, K, N, bn;
  bool reduced;  // out is broadcast along a batch dim: products summed into it
  T beta;
  TO* po;
  const T* pbias;
  T* psums;
};

// 1. rows fold: b is one matrix for the whole batch, so (bn*M, K) @ (K, N) in one GEMM.
// Returns whether it ran.
template <class T, class TI, class TO>
bool gemm_rows_fold(BatchedGemm<T, TI, TO>& g) {
  const Shape& batch = g.batch;
  if (!(g.bn > 1 && !g.reduced && all_broadcast(batch, g.sb))) return false;
  const int64_t M = g.M, K = g.K, N = g.N, bn = g.bn;
  auto ro = merged_stride(batch, g.so, M, g.out.stride(-2));
  auto a_rows = [&] {
    auto ra = merged_stride(batch, g.sa, M, g.a.stride(-2));
    return ra ? layout_of(bn * M, K, *ra, g.a.stride(-1)) : MatLayout{};
  };
  MatLayout la = a_rows();
  if (!la.ok && M < kSmallFoldDim) {  // bn tiny GEMMs cost more than one copy of a
    g.a = dense_copy(g.a);
    g.sa = batch_strides(g.a, batch);
    la = a_rows();
  }
  if (!layout_of(g.b).ok) {
    g.b = dense_copy(g.b);
    g.sb = batch_strides(g.b, batch);
  }
  const MatLayout lb = layout_of(g.b);
  const MatLayout lo = ro ? layout_of(bn * M, N, *ro, g.out.stride(-1)) : MatLayout{};
  if (!(la.ok && lb.ok && lo.ok && !lo.trans)) return false;
  gemm(la.trans, lb.trans, bn * M, N, K, operand<TI>(g.a), la.ld, operand<TI>(g.b), lb.ld, g.beta, g.po,
       lo.ld, g.pbias, nullptr);
  return true;
}

// 2. inner fold: out is summed over the whole batch, so (M, bn*K) @ (bn*K, N) in one GEMM.
// Returns whether it ran; sets summed when it also wrote a's row sums.
template <class T, class TI, class TO>
bool gemm_inner_fold(BatchedGemm<T, TI, TO>& g, bool& summed) {
  const Shape& batch = g.batch;
  if (!(g.bn > 1 && all_broadcast(batch, g.so) && !g.pbias)) return false;
  const int64_t M = g.M, K = g.K, N = g.N, bn = g.bn;
  auto a_cols = [&] {
    auto ca = merged_stride(batch, g.sa, K, g.a.stride(-1));
    return ca ? layout_of(M, bn * K, g.a.stride(-2), *ca) : MatLayout{};
  };
  auto b_rows = [&] {
    auto rb = merged_stride(batch, g.sb, K, g.b.stride(-2));
    return rb ? layout_of(bn * K, N, *rb, g.b.stride(-1)) : MatLayout{};
  };
  MatLayout la = a_cols(), lb = b_rows();
  if ((!la.ok || !lb.ok) && K < kSmallFoldDim) {  // copy so that the batch folds into K
    if (!la.ok) {
      g.a = dense_copy(g.a.transpose(-1, -2)).transpose(-1, -2);  // (.., K, M) row-major
      g.sa = batch_strides(g.a, batch);
      la = a_cols();
    }
    if (!lb.ok) {
      g.b = dense_copy(g.b);
      g.sb = batch_strides(g.b, batch);
      lb = b_rows();
    }
  }
  const MatLayout lo = layout_of(g.out);
  if (!(la.ok && lb.ok && lo.ok && !lo.trans)) return false;
  gemm(la.trans, lb.trans, M, N, bn * K, operand<TI>(g.a), la.ld, operand<TI>(g.b), lb.ld, g.beta, g.po,
       lo.ld, nullptr, g.psums);
  summed = g.psums != nullptr;
  return true;
}

// 3. one GEMM per matrix; copy an operand only when the GEMM cannot read its matrices.
// Returns whether it wrote a's row sums.
template <class T, class TI, class TO>
bool gemm_per_matrix(BatchedGemm<T, TI, TO>& g) {
  const Shape& batch = g.batch;
  const int64_t M = g.M, K = g.K, N = g.N, bn = g.bn;
  MatLayout la = layout_of(g.a), lb = layout_of(g.b);
  if (!la.ok) {
    g.a = dense_copy(g.a);
    g.sa = batch_strides(g.a, batch);
    la = layout_of(g.a);
  }
  if (!lb.ok) {
    g.b = dense_copy(g.b);
    g.sb = batch_strides(g.b, batch);
    lb = layout_of(g.b);
  }
  const MatLayout lo = layout_of(g.out);
  if (!lo.ok || lo.trans)
    fail("matmul", "internal error: output of shape ", g.out.shape(), " is not row-major");
  const TI* pa = operand<TI>(g.a);
  const TI* pb = operand<TI>(g.b);
  TO* po = g.po;
  const T* pbias = g.pbias;
  T* psums = bn != 1 ? nullptr : g.psums;  // one GEMM only sums the whole of a
  const T beta = g.beta;
  std::array<Shape, 3> st{g.so, g.sa, g.sb};
  const kernels::RowGeometry<3> geo = kernels::merge_dims<3>(batch, st);
  auto body = [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& in) {
    for (int64_t i = 0; i < len; ++i)
      gemm(la.trans, lb.trans, M, N, K, pa + off[1] + i * in[1], la.ld, pb + off[2] + i * in[2], lb.ld, beta,
           po + off[0] + i * in[0], lo.ld, pbias, psums);
  };
  // threads: whole matrices per thread (attention's (B*H) heads), unless products are summed
  // into one output (reduced) or a few big matrices are better split inside gemm
  const double mat_flops = std::max(2.0 * double(M) * double(N) * double(K), 1.0);
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>(blas::kParallelFlops / mat_flops));
  const bool by_batch = !g.reduced && (bn >= 2 * get_num_threads() || !blas::gemm_splits(M, N, K));
  if (by_batch && bn >= 2 * grain) {
    parallel_for(0, bn, grain, [&](int64_t lo, int64_t hi) { kernels::walk_rows<3>(geo, lo, hi, body); });
  } else {
    kernels::walk_rows<3>(geo, 0, std::max<int64_t>(geo.numel(), 1), body);
  }
  return psums != nullptr;
}

// bmm_into's GEMMs once out is set up (see below): T is the GEMM's arithmetic type, TI a's and
// b's element type, TO out's. With once, only where each element of out comes from one GEMM
// call (not a sum over several: out reduced over batch dims that do not fold into one GEMM);
// returns whether it ran then, else whether it wrote a's row sums.
template <class T, class TI, class TO = T>
bool run_gemms(const Tensor& out, const Tensor& a, const Tensor& b, const Shape& batch, bool accumulate,
               bool reduced, const Tensor& bias, const Tensor& a_sums, bool once = false) {
  BatchedGemm<T, TI, TO> g{out,
                           a,
                           b,
                           batch,
                           batch_strides(out, batch),
                           batch_strides(a, batch),
                           batch_strides(b, batch),
                           a.size(-2),
                           a.size(-1),
                           b.size(-1),
                           numel_of(batch),
                           reduced,
                           accumulate ? T(1) : T(0),
                           output<TO>(out),
                           bias.defined() ? bias.data_ptr<T>() : nullptr,
                           a_sums.defined() ? a_sums.data_ptr<T>() : nullptr};
  if (gemm_rows_fold(g)) return once;
  bool summed = false;
  if (gemm_inner_fold(g, summed)) return once || summed;
  if (once && reduced) return false;
  const bool per_matrix_summed = gemm_per_matrix(g);
  return once || per_matrix_summed;
}

// bfloat16 operands: each element of out is its float32 sum (of out's contents too when
// accumulating), with a float32 copy of the bias, rounded to bfloat16 once. Where one GEMM call
// gives the element, that GEMM rounds it (a float32 block at a time); where products of
// several are summed into it, they accumulate in a float32 copy of out, rounded at the end.
// a_sums is not used (the caller sums the bias gradient itself).
bool bmm_into(const Tensor& out, Tensor a, Tensor b, const Shape& batch, bool accumulate,
              const Tensor& bias = Tensor(), const Tensor& a_sums = Tensor()) {
  const int64_t K = a.size(-1);
  const Shape so = batch_strides(out, batch);
  const int64_t bn = numel_of(batch);
  const bool reduced = !so.empty() && [&] {
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i] != 1 && so[i] == 0) return true;
    return false;
  }();
  if (out.numel() == 0) return false;
  if (!accumulate && (reduced || K == 0 || bn == 0)) {
    std::memset(out.raw_data_ptr(), 0, static_cast<std::size_t>(out.numel()) * itemsize(out.dtype()));
    accumulate = true;
  }
  if (K == 0 || bn == 0) return false;
  if (out.dtype() == kBFloat16) {
    const Tensor bias32 = bias.defined() ? bias.to(kFloat32).contiguous() : Tensor();
    if (run_gemms<float, uint16_t, uint16_t>(out, a, b, batch, accumulate, reduced, bias32, Tensor(), true))
      return false;
    Tensor out32 = empty(out.shape(), kFloat32);
    if (accumulate) kernels::copy_into(out32, out);
    run_gemms<float, uint16_t>(out32, a, b, batch, accumulate, reduced, bias32, Tensor());
    kernels::copy_into(out, out32);  // rounded to nearest even, once
    return false;
  }
  return kernels::dispatch_float(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    return run_gemms<T, T>(out, a, b, batch, accumulate, reduced, bias, a_sums);
  });
}

// Both operands of one floating dtype: float32, float64 or bfloat16 (torch 1.13's matmul
// throws on mixed dtypes too, "expected scalar type").
void check_float_pair(const char* op, const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) fail(op, "got an undefined tensor");
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype())
    fail(op, "expected two float32, two float64 or two bfloat16 tensors, got ", dtype_name(a.dtype()), " ",
         a.shape(), " and ", dtype_name(b.dtype()), " ", b.shape());
}

// A 1-D tensor (n) seen as a (1, n) matrix, as_col as (n, 1); other tensors as they are.
// No autograd record: these feed bmm_into only.
Tensor as_row(const Tensor& t) {
  if (t.dim() != 1) return t.detach();
  return make_view(t, {1, t.size(0)}, {std::max<int64_t>(t.size(0), 1) * t.stride(0), t.stride(0)},
                   t.storage_offset());
}
Tensor as_col(const Tensor& t) {
  if (t.dim() != 1) return t.detach();
  return make_view(t, {t.size(0), 1}, {t.stride(0), 1}, t.storage_offset());
}

Shape batch_shape(const Tensor& a, const Tensor& b) {
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const std::size_t nb = std::max(ba.size(), bb.size());
  Shape batch(nb);
  for (std::size_t i = 0; i < nb; ++i) {
    const int64_t da = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
    const int64_t db = i < nb - bb.size() ? 1 : bb[i - (nb - bb.size())];
    if (da != db && da != 1 && db != 1)
      fail("matmul", "batch dims of shapes ", a.shape(), " and ", b.shape(),
           " cannot be broadcast together (", da, " vs ", db, ")");
    batch[i] = da == 1 ? db : da;
  }
  return batch;
}

// matmul's backward in recorded ops: da = dout @ b^T and db = a^T @ dout, each summed to its
// operand's shape (sum_to undoes the batch broadcast), a 1-D a a (1, K) row and a 1-D b a
// (K, 1) column; a is only needed (defined) for db, b for da.
void matmul_backward_recorded(const Tensor& a, const Tensor& b, const Shape& a_shape, const Shape& b_shape,
                              const Tensor& dout, Grads& grads) {
  const bool a1 = a_shape.size() == 1, b1 = b_shape.size() == 1;
  Tensor d = dout;
  if (b1) d = d.unsqueeze(-1);
  if (a1) d = d.unsqueeze(-2);  // (batch..., M, N)
  if (grads.wants(0)) {
    const Tensor b2 = b1 ? b.unsqueeze(-1) : b;  // (..., K, N)
    const Shape a2_shape = a1 ? Shape{1, a_shape[0]} : a_shape;
    grads.add(0, sum_to(matmul(d, b2.transpose(-1, -2)), a2_shape).reshape(a_shape));
  }
  if (grads.wants(1)) {
    const Tensor a2 = a1 ? a.unsqueeze(0) : a;  // (..., M, K)
    const Shape b2_shape = b1 ? Shape{b_shape[0], 1} : b_shape;
    grads.add(1, sum_to(matmul(a2.transpose(-1, -2), d), b2_shape).reshape(b_shape));
  }
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::wants_lower(a, b)) return std::apply(matmul, autocast::lower(a, b));  // xgrad/autocast.h
  profiler::RecordFunction rec("matmul");
  check_float_pair("matmul", a, b);
  if (a.dim() == 0 || b.dim() == 0)
    fail("matmul", "both arguments need at least 1 dimension, got shapes ", a.shape(), " and ", b.shape(),
         " (use mul for a scalar product)");
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (ka != kb)
    fail("matmul", "shapes ", a.shape(), " and ", b.shape(), " cannot be multiplied (", ka, " != ", kb, ")");
  // torch.matmul: a 1-D a is a (1, K) row and a 1-D b a (K, 1) column whose added dim is
  // dropped from the result; the dims before the last two broadcast
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  const Tensor a2 = as_row(a), b2 = as_col(b);  // (..., M, K), (..., K, N)
  const Shape batch = batch_shape(a2, b2);
  Shape out2_shape = batch;
  out2_shape.push_back(a2.size(-2));
  out2_shape.push_back(b2.size(-1));
  Tensor out2 = empty(out2_shape, a.dtype());  // (batch..., M, N)
  bmm_into(out2, a2, b2, batch, false);
  Shape out_shape = batch;
  if (!a1) out_shape.push_back(a2.size(-2));
  if (!b1) out_shape.push_back(b2.size(-1));
  Tensor out = (a1 || b1) ? make_view(out2, out_shape, contiguous_strides(out_shape), 0) : out2;

  // torch 1.13's names: dot, mv, mm, a squeezed mm for (K) @ (K, N), else a viewed bmm
  const char* name = a1 && b1                       ? "DotBackward0"
                     : a.dim() == 2 && b1           ? "MvBackward0"
                     : a.dim() == 2 && b.dim() == 2 ? "MmBackward0"
                     : a1 && b.dim() == 2           ? "SqueezeBackward3"
                                                    : "UnsafeViewBackward0";
  return record(
      name, out, {a, b},
      [sa = b.requires_grad() ? save(a) : SavedTensor(), sb = a.requires_grad() ? save(b) : SavedTensor(),
       a_shape = a.shape(), b_shape = b.shape(), a1, b1, batch](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a @ b per batch entry, so da = dout @ b^T and db = a^T @ dout,
        // summed over the batch dims each operand was broadcast along (bmm_into sums where the
        // gradient's batch stride is 0); 1-D operands are a row / a column as in the forward
        if (GradMode::is_enabled()) {
          matmul_backward_recorded(sa.defined() ? sa.get() : Tensor(), sb.defined() ? sb.get() : Tensor(),
                                   a_shape, b_shape, dout, grads);
          return;
        }
        Tensor d = dout.detach();  // (batch..., M, N) once the dims are back
        if (b1) d = d.unsqueeze(-1);
        if (a1) d = d.unsqueeze(-2);
        if (grads.wants(0)) {
          Tensor da = empty(a_shape, dout.dtype());
          bmm_into(as_row(da), d, as_col(sb.get()).transpose(-1, -2), batch, false);
          grads.add(0, da);
        }
        if (grads.wants(1)) {
          Tensor db = empty(b_shape, dout.dtype());
          bmm_into(as_col(db), as_row(sa.get()).transpose(-1, -2), d, batch, false);
          grads.add(1, db);
        }
      });
}

namespace {
// db = dout summed over every dim but the last, accumulated in double: the row sums of dout^T,
// the same kernel (and bits) as the sums the weight gradient's GEMM takes beside it.
// A bfloat16 dout is summed from its widened values (exact) the same way, without a float32
// copy, and each sum is rounded to float32, then to bfloat16 (as the float32 sums of its
// float32 copy would be).
Tensor bias_grad(const Tensor& dout, int64_t features) {
  Tensor d = dout.is_contiguous() ? dout : dense_copy(dout);
  Tensor db = empty({features}, dout.dtype());
  const int64_t rows = features == 0 ? 0 : d.numel() / features;
  if (dout.dtype() == kBFloat16) {
    blas::row_sums(true, features, rows, static_cast<const uint16_t*>(d.raw_data_ptr()),
                   std::max<int64_t>(features, 1), static_cast<uint16_t*>(db.raw_data_ptr()));
    return db;
  }
  kernels::dispatch_float(dout.dtype(), "linear", [&](auto tag) {
    using T = decltype(tag);
    blas::row_sums(true, features, rows, d.data_ptr<T>(), std::max<int64_t>(features, 1), db.data_ptr<T>());
  });
  return db;
}

// linear's backward in recorded ops, with the leading dims of x and dout folded into R rows:
// dx = dout @ W, dW = dout(R, out)^T @ x(R, in), db = dout(R, out) summed over the rows.
// x is only needed (defined) for dW, W for dx.
void linear_backward_recorded(const Tensor& x, const Tensor& w, const Shape& x_shape, const Tensor& dout,
                              Grads& grads) {
  const int64_t in_f = x_shape.back(), out_f = dout.shape().back();
  const int64_t rows = numel_of(Shape(x_shape.begin(), x_shape.end() - 1));
  if (grads.wants(0)) grads.add(0, matmul(dout, w));
  const Tensor d = dout.reshape({rows, out_f});  // (R, out)
  if (grads.wants(1)) grads.add(1, matmul(d.t(), x.reshape({rows, in_f})));
  if (grads.wants(2)) grads.add(2, sum(d, 0));
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autocast::wants_lower(x, weight, bias)) return std::apply(linear, autocast::lower(x, weight, bias));
  profiler::RecordFunction rec("linear");
  check_float_pair("linear", x, weight);
  if (weight.dim() != 2)
    fail("linear", "weight must be 2-D (out_features, in_features), got shape ", weight.shape());
  if (x.dim() == 0) fail("linear", "input must have at least 1 dimension, got shape ", x.shape());
  const int64_t in_f = weight.size(1), out_f = weight.size(0);
  if (x.size(-1) != in_f)
    fail("linear", "input of shape ", x.shape(), " does not match weight of shape ", weight.shape(),
         " (in_features ", x.size(-1), " != ", in_f, ")");
  if (bias.defined()) {
    if (bias.dtype() != x.dtype())
      fail("linear", "bias dtype ", dtype_name(bias.dtype()), " does not match input dtype ",
           dtype_name(x.dtype()));
    if (bias.shape() != Shape{out_f})
      fail("linear", "bias of shape ", bias.shape(), " does not match weight of shape ", weight.shape(),
           " (expected [", out_f, "])");
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor out = empty(out_shape, x.dtype());  // (..., out) = x @ W^T + b
  const Shape batch = x.dim() > 2 ? Shape(x.shape().begin(), x.shape().end() - 2) : Shape{};
  if (bias.defined() && in_f > 0) {  // b added in the GEMM's epilogue
    bmm_into(as_row(out), as_row(x), weight.detach().t(), batch, false, bias.detach().contiguous());
  } else {
    if (bias.defined()) kernels::copy_into(out, bias);
    bmm_into(as_row(out), as_row(x), weight.detach().t(), batch, bias.defined());
  }

  // torch 1.13's names: addmm for 2-D input with bias, a viewed addmm for contiguous 3-D
  // input with bias, else matmul's name (+ an add for the bias)
  const char* name = !bias.defined()                     ? (x.dim() == 1   ? "SqueezeBackward3"
                                                            : x.dim() == 2 ? "MmBackward0"
                                                                           : "UnsafeViewBackward0")
                     : x.dim() == 2                      ? "AddmmBackward0"
                     : x.dim() == 3 && x.is_contiguous() ? "ViewBackward0"
                                                         : "AddBackward0";
  return record(name, out, {x, weight, bias},
                [sx = weight.requires_grad() ? save(x) : SavedTensor(),
                 sw = x.requires_grad() ? save(weight) : SavedTensor(), x_shape = x.shape(),
                 w_shape = weight.shape(), batch](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = x @ W^T + b, so dx = dout @ W, dW = dout^T @ x summed over all
                  // leading dims (one GEMM over the folded B*T rows) and db = dout summed over leading dims
                  if (GradMode::is_enabled()) {
                    linear_backward_recorded(sx.defined() ? sx.get() : Tensor(),
                                             sw.defined() ? sw.get() : Tensor(), x_shape, dout, grads);
                    return;
                  }
                  const Tensor d = as_row(dout);  // (..., R, out)
                  if (grads.wants(0)) {
                    Tensor dx = empty(x_shape, dout.dtype());
                    bmm_into(as_row(dx), d, sw.get(), batch, false);
                    grads.add(0, dx);
                  }
                  // db (the column sums of dout) comes with dW from the same GEMM where it can
                  Tensor db = grads.wants(2) ? empty({w_shape[0]}, dout.dtype()) : Tensor();
                  bool db_done = false;
                  if (grads.wants(1)) {
                    Tensor dw = empty(w_shape, dout.dtype());
                    db_done = bmm_into(dw, d.transpose(-1, -2), as_row(sx.get()), batch, false, Tensor(), db);
                    grads.add(1, dw);
                  }
                  if (grads.wants(2)) grads.add(2, db_done ? db : bias_grad(dout, w_shape[0]));
                });
}

// ---------------------------------------------------------------- outer

Tensor outer(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("outer");
  if (a.dim() != 1 || b.dim() != 1)
    fail("outer", "expects two 1-D tensors, got shapes ", a.shape(), " and ", b.shape());
  if (a.dtype() != b.dtype())
    fail("outer", "expected both tensors to have the same dtype, got ", dtype_name(a.dtype()), " ", a.shape(),
         " and ", dtype_name(b.dtype()), " ", b.shape());
  Tensor out;
  {
    NoGradGuard no_grad;  // (n, 1) * (1, m) -> (n, m)
    out = mul(a.view({a.size(0), 1}), b.view({1, b.size(0)}));
  }
  // torch.outer is this broadcast multiply too, hence torch's grad_fn name
  return record("MulBackward0", out, {a, b}, [as = save(a), bs = save(b)](const Tensor& dout, Grads& grads) {
    // in the forward pass out[i][j] = a[i] * b[j], so da = dout @ b and db = dout^T @ a
    if (grads.wants(0)) grads.add(0, matmul(dout, bs.get()));
    if (grads.wants(1)) grads.add(1, matmul(as.get(), dout));
  });
}

}  // namespace xgrad
