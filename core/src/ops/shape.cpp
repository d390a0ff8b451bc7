// core/src/ops/shape.cpp: ops that assemble a tensor from pieces or pick parts of one: cat,
// stack, split, chunk, repeat_interleave, index_select (the embedding lookup), masked_fill and the in-place
// masked_fill_ behind Tensor::masked_fill_ (the causal mask in attention), triu, tril (and in
// place), roll. The zero-copy views (view, transpose, slice, ...) and their backward are in
// views.cpp.
//
// Adding an op: forward into a fresh contiguous `empty(...)`, backward closure right below,
// and a row in tests/core/gradcheck_rows_shape.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bf16_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "tensor_ops.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// "[2, 3], [2, 4]"
std::string shapes_str(const std::vector<Tensor>& ts) {
  std::string s;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    if (i) s += ", ";
    s += ts[i].defined() ? shape_str(ts[i].shape()) : "undefined";
  }
  return s;
}

// The view of `base` (contiguous) where dim d runs over [start, start + len).
Tensor narrow_view(const Tensor& base, int64_t d, int64_t start, int64_t len) {
  Shape sh = base.shape();
  sh[d] = len;
  return make_view(base, sh, base.strides(), base.storage_offset() + start * base.strides()[d]);
}

// Python's prod(shape[begin:end]).
int64_t prod(const Shape& s, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

}  // namespace

// ---------------------------------------------------------------- cat / stack

Tensor cat(const std::vector<Tensor>& tensors, Int dim) {
  profiler::RecordFunction rec("cat");
  if (tensors.empty()) fail("cat", "expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined()) fail("cat", "tensor ", i, " of the list is undefined");
  // like torch, 1-D empty tensors (shape [0]) are skipped when concatenating higher-dim ones
  auto legacy_empty = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  const Tensor* ref = &tensors[0];
  for (const Tensor& t : tensors)
    if (!legacy_empty(t)) {
      ref = &t;
      break;
    }
  if (ref->dim() == 0)
    fail("cat", "zero-dimensional tensors cannot be concatenated (got shapes ", shapes_str(tensors),
         "); use stack");
  const int64_t d = wrap_dim("cat", dim, ref->dim(), ref->shape());
  std::vector<int64_t> sizes(tensors.size(), -1);  // -1: skipped
  int64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dtype() != ref->dtype())
      fail("cat", "expected all tensors to have the same dtype, got ", dtype_name(ref->dtype()), " and ",
           dtype_name(t.dtype()), " (tensor ", i, "; shapes ", shapes_str(tensors), ")");
    if (legacy_empty(t) && ref->dim() != 1) continue;
    bool match = t.dim() == ref->dim();
    for (int64_t k = 0; match && k < t.dim(); ++k) match = k == d || t.shape()[k] == ref->shape()[k];
    if (!match)
      fail("cat", "sizes of tensors must match except in dimension ", d, ", got shapes ", shapes_str(tensors),
           " (tensor ", i, " differs)");
    sizes[i] = t.shape()[d];
    total += sizes[i];
  }
  Shape out_shape = ref->shape();
  out_shape[d] = total;
  Tensor out = empty(out_shape, ref->dtype());  // (..., sum of sizes, ...)
  int64_t at = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] < 0) continue;
    kernels::copy_into(narrow_view(out, d, at, sizes[i]), tensors[i]);
    at += sizes[i];
  }
  std::vector<Shape> in_shapes;
  for (const Tensor& t : tensors) in_shapes.push_back(t.shape());
  return record("CatBackward0", out, tensors, [d, sizes, in_shapes](const Tensor& dout, Grads& grads) {
    // in the forward pass the inputs were laid side by side along d, so each one's gradient is
    // its slice of dout
    int64_t at = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] < 0) {
        if (grads.wants(i)) grads.add(i, zeros(in_shapes[i], dout.dtype()));
        continue;
      }
      if (grads.wants(i)) grads.add(i, dout.narrow(d, at, sizes[i]));
      at += sizes[i];
    }
  });
}

