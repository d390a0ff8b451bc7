// core/src/ops/views.cpp: the zero-copy views (view, reshape, flatten, transpose, permute,
// slice, narrow, select, unsqueeze, squeeze, expand), behind the Tensor methods of the same
// names (tensor_methods.cpp). Each makes a new shape/strides/offset over the same storage;
// each backward maps the gradient back to the input's shape.
#include <algorithm>
#include <numeric>

#include "kernels.h"
#include "op_helpers.h"
#include "tensor_ops.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {
// Resolves one -1 and checks the element count.
Shape infer_shape(const char* op, const Shape& from, Shape to) {
  int64_t infer = -1;
  Shape known_sizes;
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      if (infer >= 0) fail(op, "only one dimension can be -1, got ", to);
      infer = static_cast<int64_t>(i);
    } else if (to[i] < 0) {
      fail(op, "invalid size ", to[i], " in shape ", to);
    } else {
      known_sizes.push_back(to[i]);
    }
  }
  const int64_t known = numel_of(known_sizes);  // throws naming the sizes when it overflows
  const int64_t n = numel_of(from);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      fail(op, "shape ", to, " is invalid for input of size ", n, " (shape ", from, ")");
    to[infer] = n / known;
  } else if (known != n) {
    fail(op, "shape ", to, " is invalid for input of size ", n, " (shape ", from, ")");
  }
  return to;
}

// Strides for viewing (shape, strides) as new_shape without copying, if possible
// (reference: torch's at::detail::computeStride). Empty optional when impossible.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  Shape out(new_shape.size());
  if (numel_of(shape) == 0) return contiguous_strides(new_shape);
  if (shape.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// storage_offset + index * stride. Inside a non-empty view this fits (make_view checked the
// bounds); an empty view addresses nothing and may have strides whose products overflow: it
// keeps the input's offset then.
int64_t offset_at(const Tensor& t, int64_t index, int64_t stride) {
  int64_t off;
  if (__builtin_mul_overflow(index, stride, &off) || __builtin_add_overflow(off, t.storage_offset(), &off))
    return t.storage_offset();
  return off;
}

Tensor view_as_shape(const Tensor& self, const Shape& shape, const Shape& strides) {
  return make_view(self, shape, strides, self.storage_offset());
}
}  // namespace

