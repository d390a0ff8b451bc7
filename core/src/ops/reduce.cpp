// core/src/ops/reduce.cpp: reductions (sum, mean, var, std, max/min, amax/amin, argmax/argmin,
// logsumexp) and cumsum.
//
// How a reduction runs: stride-0 (expanded) dims are folded in without reading them twice,
// the rest of the input (made contiguous) is seen as groups of adjacent dims that are all
// reduced or all kept, size-1 dims dropped. Each reduced group is removed by one pass over an
// (A, R, B) block: B == 1 reduces contiguous rows (sum over the last dim) with 16 independent
// lanes the compiler vectorises; B > 1 accumulates whole rows of B (sum over leading dims,
// e.g. the bias gradient (B*T, C) -> (C)). float32 sums add short blocks in float and the
// block sums in double (torch's cascade idea); float64 and int64 accumulate natively.
// max/min/argmax along one dim use the same (A, R, B) view and keep the first index on ties.
// Threads (reduce_pass) split rows or output columns, never one output's summation. The
// passes over one (A, R, B) block are kernels (kernels/reduce_kernel.h).
// bfloat16 reduces its float32 copy (compute_copy, op_helpers.h: the sums accumulate as
// float32's do) and rounds the result once (result_as); max/min are exact either way.
// Adding a reduction: an Op struct (init/step/merge/repeat) for reduce_passes, then record().
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels.h"
#include "op_helpers.h"
#include "reduce_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// ---------------------------------------------------------------- dims
using kernels::wrap_dim;

// Which dims are reduced (dims empty = all); negative dims wrap, repeats are rejected.
std::vector<bool> reduced_mask(const char* op, const Shape& shape, const Shape& dims) {
  std::vector<bool> mask(shape.size(), dims.empty());
  std::vector<bool> seen(std::max<std::size_t>(shape.size(), 1), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(op, d, shape);
    if (seen[w])
      fail(op, "dim ", w, " appears multiple times in the list of dims ", dims, " (shape ", shape, ")");
    seen[w] = true;
    if (!shape.empty()) mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) n *= shape[d];
  return n;
}

// ---------------------------------------------------------------- the (A, R, B) passes
using kernels::MaxOp;
using kernels::MinOp;
using kernels::reduce_pass;
using kernels::SumOp;

struct Group {
  int64_t size;
  bool reduced;
};

// Groups of adjacent dims with the same reduced flag (size-1 dims dropped).
std::vector<Group> group_dims(const Shape& shape, const std::vector<bool>& mask) {
  std::vector<Group> g;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!g.empty() && g.back().reduced == mask[d]) g.back().size *= shape[d];
    else g.push_back({shape[d], static_cast<bool>(mask[d])});
  }
  return g;
}