Tensor stack(const std::vector<Tensor>& tensors, Int dim) {
  profiler::RecordFunction rec("stack");
  if (tensors.empty()) fail("stack", "expected a non-empty list of tensors");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) fail("stack", "tensor ", i, " of the list is undefined");
    if (tensors[i].shape() != tensors[0].shape() || tensors[i].dtype() != tensors[0].dtype())
      fail("stack", "expects each tensor to be equal size and dtype, got shapes ", shapes_str(tensors),
           " (tensor ", i, " is ", dtype_name(tensors[i].dtype()), " ", tensors[i].shape(), ")");
  }
  const Tensor& ref = tensors[0];
  const int64_t d = wrap_dim("stack", dim, ref.dim() + 1, ref.shape());
  Shape out_shape = ref.shape();
  out_shape.insert(out_shape.begin() + d, static_cast<int64_t>(tensors.size()));
  Tensor out = empty(out_shape, ref.dtype());  // (..., n, ...)
  Shape sub_strides = out.strides();
  sub_strides.erase(sub_strides.begin() + d);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    kernels::copy_into(make_view(out, ref.shape(), sub_strides, static_cast<int64_t>(i) * out.strides()[d]),
                       tensors[i]);
  const int64_t n = static_cast<int64_t>(tensors.size());
  return record("StackBackward0", out, tensors, [d, n](const Tensor& dout, Grads& grads) {
    // in the forward pass input i became out's slice i along d, so its gradient is dout's
    for (int64_t i = 0; i < n; ++i)
      if (grads.wants(i)) grads.add(i, dout.select(d, i));
  });
}

// ---------------------------------------------------------------- split / chunk
// The pieces are narrow() views of `a` (zero-copy; their backward is narrow's).