namespace tensor_ops {

Tensor view(const Tensor& self, Shape requested) {
  profiler::RecordFunction rec("view");
  const Shape new_shape = infer_shape("view", self.shape(), std::move(requested));
  auto st = view_strides(self.shape(), self.strides(), new_shape);
  if (!st)
    fail("view", "cannot view a tensor of shape ", self.shape(), " and strides ", self.strides(),
         " as shape ", new_shape,
         ": its elements are not laid out contiguously in memory (a transpose or "
         "permute made it non-contiguous). Call .contiguous().view(...) or use .reshape(...), "
         "which copies when it must");
  Tensor out = view_as_shape(self, new_shape, *st);
  const Shape in_shape = self.shape();
  return record("ViewBackward0", out, {self}, [in_shape](const Tensor& dout, Grads& grads) {
    // in the forward pass out = self seen with a new shape, so dself = dout in the old one
    grads.add(0, dout.reshape(in_shape));
  });
}

Tensor reshape(const Tensor& self, Shape requested) {
  profiler::RecordFunction rec("reshape");
  const Shape new_shape = infer_shape("reshape", self.shape(), std::move(requested));
  if (view_strides(self.shape(), self.strides(), new_shape)) return self.view(new_shape);
  return self.clone().view(new_shape);
}

Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  profiler::RecordFunction rec("flatten");
  if (self.dim() == 0) return self.reshape({1});
  const int64_t s = wrap_dim("flatten", start_dim, self.dim(), self.shape());
  const int64_t e = wrap_dim("flatten", end_dim, self.dim(), self.shape());
  if (s > e)
    fail("flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim, " for shape ", self.shape());
  Shape out(self.shape().begin(), self.shape().begin() + s);
  out.push_back(numel_of(Shape(self.shape().begin() + s, self.shape().begin() + e + 1)));
  out.insert(out.end(), self.shape().begin() + e + 1, self.shape().end());
  return self.reshape(out);
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  profiler::RecordFunction rec("transpose");
  const int64_t a = wrap_dim("transpose", dim0, self.dim(), self.shape());
  const int64_t b = wrap_dim("transpose", dim1, self.dim(), self.shape());
  if (self.dim() == 0) return self;
  Shape sh = self.shape(), st = self.strides();
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  Tensor out = make_view(self, sh, st, self.storage_offset());
  return record("TransposeBackward0", out, {self}, [a, b](const Tensor& dout, Grads& grads) {
    // in the forward pass dims a and b were swapped, so swap them back
    grads.add(0, dout.transpose(a, b));
  });
}

Tensor t(const Tensor& self) {
  if (self.dim() > 2)
    fail("t", "expects a tensor with <= 2 dimensions, got shape ", self.shape(), "; use transpose(d0, d1)");
  if (self.dim() < 2) return self;
  return self.transpose(0, 1);
}

Tensor permute(const Tensor& self, Shape dims) {
  profiler::RecordFunction rec("permute");
  if (static_cast<int64_t>(dims.size()) != self.dim())
    fail("permute", "got ", dims.size(), " dims ", dims, " for a tensor of shape ", self.shape());
  Shape sh(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> used(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim("permute", dims[i], self.dim(), self.shape());
    if (used[d]) fail("permute", "repeated dim in ", dims);
    used[d] = true;
    sh[i] = self.shape()[d];
    st[i] = self.strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  Tensor out = make_view(self, sh, st, self.storage_offset());
  return record("PermuteBackward0", out, {self}, [inverse](const Tensor& dout, Grads& grads) {
    // in the forward pass out dim i was self dim dims[i], so apply the inverse permutation
    grads.add(0, dout.permute(inverse));
  });
}

// Scatters dout into zeros of the input's shape through the same view geometry (unrecorded).
template <class View>
static Tensor scatter_into_zeros(const Tensor& dout, const Shape& in_shape, const View& same_view) {
  Tensor g = zeros(in_shape, dout.dtype());
  NoGradGuard guard;
  kernels::copy_into(same_view(g), dout);
  return g;
}

Tensor slice(const Tensor& self, int64_t d, int64_t start, int64_t end, int64_t step) {
  profiler::RecordFunction rec("slice");
  if (self.dim() == 0) fail("slice", "cannot slice a 0-d tensor");
  d = wrap_dim("slice", d, self.dim(), self.shape());
  if (step <= 0) fail("slice", "step must be positive, got ", step);
  const int64_t n = self.shape()[d];
  // Python slice semantics: negative indices count from the end, then clamp to [0, n]
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = self.shape(), st = self.strides();
  sh[d] = (end - start) / step + ((end - start) % step != 0);  // no overflow for a huge step
  // stride * step as torch; it can only overflow when the dim has size <= 1 (step >= n), where
  // any stride addresses the same element: keep the input's then
  if (__builtin_mul_overflow(self.strides()[d], step, &st[d])) st[d] = self.strides()[d];
  Tensor out = make_view(self, sh, st, offset_at(self, start, self.strides()[d]));
  const Shape in_shape = self.shape();
  return record("SliceBackward0", out, {self},
                [in_shape, d, start, end, step](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = self[start:end:step] along d, so dself is dout there, 0
                  // elsewhere
                  auto take = [=](const Tensor& g) { return g.slice(d, start, end, step); };
                  auto put = [=](const Tensor& g) { return scatter_into_zeros(g, in_shape, take); };
                  grads.add(0, linear_map("SliceBackwardBackward0", "SliceBackward0", dout, put, take));
                });
}

Tensor narrow(const Tensor& self, int64_t d, int64_t start, int64_t length) {
  profiler::RecordFunction rec("narrow");
  d = wrap_dim("narrow", d, self.dim(), self.shape());
  const int64_t n = self.shape()[d];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    fail("narrow", "start ", start, " and length ", length, " are out of range for dim ", d, " of size ", n,
         " (shape ", self.shape(), ")");
  return self.slice(d, start, start + length);
}

Tensor select(const Tensor& self, int64_t d, int64_t index) {
  profiler::RecordFunction rec("select");
  if (self.dim() == 0) fail("select", "cannot index a 0-d tensor");
  d = wrap_dim("select", d, self.dim(), self.shape());
  const int64_t n = self.shape()[d];
  if (index < -n || index >= n)
    fail("select", "index ", index, " is out of range for dim ", d, " of size ", n, " (shape ", self.shape(),
         ")");
  if (index < 0) index += n;
  Shape sh = self.shape(), st = self.strides();
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = make_view(self, sh, st, offset_at(self, index, self.strides()[d]));
  const Shape in_shape = self.shape();
  return record("SelectBackward0", out, {self}, [in_shape, d, index](const Tensor& dout, Grads& grads) {
    // in the forward pass out = self[index] along d, so dself is dout at that index, 0 elsewhere
    auto take = [=](const Tensor& g) { return g.select(d, index); };
    auto put = [=](const Tensor& g) { return scatter_into_zeros(g, in_shape, take); };
    grads.add(0, linear_map("SelectBackwardBackward0", "SelectBackward0", dout, put, take));
  });
}

Tensor unsqueeze(const Tensor& self, int64_t d) {
  profiler::RecordFunction rec("unsqueeze");
  d = wrap_dim("unsqueeze", d, self.dim() + 1, self.shape());
  Shape sh = self.shape(), st = self.strides();
  int64_t new_stride = 1;  // torch: size * stride of the dim it goes before (any value works)
  if (d < self.dim() && __builtin_mul_overflow(self.strides()[d], self.shape()[d], &new_stride))
    new_stride = self.strides()[d];
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  Tensor out = make_view(self, sh, st, self.storage_offset());
  return record("UnsqueezeBackward0", out, {self}, [d](const Tensor& dout, Grads& grads) {
    // in the forward pass a size-1 dim was inserted at d, so remove it
    grads.add(0, dout.squeeze(d));
  });
}

static Tensor squeeze_dims(const Tensor& self, const std::vector<bool>& drop, const char* name) {
  Shape sh, st;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (drop[d]) continue;
    sh.push_back(self.shape()[d]);
    st.push_back(self.strides()[d]);
  }
  Tensor out = make_view(self, sh, st, self.storage_offset());
  const Shape in_shape = self.shape();
  return record(name, out, {self}, [in_shape](const Tensor& dout, Grads& grads) {
    // in the forward pass size-1 dims were removed, so put them back
    grads.add(0, dout.reshape(in_shape));
  });
}

Tensor squeeze(const Tensor& self) {
  profiler::RecordFunction rec("squeeze");
  std::vector<bool> drop(self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) drop[d] = self.shape()[d] == 1;
  return squeeze_dims(self, drop, "SqueezeBackward0");
}

Tensor squeeze(const Tensor& self, int64_t d) {
  profiler::RecordFunction rec("squeeze");
  if (self.dim() == 0) return self;
  d = wrap_dim("squeeze", d, self.dim(), self.shape());
  std::vector<bool> drop(self.dim(), false);
  drop[d] = self.shape()[d] == 1;
  return squeeze_dims(self, drop, "SqueezeBackward1");
}

Tensor expand(const Tensor& self, Shape target) {
  profiler::RecordFunction rec("expand");
  if (static_cast<int64_t>(target.size()) < self.dim())
    fail("expand", "the number of sizes ", target, " must be >= the tensor's dims (shape ", self.shape(),
         ")");
  const std::size_t lead = target.size() - self.shape().size();
  Shape st(target.size(), 0);
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      if (target[i] < 0) fail("expand", "-1 is not allowed for a new leading dim: ", target);
      continue;
    }
    const int64_t have = self.shape()[i - lead];
    if (target[i] == -1) target[i] = have;
    if (have == target[i]) {
      st[i] = self.strides()[i - lead];
    } else if (have == 1) {
      st[i] = 0;
    } else {
      fail("expand", "cannot expand shape ", self.shape(), " to ", target, " (dim ", i, ": ", have,
           " is not 1)");
    }
  }
  Tensor out = make_view(self, target, st, self.storage_offset());
  const Shape in_shape = self.shape();
  return record("ExpandBackward0", out, {self}, [in_shape](const Tensor& dout, Grads& grads) {
    // in the forward pass size-1 dims were repeated, so sum the gradient over them
    grads.add(0, sum_to(dout, in_shape));
  });
}

}  // namespace tensor_ops

}  // namespace xgrad