// out (fresh, `out_shape`, element type Out) = Op over the masked dims of `a`, which has
// element type In; intermediate passes keep Acc precision. Dims broadcast with stride 0 hold
// one value: a reduced one is folded in by Op::repeat (a sum multiplies by its size), a kept
// one is reduced once and broadcast into the output, so an expanded gradient is never copied.
template <class Op, class Acc, class In, class Out>
Tensor reduce_passes(const Tensor& a, const std::vector<bool>& mask, const Shape& out_shape,
                     DType out_dtype) {
  Tensor out = empty(out_shape, out_dtype);
  if (out.numel() == 0) return out;
  if (a.numel() == 0) {  // reducing an empty dim gives the identity (sum of nothing = 0)
    Out* py = out.data_ptr<Out>();
    std::fill(py, py + out.numel(), static_cast<Out>(Op::init()));
    return out;
  }
  Shape shape = a.shape();
  int64_t repeat = 1;
  bool broadcast_kept = false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (a.strides()[d] != 0 || shape[d] == 1) continue;
    if (mask[d]) repeat *= shape[d];
    else broadcast_kept = true;
    shape[d] = 1;
  }
  // detached: no CloneBackward0 node for an internal copy
  const Tensor x = make_view(a.detach(), shape, a.strides(), a.storage_offset()).contiguous();
  const Shape keep = reduced_shape(shape, mask, /*keepdim=*/true);
  Tensor dst = broadcast_kept ? empty(keep, out_dtype) : out;
  Out* py = dst.data_ptr<Out>();

  std::vector<Group> groups = group_dims(x.shape(), mask);
  const auto last_reduced = [&] {
    for (int64_t i = static_cast<int64_t>(groups.size()) - 1; i >= 0; --i)
      if (groups[i].reduced) return i;
    return int64_t{-1};
  };
  int64_t g = last_reduced();
  if (g < 0) {  // nothing left to reduce but size-1 dims: a converting copy
    kernels::copy_into(make_view(dst, x.shape(), contiguous_strides(x.shape()), 0), x);
  }
  const In* src = x.data_ptr<In>();
  std::vector<Acc> buf, next;
  bool from_buf = false;
  while (g >= 0) {
    int64_t A = 1, B = 1;
    for (int64_t i = 0; i < g; ++i) A *= groups[i].size;
    for (std::size_t i = g + 1; i < groups.size(); ++i) B *= groups[i].size;
    const int64_t R = groups[g].size;
    groups.erase(groups.begin() + g);
    g = last_reduced();
    if (g < 0) {  // the last pass writes the output
      if (from_buf) reduce_pass<Op, Acc>(buf.data(), py, A, R, B);
      else reduce_pass<Op, Acc>(src, py, A, R, B);
    } else {
      next.resize(static_cast<std::size_t>(A * B));
      if (from_buf) reduce_pass<Op, Acc>(buf.data(), next.data(), A, R, B);
      else reduce_pass<Op, Acc>(src, next.data(), A, R, B);
      buf.swap(next);
      from_buf = true;
    }
  }
  if (repeat > 1)
    for (int64_t i = 0, n = dst.numel(); i < n; ++i)
      py[i] = static_cast<Out>(Op::repeat(static_cast<Acc>(py[i]), repeat));
  if (broadcast_kept) {  // out seen with keepdim sizes <- dst, broadcast over the stride-0 dims
    const Shape full_keep = reduced_shape(a.shape(), mask, /*keepdim=*/true);
    kernels::copy_into(make_view(out, full_keep, contiguous_strides(full_keep), 0), dst);
  }
  return out;
}

// sum without autograd: float -> same dtype, int64/bool -> int64.
Tensor sum_values(const Tensor& a, const std::vector<bool>& mask, const Shape& out_shape) {
  if (a.dtype() == kBFloat16) return rounded(sum_values(widened(a), mask, out_shape));
  return kernels::dispatch_all(a.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>)
      return reduce_passes<SumOp<double>, double, T, T>(a, mask, out_shape, a.dtype());
    else return reduce_passes<SumOp<int64_t>, int64_t, T, int64_t>(a, mask, out_shape, kInt64);
  });
}

// max/min values without autograd (float32/float64/int64), in the input's own precision.
template <template <class> class Op>
Tensor extreme_values(const char* op, const Tensor& a, const std::vector<bool>& mask,
                      const Shape& out_shape) {
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d] && a.shape()[d] == 0)
      fail(op, "cannot reduce over dim ", d, " of size 0 (shape ", a.shape(),
           "): the result has no identity");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const Tensor x = compute_copy(a);
    return reduce_passes<Op<T>, T, T, T>(x, mask, out_shape, x.dtype());
  };
  if (a.dtype() == kInt64) return run(int64_t{});
  if (a.dtype() == kBFloat16) return rounded(run(float{}));  // exact: the extreme is an element
  return kernels::dispatch_float(a.dtype(), op, run);
}

// The mean of x over the dims in mask, kept as size 1: recorded when grad mode is on (a
// backward being recorded differentiates through the mean too).
Tensor mean_keep(const Tensor& x, const std::vector<bool>& mask, int64_t n) {
  if (!GradMode::is_enabled())
    return div(sum_values(x, mask, reduced_shape(x.shape(), mask, true)), static_cast<double>(n));
  Shape dims;
  for (std::size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return div(sum(x, dims, /*keepdim=*/true), static_cast<double>(n));
}

// dout (the reduced shape, with or without keepdim) seen with size-1 reduced dims.
Tensor keepdim_view(const Tensor& dout, const Shape& in_shape, const std::vector<bool>& mask) {
  return dout.reshape(reduced_shape(in_shape, mask, /*keepdim=*/true));
}

}  // namespace