std::vector<Tensor> split(const Tensor& a, Int split_size, Int dim) {
  profiler::RecordFunction rec("split");
  if (a.dim() == 0) fail("split", "expects at least a 1-dimensional tensor, got shape []");
  const int64_t d = wrap_dim("split", dim, a.dim(), a.shape());
  const int64_t n = a.shape()[d];
  if (split_size < 0 || (split_size == 0 && n != 0))
    fail("split", "split_size must be positive (0 only for an empty dim), got ", split_size, " for dim ", d,
         " of shape ", a.shape());
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((n + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    out.push_back(a.narrow(d, start, std::min<int64_t>(split_size, n - start)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, Int dim) {
  profiler::RecordFunction rec("split");
  if (a.dim() == 0) fail("split", "expects at least a 1-dimensional tensor, got shape []");
  const int64_t d = wrap_dim("split", dim, a.dim(), a.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split", "split sizes must be non-negative, got ", Shape(sizes));
    total += s;
  }
  if (total != a.shape()[d])
    fail("split", "split sizes ", Shape(sizes), " sum to ", total, " but dim ", d, " of shape ", a.shape(),
         " has size ", a.shape()[d]);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(a.narrow(d, at, s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& a, Int chunks, Int dim) {
  profiler::RecordFunction rec("chunk");
  if (a.dim() == 0) fail("chunk", "expects at least a 1-dimensional tensor, got shape []");
  if (chunks <= 0)
    fail("chunk", "expects `chunks` to be greater than 0, got ", chunks, " (shape ", a.shape(), ")");
  const int64_t d = wrap_dim("chunk", dim, a.dim(), a.shape());
  const int64_t n = a.shape()[d];
  // reference: torch's chunk: pieces of ceil(n / chunks), so there may be fewer than `chunks`;
  // an empty dim still gives `chunks` empty pieces
  const int64_t split_size = (n + chunks - 1) / chunks;
  if (split_size == 0 && n == 0) return split(a, std::vector<int64_t>(chunks, 0), d);
  return split(a, split_size, d);
}

// ---------------------------------------------------------------- repeat_interleave
// torch builds the index [0]*r + [1]*r + ... and calls index_select, so the node is
// IndexSelectBackward0 and the backward sums each slice's repeats. A 0-d input needs no dim.
Tensor repeat_interleave(const Tensor& a, Int repeats, Int dim) {
  profiler::RecordFunction rec("repeat_interleave");
  if (repeats < 0)
    fail("repeat_interleave", "repeats can not be negative, got ", repeats, " (shape ", a.shape(), ")");
  if (a.dim() == 0)
    fail("repeat_interleave", "dimension ", dim, " given for a tensor of shape [] (leave dim out)");
  const int64_t d = wrap_dim("repeat_interleave", dim, a.shape());
  const int64_t n = a.shape()[d];
  std::vector<int64_t> idx(static_cast<std::size_t>(checked_mul(n, repeats, a.shape())));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i) / repeats;
  return index_select(a, d, from_vector(idx, {static_cast<int64_t>(idx.size())}));
}

Tensor repeat_interleave(const Tensor& a, Int repeats) {
  return repeat_interleave(a.reshape({-1}), repeats, 0);
}

// ---------------------------------------------------------------- index_select

Tensor index_select(const Tensor& a, Int dim, const Tensor& index) {
  profiler::RecordFunction rec("index_select");
  if (index.dtype() != kInt64)
    fail("index_select", "index must be an int64 tensor, got ", dtype_name(index.dtype()), " of shape ",
         index.shape(), " (use index.to(kInt64))");
  if (index.dim() > 1) fail("index_select", "index must be 1-D, got shape ", index.shape());
  if (a.dim() == 0) fail("index_select", "cannot index a 0-d tensor (shape [])");
  const int64_t d = wrap_dim("index_select", dim, a.dim(), a.shape());
  const int64_t n = a.shape()[d];
  const std::vector<int64_t> idx = index.to_vector<int64_t>();
  for (int64_t v : idx)
    if (v < 0 || v >= n)
      fail("index_select", "index ", v, " is out of range for dim ", d, " of size ", n, " (shape ", a.shape(),
           ")");
  const int64_t k = static_cast<int64_t>(idx.size());
  const int64_t outer = prod(a.shape(), 0, d), inner = prod(a.shape(), d + 1, a.dim());
  Shape out_shape = a.shape();
  out_shape[d] = k;
  Tensor out = empty(out_shape, a.dtype());  // a's shape with dim d of size k
  const Tensor src = a.is_contiguous() ? a : a.detach().contiguous();
  kernels::dispatch_any(a.dtype(), "index_select", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = src.data_ptr<T>();
    T* po = out.data_ptr<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < k; ++i) {
        const T* from = pa + (o * n + idx[i]) * inner;
        T* to = po + (o * k + i) * inner;
        for (int64_t j = 0; j < inner; ++j) to[j] = from[j];
      }
  });
  return record("IndexSelectBackward0", out, {a},
                [d, idx, a_shape = a.shape(), outer, inner, n, k](const Tensor& dout, Grads& grads) {
                  // in the forward pass out[.., i, ..] = a[.., index[i], ..], so da[.., index[i], ..] +=
                  // dout[.., i, ..]: a repeated index (the same token twice) accumulates
                  auto index_add = [=](const Tensor& dout) {
                    // a bfloat16 dout accumulates in float32, rounded once
                    Tensor da = zeros(a_shape, dout.dtype() == kBFloat16 ? kFloat32 : dout.dtype());
                    const Tensor g = compute_copy(dout).contiguous();
                    kernels::dispatch_float(da.dtype(), "index_select", [&](auto tag) {
                      using T = decltype(tag);
                      const T* pg = g.data_ptr<T>();
                      T* pd = da.data_ptr<T>();
                      for (int64_t o = 0; o < outer; ++o)
                        for (int64_t i = 0; i < k; ++i) {
                          const T* from = pg + (o * k + i) * inner;
                          T* to = pd + (o * n + idx[i]) * inner;
                          for (int64_t j = 0; j < inner; ++j) to[j] += from[j];
                        }
                    });
                    return result_as(da, dout);
                  };
                  auto select = [=](const Tensor& g) {
                    Tensor index = empty({k}, kInt64);
                    std::copy(idx.begin(), idx.end(), index.data_ptr<int64_t>());
                    return index_select(g, d, index);
                  };
                  grads.add(0,
                            linear_map("IndexAddBackward0", "IndexSelectBackward0", dout, index_add, select));
                });
}

// ---------------------------------------------------------------- masked_fill

namespace {

void check_mask(const char* op, const Tensor& mask) {
  if (!mask.defined()) fail(op, "the mask is undefined");
  if (mask.dtype() != kBool)
    fail(op, "expected a bool mask, got a ", dtype_name(mask.dtype()), " mask of shape ", mask.shape(),
         "; use mask.to(kBool) (comparisons like x > 0 already give bool)");
}

// out = mask ? value : a, with a and mask broadcast to out's shape (out may alias a).
void fill_masked(const Tensor& out, const Tensor& a, const Tensor& mask, double value) {
  kernels::dispatch_any(a.dtype(), "masked_fill", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, int64_t>)
      if (!std::isfinite(value)) fail("masked_fill", "value ", value, " cannot be stored in an int64 tensor");
    T v;
    if constexpr (std::is_same_v<T, bf16>) v = kernels::to_bf16(static_cast<float>(value));
    else v = static_cast<T>(value);
    const T* pa = a.data_ptr<T>();
    const bool* pm = mask.data_ptr<bool>();
    T* po = out.data_ptr<T>();
    std::array<Shape, 3> st{out.strides(), kernels::broadcast_strides(a, out.shape()),
                            kernels::broadcast_strides(mask, out.shape())};
    kernels::parallel_for_each_row<3>(
        out.shape(), st, kernels::kGrain,
        [&](const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& in) {
          T* o = po + off[0];
          const T* x = pa + off[1];
          const bool* m = pm + off[2];
          const T fill = v;  // a local copy: the stores to o cannot alias it
          if (in[0] == 1 && in[1] == 1 && in[2] == 1) {
            for (int64_t i = 0; i < len; ++i) o[i] = m[i] ? fill : x[i];
          } else {
            for (int64_t i = 0; i < len; ++i) o[i * in[0]] = m[i * in[2]] ? fill : x[i * in[1]];
          }
        });
  });
}

// dout with zeros where mask (broadcast to dout's shape) is true: masked_fill's backward.
Tensor zero_where(const Tensor& dout, const Tensor& mask) {
  Tensor out = empty(dout.shape(), dout.dtype());
  fill_masked(out, dout, mask, 0.0);
  return out;
}

}  // namespace

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  profiler::RecordFunction rec("masked_fill");
  check_mask("masked_fill", mask);
  const Shape out_shape = kernels::broadcast_shapes("masked_fill", a.shape(), mask.shape());
  Tensor out = empty(out_shape, a.dtype());
  fill_masked(out, a, mask, value);
  return record("MaskedFillBackward0", out, {a},
                [m = save(mask), a_shape = a.shape()](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a where the mask is false and a constant where it is true, so
                  // da = dout where the mask is false and 0 where it is true (summed over broadcast dims)
                  auto zero = [m](const Tensor& g) { return zero_where(g, m.get()); };
                  Tensor da = linear_map("MaskedFillBackward0", "MaskedFillBackward0", dout, zero, zero);
                  grads.add(0, da.shape() == a_shape ? da : sum_to(da, a_shape));
                });
}

