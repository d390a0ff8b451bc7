// core/src/kernels/kernels.h (private): the loops every op family builds on.
//
// core/src/kernels/ is the kernel floor: every SIMD loop of the library, built as the
// uninstalled xgrad_kernels target (core/CMakeLists.txt) that core, nn and optim link
// privately. What an op *is* (checks, shapes, its backward closure) lives in its op file one
// floor up; how the CPU runs it lives here, as a named forward/backward pair per fused op:
//   kernels.h, kernels.cpp     this file: dispatch, row walks, threads, broadcasting, copies
//   vec_math.h                 xsimd maps and row loops (exp, erf, GELU, softmax rows, ...)
//   <family>_kernel.h          activation, nn_functional, elementwise, reduce, sdpa (on
//                              attention_kernel.h / attention_backward.h), adam, sgd,
//                              clip_grad, random (mt19937, bernoulli, Box-Muller)
//   gemm_kernel.h, blas.h/.cpp the GEMM and its entry points
//   bf16_kernel.h              bfloat16 <-> float32 (round to nearest even) and its loops
// A new fused op adds its pair to its family's header: raw-pointer loops, then a
// `<op>_forward` / `<op>_backward` taking contiguous Tensors that dispatches on the dtype and
// splits the work over the threads; the op file checks, calls it and records.
//
// - dispatch_float / dispatch_all: call a generic lambda with a value of the element type
//   (bfloat16 throws naming the op); check_floating: the check alone; dispatch_any: also
//   bfloat16 (as kernels' bf16 element), for loops that only move elements.
// - parallel_for_each_row: walk N strided operands of one shape row by row, innermost dim
//   last, after merging dims that are contiguous in every operand (so a contiguous tensor is
//   one row), split over the thread pool by element ranges.
// - parallel_elems / parallel_rows: split a flat or a row loop over xgrad's pool
//   (xgrad/parallel.h) above a grain size, so small tensors stay serial with no overhead.
// - broadcast_shapes / broadcast_strides: NumPy broadcasting (stride 0 on expanded dims).
// - copy_into: dst[...] = src[...] for any layouts, broadcasting src, converting dtype.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "op_helpers.h"
#include "xgrad/parallel.h"
#include "xgrad/tensor.h"

namespace xgrad::kernels {

using xgrad::dispatch_float;  // public: xgrad/dtype.h

// dispatch_all(t, op, f) calls f with a float, double, int64_t or bool; a bfloat16 tensor
// throws "<op>: does not take bfloat16 tensors yet" (the bfloat16 paths branch on kBFloat16
// before dispatching, or use dispatch_any below where they only move elements).
template <class F>
decltype(auto) dispatch_all(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Bool:
      return f(bool{});
    case DType::BFloat16:
      break;
  }
  fail(op, "does not take bfloat16 tensors yet; convert with .to(kFloat32)");
}
using xgrad::wrap_dim;  // op_helpers.h

// dispatch_all that also calls f(bf16{}) for a bfloat16 tensor: for loops that only move
// elements (gather, index_select, masked_fill, where's selection), never compute on them.
template <class F>
decltype(auto) dispatch_any(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(bf16{});
  return dispatch_all(t, op, f);
}

// NumPy broadcasting of two shapes; throws naming `op` and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides of `t` seen as a tensor of shape `target` (t's shape must broadcast to it).
Shape broadcast_strides(const Tensor& t, const Shape& target);

// The dims of N operands of one shape after merging (size-1 dims dropped, d fused with d+1
// when contiguous for every operand). nd == 0: one element; empty: no elements.
template <std::size_t N>
struct RowGeometry {
  int64_t nd = 0;
  bool empty = false;
  std::array<int64_t, 16> sz{};
  std::array<std::array<int64_t, 16>, N> st{};
  int64_t numel() const {
    int64_t n = empty ? 0 : 1;
    for (int64_t d = 0; d < nd; ++d) n *= sz[d];
    return n;
  }
};

template <std::size_t N>
RowGeometry<N> merge_dims(const Shape& shape, const std::array<Shape, N>& strides) {
  RowGeometry<N> g;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank > 16) fail("parallel_for_each_row", "tensors of more than 16 dims are not supported");
  // empty first: an empty view's other sizes times their strides may not fit in int64
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) {
    g.empty = true;
    return g;
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;
    bool fuse = g.nd > 0;
    for (std::size_t k = 0; k < N && fuse; ++k) fuse = g.st[k][g.nd - 1] == strides[k][d] * shape[d];
    if (fuse) {
      g.sz[g.nd - 1] *= shape[d];
      for (std::size_t k = 0; k < N; ++k) g.st[k][g.nd - 1] = strides[k][d];
    } else {
      g.sz[g.nd] = shape[d];
      for (std::size_t k = 0; k < N; ++k) g.st[k][g.nd] = strides[k][d];
      ++g.nd;
    }
  }
  return g;
}