// ---------------------------------------------------------------- sum / mean
Tensor sum(const Tensor& a, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("sum");
  const std::vector<bool> mask = reduced_mask("sum", a.shape(), dims);
  Tensor out = sum_values(a, mask, reduced_shape(a.shape(), mask, keepdim));
  const char* name = dims.empty() && !keepdim ? "SumBackward0" : "SumBackward1";
  return record(name, out, {a}, [in_shape = a.shape(), mask](const Tensor& dout, Grads& grads) {
    // in the forward pass every input element was added once, so dx = dout broadcast back
    grads.add(0, keepdim_view(dout, in_shape, mask).expand(in_shape));
  });
}

Tensor sum(const Tensor& a) { return sum(a, {}, false); }

Tensor mean(const Tensor& a, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("mean");
  check_floating_any("mean", a);
  const std::vector<bool> mask = reduced_mask("mean", a.shape(), dims);
  const int64_t n = reduced_count(a.shape(), mask);
  Tensor out = sum_values(compute_copy(a), mask, reduced_shape(a.shape(), mask, keepdim));
  kernels::dispatch_float(out.dtype(), "mean", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data_ptr<T>();
    const T count = static_cast<T>(n);
    for (int64_t i = 0, m = out.numel(); i < m; ++i) p[i] /= count;  // 0/0 = nan when empty
  });
  out = result_as(out, a);
  const char* name = dims.empty() && !keepdim ? "MeanBackward0" : "MeanBackward1";
  return record(name, out, {a}, [in_shape = a.shape(), mask, n](const Tensor& dout, Grads& grads) {
    // in the forward pass out = sum / n, so dx = dout / n broadcast back
    grads.add(0, keepdim_view(div(dout, static_cast<double>(n)), in_shape, mask).expand(in_shape));
  });
}

Tensor mean(const Tensor& a) { return mean(a, {}, false); }

// ---------------------------------------------------------------- var
Tensor var(const Tensor& a, Dims dims, Flag unbiased, Flag keepdim) {
  profiler::RecordFunction rec("var");
  check_floating_any("var", a);
  const std::vector<bool> mask = reduced_mask("var", a.shape(), dims);
  const int64_t n = reduced_count(a.shape(), mask);
  const double denom = static_cast<double>(n) - (unbiased ? 1.0 : 0.0);  // 0 gives nan/inf like torch
  Tensor out;
  {
    NoGradGuard no_grad;  // two passes: mean, then the squared deviations
    const Shape keep = reduced_shape(a.shape(), mask, true);
    const Tensor x = compute_copy(a);
    Tensor centered = sub(x, div(sum_values(x, mask, keep), static_cast<double>(n)));
    out = result_as(
        div(sum_values(mul(centered, centered), mask, reduced_shape(a.shape(), mask, keepdim)), denom), a);
  }
  return record("VarBackward0", out, {a}, [as = save(a), mask, n, denom](const Tensor& dout, Grads& grads) {
    // in the forward pass out = sum((x - mean)^2) / denom, so dx = dout * 2 (x - mean) / denom
    // (the mean's own gradient term sums to zero)
    const Tensor x = as.get();
    const Shape keep = reduced_shape(x.shape(), mask, true);
    Tensor centered = sub(x, mean_keep(x, mask, n));
    grads.add(0, mul(centered, mul(dout.reshape(keep), 2.0 / denom)));
  });
}

Tensor var(const Tensor& a, Flag unbiased) { return var(a, {}, unbiased, false); }