namespace tensor_ops {
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value) {
  check_mask("masked_fill_", mask);
  check_recorded_inplace("masked_fill_", self);  // before writing: leaves, views in the graph
  if (kernels::broadcast_shapes("masked_fill_", self.shape(), mask.shape()) != self.shape())
    fail("masked_fill_", "mask of shape ", mask.shape(), " cannot be broadcast to the tensor's shape ",
         self.shape(), " (an in-place op cannot change the shape)");
  for (int64_t d = 0; d < self.dim(); ++d)
    if (self.strides()[d] == 0 && self.shape()[d] > 1)
      fail("masked_fill_", "the tensor (shape ", self.shape(), ", strides ", self.strides(),
           ") is an expanded view whose elements share memory; call .clone() first");
  fill_masked(self, self, mask, value);
  self.bump_version();
  return record_inplace("MaskedFillBackward0", self, {}, [m = save(mask)](const Tensor& dout, Grads& grads) {
    // in the forward pass self was overwritten with a constant where the mask is true, so the
    // old self's gradient is dout where the mask is false and 0 where it is true
    auto zero = [m](const Tensor& g) { return zero_where(g, m.get()); };
    grads.add(0, linear_map("MaskedFillBackward0", "MaskedFillBackward0", dout, zero, zero));
  });
}
}  // namespace tensor_ops