// Calls body(offsets, len, inner) for the elements [lo, hi) (row-major order of the merged
// dims) in row pieces: offsets[k] is operand k's element offset of the piece's start, inner[k]
// its stride along the row. A piece is a whole row except where lo / hi cut one. The
// geometry is copied to locals so the row loop keeps it in registers whatever body writes.
template <std::size_t N, class Body>
void walk_rows(const RowGeometry<N>& geo, int64_t lo, int64_t hi, Body& body) {
  std::array<int64_t, N> off{};
  std::array<int64_t, N> inner{};
  if (geo.empty || lo >= hi) return;
  if (geo.nd == 0) {  // a single element
    body(off, int64_t{1}, inner);
    return;
  }
  if (geo.nd == 1) {  // one row (e.g. contiguous operands): no index bookkeeping
    for (std::size_t k = 0; k < N; ++k) {
      inner[k] = geo.st[k][0];
      off[k] = lo * inner[k];
    }
    body(off, hi - lo, inner);
    return;
  }
  const int64_t nd = geo.nd, last = nd - 1;
  const std::array<int64_t, 16> sz = geo.sz;
  const std::array<std::array<int64_t, 16>, N> st = geo.st;
  const int64_t len = sz[last];
  for (std::size_t k = 0; k < N; ++k) inner[k] = st[k][last];
  std::array<int64_t, 16> idx{};
  int64_t col = 0;
  if (lo != 0) {  // the row and column of lo (a whole-tensor walk skips the divisions)
    col = lo % len;
    for (int64_t d = last - 1, rem = lo / len; d >= 0; --d) {
      idx[d] = rem % sz[d];
      rem /= sz[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += idx[d] * st[k][d];
    }
  }
  auto next_row = [&] {
    for (int64_t d = last - 1; d >= 0; --d) {
      ++idx[d];
      for (std::size_t k = 0; k < N; ++k) off[k] += st[k][d];
      if (idx[d] < sz[d]) return;
      for (std::size_t k = 0; k < N; ++k) off[k] -= st[k][d] * sz[d];
      idx[d] = 0;
    }
  };
  if (col != 0) {  // the tail of a row cut by lo
    std::array<int64_t, N> o = off;
    for (std::size_t k = 0; k < N; ++k) o[k] += col * inner[k];
    const int64_t n = std::min(len - col, hi - lo);
    body(o, n, inner);
    lo += n;
    if (lo >= hi) return;
    next_row();
  }
  const int64_t span = hi - lo;
  const int64_t rows = span == len ? 1 : span / len, tail = span == len ? 0 : span % len;
  for (int64_t r = 0; r < rows; ++r) {  // whole rows (stepping past the last one is harmless)
    body(off, len, inner);
    next_row();
  }
  if (tail != 0) body(off, tail, inner);  // a row cut by hi
}

// Elements per chunk below which a memory-bound loop stays on one thread, and the same for
// loops doing transcendental math; kAlign, would_split and parallel_elems are public
// (xgrad/parallel.h: kParallelGrain, kParallelAlign, parallel_elems).
constexpr int64_t kGrain = kParallelGrain;
constexpr int64_t kGrainMath = 8192;
constexpr int64_t kAlign = kParallelAlign;
using xgrad::parallel_elems;
using xgrad::would_split;

// fn(r0, r1) over row ranges covering [0, rows), in parallel when the rows hold at least
// 2 * grain elements (row_len elements each). Each row is handled whole by one thread, so
// per-row results do not depend on the thread count.
template <class F>
void parallel_rows(int64_t rows, int64_t row_len, int64_t grain, F&& fn) {
  const int64_t per_chunk =
      std::max<int64_t>(1, (grain + std::max<int64_t>(row_len, 1) - 1) / std::max<int64_t>(row_len, 1));
  if (rows < 2 * per_chunk || get_num_threads() == 1 || in_parallel_region()) {
    if (rows > 0) fn(int64_t{0}, rows);
    return;
  }
  parallel_for(0, rows, per_chunk, [&](int64_t r0, int64_t r1) { fn(r0, r1); });
}

// The rows of merge_dims split over threads by element ranges (chunks of at least `grain` elements);
// bodies must be elementwise (no state carried from one row to the next). Operand 0 is the
// output: if it has a broadcast (stride-0) dim, elements share memory and the loop is serial.
template <std::size_t N, class Body>
void parallel_for_each_row(const Shape& shape, const std::array<Shape, N>& strides, int64_t grain,
                           Body&& body) {
  const RowGeometry<N> g = merge_dims<N>(shape, strides);
  bool shared_out = false;
  for (int64_t d = 0; d < g.nd; ++d) shared_out = shared_out || g.st[0][d] == 0;
  const int64_t n = std::max<int64_t>(g.numel(), 1);
  if (shared_out || g.nd == 0) {
    walk_rows<N>(g, 0, n, body);
    return;
  }
  parallel_elems(n, grain, [&](int64_t lo, int64_t hi) { walk_rows<N>(g, lo, hi, body); });
}

// Throws naming `op`, t's dtype and shape unless t is float32 or float64 (what
// dispatch_float accepts): the check of the ops that do not compute bfloat16 (those that do
// check with check_floating_any, op_helpers.h).
inline void check_floating(const char* op, const Tensor& t) {
  if (t.dtype() == kBFloat16)
    fail(op, "does not take bfloat16 tensors yet (got one of shape ", t.shape(),
         "); convert with .to(kFloat32)");
  if (!t.is_floating_point())
    fail(op, "expected a floating-point tensor (float32 or float64), got ", dtype_name(t.dtype()),
         " of shape ", t.shape());
}

// dst = src (src broadcast to dst's shape, converted to dst's dtype). No autograd record,
// no version bump: callers do that.
void copy_into(const Tensor& dst, const Tensor& src);

// out = f(a) elementwise for same-typed a/out (out contiguous, same shape as a).
template <class T, class U, class F>
void map_unary(const Tensor& a, const Tensor& out, F&& f) {
  const T* pa = a.data_ptr<T>();
  U* po = out.data_ptr<U>();
  std::array<Shape, 2> st{out.strides(), a.strides()};
  parallel_for_each_row<2>(
      a.shape(), st, kGrain,
      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
        const auto fn = f;  // a local copy: the output stores cannot alias its captures
        U* o = po + off[0];
        const T* x = pa + off[1];
        if (in[0] == 1 && in[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * in[0]] = fn(x[i * in[1]]);
        }
      });
}

}  // namespace xgrad::kernels