// ---------------------------------------------------------------- std
Tensor std(const Tensor& a, Dims dims, Flag unbiased, Flag keepdim) {
  profiler::RecordFunction rec("std");
  check_floating_any("std", a);
  const std::vector<bool> mask = reduced_mask("std", a.shape(), dims);
  const int64_t n = reduced_count(a.shape(), mask);
  const double denom = static_cast<double>(n) - (unbiased ? 1.0 : 0.0);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = result_as(sqrt(var(compute_copy(a), dims, unbiased, keepdim)), a);
  }
  return record("StdBackward0", out, {a},
                [as = save(a), outs = save(out), mask, n, denom](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = sqrt(sum((x - mean)^2) / denom), so
                  // dx = dout * (x - mean) / (denom * out); torch takes 0 where out == 0 (a constant slice)
                  const Tensor x = as.get();
                  const Shape keep = reduced_shape(x.shape(), mask, true);
                  const Tensor s = outs.get().reshape(keep);
                  Tensor centered = sub(x, mean_keep(x, mask, n));
                  Tensor scale = masked_fill(div(dout.reshape(keep), mul(s, denom)), eq(s, 0.0), 0.0);
                  grads.add(0, mul(centered, scale));
                });
}

Tensor std(const Tensor& a, Flag unbiased) { return std(a, {}, unbiased, false); }

// ---------------------------------------------------------------- max / min / amax (values)
namespace {
// For a value that several elements share: the gradient is split evenly among them (torch's
// evenly_distribute_backward / amax backward); a NaN result selects the NaN inputs.
Tensor split_among_ties(const Tensor& x, const Tensor& value_keep, const Tensor& dout_keep,
                        const std::vector<bool>& mask) {
  const Tensor is_nan_result = ne(value_keep, value_keep);
  Tensor hit = where(is_nan_result, ne(x, x), eq(x, value_keep)).to(x.dtype());
  const Tensor count = sum_values(hit, mask, value_keep.shape());
  return mul(hit, div(dout_keep, count));
}

// The largest (MaxOp) or smallest (MinOp) element of each slice reduced by `mask`, shaped
// `out_shape`, recorded as `node`: in the forward pass out = that element, so the gradient
// goes to it, split evenly among ties (torch's evenly_distribute_backward / amax backward).
template <template <class> class Op>
Tensor extreme_reduction(const char* op, const char* node, const Tensor& a, const std::vector<bool>& mask,
                         const Shape& out_shape) {
  Tensor out = extreme_values<Op>(op, a, mask, out_shape);
  return record(node, out, {a}, [as = save(a), outs = save(out), mask](const Tensor& dout, Grads& grads) {
    const Shape keep = reduced_shape(as.get().shape(), mask, true);
    grads.add(0, split_among_ties(as.get(), outs.get().reshape(keep), dout.reshape(keep), mask));
  });
}
}  // namespace

Tensor max(const Tensor& a) {
  profiler::RecordFunction rec("max");
  if (a.numel() == 0) fail("max", "expected a non-empty tensor, got shape ", a.shape());
  return extreme_reduction<MaxOp>("max", "MaxBackward1", a, std::vector<bool>(a.dim(), true), {});
}

Tensor min(const Tensor& a) {
  profiler::RecordFunction rec("min");
  if (a.numel() == 0) fail("min", "expected a non-empty tensor, got shape ", a.shape());
  return extreme_reduction<MinOp>("min", "MinBackward1", a, std::vector<bool>(a.dim(), true), {});
}

Tensor amax(const Tensor& a, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("amax");
  const std::vector<bool> mask = reduced_mask("amax", a.shape(), dims);
  return extreme_reduction<MaxOp>("amax", "AmaxBackward0", a, mask, reduced_shape(a.shape(), mask, keepdim));
}

Tensor amin(const Tensor& a, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("amin");
  const std::vector<bool> mask = reduced_mask("amin", a.shape(), dims);
  return extreme_reduction<MinOp>("amin", "AminBackward0", a, mask, reduced_shape(a.shape(), mask, keepdim));
}

Tensor max(const Tensor& a, const Tensor& other) { return maximum(a, other); }
Tensor min(const Tensor& a, const Tensor& other) { return minimum(a, other); }