// ---------------------------------------------------------------- triu / tril

namespace {

// Zeroes, in every (R, C) matrix of the contiguous t, the part outside the triangle:
// upper keeps j - i >= diagonal (triu), lower keeps j - i <= diagonal (tril).
void zero_outside_triangle(const Tensor& t, int64_t diagonal, bool upper) {
  const int64_t R = t.size(-2), C = t.size(-1);
  const int64_t mats = R * C == 0 ? 0 : t.numel() / (R * C);
  kernels::dispatch_any(t.dtype(), "tril / triu", [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (int64_t b = 0; b < mats; ++b)
      for (int64_t i = 0; i < R; ++i) {
        T* row = p + (b * R + i) * C;
        const int64_t lo = upper ? 0 : std::clamp<int64_t>(i + diagonal + 1, 0, C);
        const int64_t hi = upper ? std::clamp<int64_t>(i + diagonal, 0, C) : C;
        for (int64_t j = lo; j < hi; ++j) row[j] = T{};
      }
  });
}

// g inside the triangle and 0 outside, as a fresh tensor (unrecorded).
auto keep_triangle(int64_t diagonal, bool upper) {
  return [diagonal, upper](const Tensor& g) {
    Tensor out = empty(g.shape(), g.dtype());
    kernels::copy_into(out, g);
    zero_outside_triangle(out, diagonal, upper);
    return out;
  };
}

Tensor triangle(const char* op, const char* name, const Tensor& a, int64_t diagonal, bool upper) {
  if (a.dim() < 2) fail(op, "expects a tensor with at least 2 dimensions, got shape ", a.shape());
  Tensor out = empty(a.shape(), a.dtype());  // (..., R, C)
  kernels::copy_into(out, a);
  zero_outside_triangle(out, diagonal, upper);
  return record(name, out, {a}, [name, diagonal, upper](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a inside the triangle and 0 outside, so da is dout inside it
    grads.add(0,
              linear_map(name, name, dout, keep_triangle(diagonal, upper), keep_triangle(diagonal, upper)));
  });
}

}  // namespace

Tensor triu(const Tensor& a, Int diagonal) { return triangle("triu", "TriuBackward0", a, diagonal, true); }
Tensor tril(const Tensor& a, Int diagonal) { return triangle("tril", "TrilBackward0", a, diagonal, false); }