// ---------------------------------------------------------------- along one dim, with indices
namespace {
// (values, indices) of max or min along `dim`, without autograd.
template <bool kMax>
ValuesIndices arg_reduce(const char* op, const Tensor& a, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim(op, dim, a.shape());
  const int64_t R = a.dim() == 0 ? 1 : a.shape()[d];
  if (R == 0) fail(op, "cannot reduce over dim ", d, " of size 0 (shape ", a.shape(), ")");
  std::vector<bool> mask(a.dim(), false);
  if (a.dim() > 0) mask[d] = true;
  const Shape out_shape = reduced_shape(a.shape(), mask, keepdim);
  int64_t A = 1, B = 1;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (i < d) A *= a.shape()[i];
    if (i > d) B *= a.shape()[i];
  }
  if (a.dtype() == kBFloat16) {  // exact: the extreme is an element
    ValuesIndices f = arg_reduce<kMax>(op, widened(a), dim, keepdim);
    return {rounded(f.values), f.indices};
  }
  ValuesIndices r{empty(out_shape, a.dtype()), empty(out_shape, kInt64)};
  if (r.values.numel() == 0) return r;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const Tensor x = a.detach().contiguous();
    kernels::arg_pass<kMax>(x.data_ptr<T>(), r.values.data_ptr<T>(), r.indices.data_ptr<int64_t>(), A, R, B);
  };
  if (a.dtype() == kInt64) run(int64_t{});
  else kernels::dispatch_float(a.dtype(), op, run);
  return r;
}

// dx = dout placed at each slice's chosen index along dim, zeros elsewhere.
Tensor scatter_to_index(const Tensor& dout, const Tensor& indices, const Shape& in_shape, int64_t dim) {
  Tensor dx = zeros(in_shape, dout.dtype());
  if (dx.numel() == 0) return dx;
  const int64_t d = in_shape.empty() ? 0 : (dim < 0 ? dim + static_cast<int64_t>(in_shape.size()) : dim);
  int64_t A = 1, B = 1, R = in_shape.empty() ? 1 : in_shape[d];
  for (int64_t i = 0; i < static_cast<int64_t>(in_shape.size()); ++i) {
    if (i < d) A *= in_shape[i];
    if (i > d) B *= in_shape[i];
  }
  const Tensor g = dout.contiguous();
  const Tensor ix = indices.contiguous();
  kernels::dispatch_any(dx.dtype(), "max", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = g.data_ptr<T>();
    const int64_t* pi = ix.data_ptr<int64_t>();
    T* px = dx.data_ptr<T>();
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) px[(a * R + pi[a * B + b]) * B + b] = pg[a * B + b];
  });
  return dx;
}

template <bool kMax>
ValuesIndices max_min_dim(const char* op, const char* node, const Tensor& a, int64_t dim, bool keepdim) {
  ValuesIndices r = arg_reduce<kMax>(op, a, dim, keepdim);
  r.values =
      record(node, r.values, {a},
             [in_shape = a.shape(), dim, is = save(r.indices)](const Tensor& dout, Grads& grads) {
               // in the forward pass out = x at the chosen index, so the gradient goes to that element
               const Shape out_shape = dout.shape();
               auto scatter = [=](const Tensor& g) { return scatter_to_index(g, is.get(), in_shape, dim); };
               auto pick = [=](const Tensor& g) {  // g at the chosen indices: scatter's adjoint
                 if (in_shape.empty()) return g.clone();
                 const int64_t d = dim < 0 ? dim + static_cast<int64_t>(in_shape.size()) : dim;
                 Tensor index = is.get();
                 if (index.dim() < static_cast<int64_t>(in_shape.size())) index = index.unsqueeze(d);
                 return gather(g, d, index).reshape(out_shape);
               };
               grads.add(0, linear_map("ScatterBackward0", "GatherBackward0", dout, scatter, pick));
             });
  return r;
}
}  // namespace

ValuesIndices max(const Tensor& a, Int dim, Flag keepdim) {
  return max_min_dim<true>("max", "MaxBackward0", a, dim, keepdim);
}
ValuesIndices min(const Tensor& a, Int dim, Flag keepdim) {
  return max_min_dim<false>("min", "MinBackward0", a, dim, keepdim);
}

Tensor argmax(const Tensor& a, Int dim, Flag keepdim) {
  profiler::RecordFunction rec("argmax");
  return arg_reduce<true>("argmax", a, dim, keepdim).indices;
}
Tensor argmin(const Tensor& a, Int dim, Flag keepdim) {
  profiler::RecordFunction rec("argmin");
  return arg_reduce<false>("argmin", a, dim, keepdim).indices;
}
Tensor argmax(const Tensor& a) {
  profiler::RecordFunction rec("argmax");
  if (a.numel() == 0) fail("argmax", "expected a non-empty tensor, got shape ", a.shape());
  return arg_reduce<true>("argmax", a.reshape({-1}), 0, false).indices;
}
Tensor argmin(const Tensor& a) {
  profiler::RecordFunction rec("argmin");
  if (a.numel() == 0) fail("argmin", "expected a non-empty tensor, got shape ", a.shape());
  return arg_reduce<false>("argmin", a.reshape({-1}), 0, false).indices;
}