namespace {
// triu_/tril_: zero outside the triangle in place; recorded like masked_fill_.
Tensor& triangle_(const char* op, const char* name, Tensor& a, int64_t diagonal, bool upper) {
  if (a.dim() < 2) fail(op, "expects a tensor with at least 2 dimensions, got shape ", a.shape());
  check_recorded_inplace(op, a);  // before writing: leaves, views in the graph
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.strides()[d] == 0 && a.shape()[d] > 1)
      fail(op, "the tensor (shape ", a.shape(), ", strides ", a.strides(),
           ") is an expanded view whose elements share memory; call .clone() first");
  if (a.is_contiguous()) {
    zero_outside_triangle(a, diagonal, upper);
  } else {  // (..., R, C) strided: zero a contiguous copy, write it back
    Tensor tmp = empty(a.shape(), a.dtype());
    kernels::copy_into(tmp, a);
    zero_outside_triangle(tmp, diagonal, upper);
    kernels::copy_into(a, tmp);
  }
  a.bump_version();
  return record_inplace(name, a, {}, [name, diagonal, upper](const Tensor& dout, Grads& grads) {
    // in the forward pass self was zeroed outside the triangle, so the old self's gradient
    // is dout inside it and 0 outside
    grads.add(0,
              linear_map(name, name, dout, keep_triangle(diagonal, upper), keep_triangle(diagonal, upper)));
  });
}
}  // namespace

Tensor& triu_(Tensor& a, Int diagonal) { return triangle_("triu_", "TriuBackward0", a, diagonal, true); }
Tensor& tril_(Tensor& a, Int diagonal) { return triangle_("tril_", "TrilBackward0", a, diagonal, false); }

// ---------------------------------------------------------------- roll

namespace {
// out = a rolled by `shift` along d (out contiguous, a any layout): out[(i + shift) % n] = a[i].
void roll_into(const Tensor& out, const Tensor& a, int64_t d, int64_t shift) {
  const int64_t n = a.shape()[d];
  const int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
  auto part = [d](const Tensor& t, int64_t start, int64_t len) {
    Shape sh = t.shape();
    sh[d] = len;
    return make_view(t, sh, t.strides(), t.storage_offset() + start * t.strides()[d]);
  };
  if (n - s > 0) kernels::copy_into(part(out, s, n - s), part(a, 0, n - s));
  if (s > 0) kernels::copy_into(part(out, 0, s), part(a, n - s, s));
}

Tensor roll_values(const Tensor& a, const Shape& shifts, const Shape& dims) {
  if (dims.empty()) {  // the flattened tensor, shape restored
    Tensor flat = empty({a.numel()}, a.dtype());
    kernels::copy_into(make_view(flat, a.shape(), contiguous_strides(a.shape()), 0), a);
    Tensor out = empty(a.shape(), a.dtype());
    roll_into(make_view(out, {a.numel()}, {1}, 0), flat, 0, shifts[0]);
    return out;
  }
  Tensor cur = a.detach();  // read through plain views: no graph bookkeeping
  for (std::size_t i = 0; i < dims.size(); ++i) {
    Tensor next = empty(a.shape(), a.dtype());
    roll_into(next, cur, dims[i], shifts[i]);
    cur = next;
  }
  return cur;
}
}  // namespace

Tensor roll(const Tensor& a, Dims shifts, Dims dims) {
  profiler::RecordFunction rec("roll");
  if (shifts.empty()) fail("roll", "expected at least one shift (shape ", a.shape(), ")");
  if (dims.empty() ? shifts.size() != 1 : shifts.size() != dims.size())
    fail("roll", "shifts ", Shape(shifts), " and dims ", Shape(dims),
         " must have the same length (one shift without dims rolls the flattened tensor; shape ", a.shape(),
         ")");
  Shape wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim("roll", d, a.dim(), a.shape()));
  if (a.dim() == 0) return a.clone();
  Tensor out = roll_values(a, shifts, wrapped);  // a's shape
  Shape forth, back;
  for (int64_t s : shifts) forth.push_back(s), back.push_back(-s);
  return record("RollBackward0", out, {a}, [forth, back, wrapped](const Tensor& dout, Grads& grads) {
    // in the forward pass element i moved to i + shift, so its gradient comes back from there
    auto unroll = [=](const Tensor& g) { return roll_values(g, back, wrapped); };
    auto reroll = [=](const Tensor& g) { return roll_values(g, forth, wrapped); };
    grads.add(0, linear_map("RollBackward0", "RollBackward0", dout, unroll, reroll));
  });
}

}  // namespace xgrad