// ---------------------------------------------------------------- cumsum
namespace {
// Running sums of `a` along dim d (reverse: from the end), recorded as CumsumBackward0: the
// backward of a running sum is the reversed running sum of dout, and that one's is a running
// sum again, so every order of derivative is this function.
Tensor cumsum_along(const Tensor& a, int64_t d, bool reverse) {
  const Tensor x = a.detach().contiguous();
  Tensor out = empty(a.shape(), a.dtype());
  int64_t A = 1, R = a.dim() == 0 ? 1 : a.shape()[d], B = 1;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (i < d) A *= a.shape()[i];
    if (i > d) B *= a.shape()[i];
  }
  if (out.numel() > 0) {
    if (a.dtype() == kBFloat16) {  // running sums in double, each rounded once
      const Tensor xf = widened(x);
      Tensor of = empty(a.shape(), kFloat32);
      kernels::cumsum_pass<float, double>(xf.data_ptr<float>(), of.data_ptr<float>(), A, R, B, reverse);
      kernels::copy_into(out, of);
    } else if (a.dtype() == kInt64) {
      kernels::cumsum_pass<int64_t, int64_t>(x.data_ptr<int64_t>(), out.data_ptr<int64_t>(), A, R, B,
                                             reverse);
    } else {
      kernels::dispatch_float(a.dtype(), "cumsum", [&](auto tag) {
        using T = decltype(tag);
        kernels::cumsum_pass<T, double>(x.data_ptr<T>(), out.data_ptr<T>(), A, R, B, reverse);
      });
    }
  }
  return record("CumsumBackward0", out, {a}, [d, reverse](const Tensor& dout, Grads& grads) {
    // in the forward pass y[i] = sum of x[j] for j <= i, so dx[j] = sum of dout[i] for i >= j
    grads.add(0, cumsum_along(dout, d, !reverse));
  });
}
}  // namespace

Tensor cumsum(const Tensor& a, Int dim) {
  profiler::RecordFunction rec("cumsum");
  const int64_t d = wrap_dim("cumsum", dim, a.shape());
  if (a.dtype() == kBool) return cumsum_along(a.to(kInt64), d, false);
  return cumsum_along(a, d, false);
}

// ---------------------------------------------------------------- logsumexp
// torch's shift: m = the max over dims, taken as 0 where it is infinite (so a row of -inf
// gives log(0) = -inf and a row holding +inf gives +inf, not NaN from inf - inf).
Tensor logsumexp(const Tensor& a, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("logsumexp");
  if (!is_floating(a.dtype())) return logsumexp(a.to(kFloat32), dims, keepdim);
  const std::vector<bool> mask = reduced_mask("logsumexp", a.shape(), dims);
  const Shape keep = reduced_shape(a.shape(), mask, true);
  const Shape out_shape = reduced_shape(a.shape(), mask, keepdim);
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor x = compute_copy(a);
    if (a.numel() == 0) {
      out = log(sum_values(exp(x), mask, out_shape));
    } else {
      Tensor m = extreme_values<MaxOp>("logsumexp", x, mask, keep);
      m = masked_fill(m, eq(abs(m), INFINITY), 0.0);
      out = add(log(sum_values(exp(sub(x, m)), mask, out_shape)), m.reshape(out_shape));
    }
    out = result_as(out, a);
  }
  return record("LogsumexpBackward0", out, {a},
                [as = save(a), outs = save(out), keep](const Tensor& dout, Grads& grads) {
                  // in the forward pass y = log(sum(exp(x))), so dx = dout * exp(x - y)
                  grads.add(0, mul(dout.reshape(keep), exp(sub(as.get(), outs.get().reshape(keep)))));
                });
}

}  // namespace xgrad
