// core/src/ops/indexing.cpp: ops driven by an index tensor or a mask: gather, scatter_add,
// masked_select, topk and index_put_ (torch's x[i, j] = v / x.index_put_((i, j), v)). (index_select, the
// embedding lookup, is in shape.cpp.)
//
// gather and scatter_add are each other's adjoint, so both backwards (and topk's) are one
// kernel, scatter_add_into. Indices are checked before anything is written: an index out of
// range throws naming the op, the index, the dim and the shapes.
// bfloat16: gather moves elements; gather's backward sums in float32 and rounds once;
// scatter_add, masked_select, topk and index_put_ refuse it (they throw naming themselves).
// Adding an op: forward into a fresh contiguous `empty(...)`, backward closure right below,
// and a row in tests/core/gradcheck_rows_indexing.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels.h"
#include "op_helpers.h"
#include "tensor_ops.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// The element offsets (in elements, from data_ptr) of every position of `shape` in row-major
// order, for a tensor with `strides` (a view may have any strides; 0-d has one position).
std::vector<int64_t> offsets_of(const Shape& shape, const Shape& strides) {
  const int64_t n = numel_of(shape);
  std::vector<int64_t> off(static_cast<std::size_t>(n), 0);
  std::vector<int64_t> pos(shape.size(), 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < n; ++i) {
    off[i] = cur;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++pos[d] < shape[d]) {
        cur += strides[d];
        break;
      }
      cur -= (shape[d] - 1) * strides[d];
      pos[d] = 0;
    }
  }
  return off;
}

// Checks gather/scatter_add's index against `self` (the tensor indexed along dim) and returns
// its values; `other` (src for scatter_add) must be at least as large as index in every dim.
std::vector<int64_t> checked_index(const char* op, const Tensor& self, int64_t d, const Tensor& index,
                                   const Tensor* other) {
  if (index.dtype() != kInt64)
    fail(op, "index must be an int64 tensor, got ", dtype_name(index.dtype()), " of shape ", index.shape(),
         " (use index.to(kInt64))");
  if (index.dim() != self.dim())
    fail(op, "index ", index.shape(), " must have as many dims as the input ", self.shape());
  for (int64_t k = 0; k < index.dim(); ++k) {
    if (k != d && self.dim() > 0 && index.shape()[k] > self.shape()[k])
      fail(op, "index ", index.shape(), " is larger than the input ", self.shape(), " in dim ", k,
           " (only dim ", d, " may differ)");
    if (other && other->dim() > 0 && index.shape()[k] > other->shape()[k])
      fail(op, "index ", index.shape(), " is larger than src ", other->shape(), " in dim ", k);
  }
  std::vector<int64_t> idx = index.to_vector<int64_t>();
  const int64_t n = self.dim() == 0 ? 1 : self.shape()[d];
  for (int64_t v : idx)
    if (v < 0 || v >= n)
      fail(op, "index ", v, " is out of range for dim ", d, " of size ", n, " (input ", self.shape(),
           ", index ", index.shape(), ")");
  return idx;
}

// Offsets of every position p of `shape` (row-major) in a tensor with `strides`, where the
// dim-d coordinate of p is replaced by idx[p]: the element gather reads or scatter writes.
std::vector<int64_t> indexed_offsets(const Shape& shape, Shape strides, int64_t d,
                                     const std::vector<int64_t>& idx) {
  if (shape.empty()) return std::vector<int64_t>(idx.size(), 0);
  const int64_t step = strides[d];
  strides[d] = 0;
  std::vector<int64_t> off = offsets_of(shape, strides);
  for (std::size_t i = 0; i < off.size(); ++i) off[i] += idx[i] * step;
  return off;
}

// dst[.., idx[p], ..] += src[p] along dim d for every position p of index_shape (dst and src
// any layout; src is read at p itself).
void scatter_add_into(const Tensor& dst, int64_t d, const Shape& index_shape, const std::vector<int64_t>& idx,
                      const Tensor& src) {
  if (idx.empty()) return;
  const std::vector<int64_t> to = indexed_offsets(index_shape, dst.strides(), d, idx);
  const std::vector<int64_t> from = offsets_of(index_shape, src.dim() == 0 ? Shape{} : src.strides());
  kernels::dispatch_all(dst.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail("scatter_add", "bool tensors are not supported (dst ", dst.shape(), ")");
    } else {
      const T* ps = src.data_ptr<T>();
      T* pd = dst.data_ptr<T>();
      for (std::size_t i = 0; i < idx.size(); ++i) pd[to[i]] += ps[from[i]];
    }
  });
}

// zeros of `shape` plus src's elements at the positions of index_shape scattered along d
// (what gather's backward computes), unrecorded
Tensor scatter_to_zeros(const Tensor& src, const Shape& shape, int64_t d, const Shape& index_shape,
                        const std::vector<int64_t>& idx) {
  Tensor out = zeros(shape, src.dtype() == kBFloat16 ? kFloat32 : src.dtype());
  scatter_add_into(out, d, index_shape, idx, compute_copy(src));  // bfloat16: sums in float32, rounded once
  return result_as(out, src);
}

// zeros of `shape` holding, at each position p of index_shape, g at p with dim d at idx[p]
// (gather into a tensor at least as large as index_shape: scatter_to_zeros' adjoint), unrecorded
Tensor gather_to_zeros(const Tensor& g, const Shape& shape, int64_t d, const Shape& index_shape,
                       const std::vector<int64_t>& idx) {
  Tensor out = zeros(shape, g.dtype());
  const std::vector<int64_t> from =
      indexed_offsets(index_shape, g.dim() == 0 ? Shape{} : g.strides(), d, idx);
  const std::vector<int64_t> to = offsets_of(index_shape, out.dim() == 0 ? Shape{} : out.strides());
  kernels::dispatch_any(g.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = g.data_ptr<T>();
    T* po = out.data_ptr<T>();
    for (std::size_t i = 0; i < idx.size(); ++i) po[to[i]] = pg[from[i]];
  });
  return out;
}

}  // namespace

// ---------------------------------------------------------------- gather

Tensor gather(const Tensor& a, Int dim, const Tensor& index) {
  profiler::RecordFunction rec("gather");
  const int64_t d = wrap_dim("gather", dim, a.shape());
  const std::vector<int64_t> idx = checked_index("gather", a, d, index, nullptr);
  Tensor out = empty(index.shape(), a.dtype());  // index's shape
  const std::vector<int64_t> from =
      indexed_offsets(index.shape(), a.dim() == 0 ? Shape{} : a.strides(), d, idx);
  kernels::dispatch_any(a.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    T* po = out.data_ptr<T>();
    for (std::size_t i = 0; i < idx.size(); ++i) po[i] = pa[from[i]];
  });
  return record(
      "GatherBackward0", out, {a},
      [a_shape = a.shape(), d, idx, index_shape = index.shape()](const Tensor& dout, Grads& grads) {
        // in the forward pass out[p] = a[p with dim d at index[p]], so da there += dout[p]
        // (an index that repeats accumulates)
        auto scatter = [=](const Tensor& g) { return scatter_to_zeros(g, a_shape, d, index_shape, idx); };
        auto gather = [=](const Tensor& g) { return gather_to_zeros(g, index_shape, d, index_shape, idx); };
        grads.add(0, linear_map("ScatterAddBackward0", "GatherBackward0", dout, scatter, gather));
      });
}

// ---------------------------------------------------------------- scatter_add

Tensor scatter_add(const Tensor& a, Int dim, const Tensor& index, const Tensor& src) {
  profiler::RecordFunction rec("scatter_add");
  const int64_t d = wrap_dim("scatter_add", dim, a.shape());
  if (src.dtype() != a.dtype())
    fail("scatter_add", "src (", dtype_name(src.dtype()), ", shape ", src.shape(),
         ") must have the input's dtype ", dtype_name(a.dtype()), " (shape ", a.shape(), ")");
  if (src.dim() != a.dim())
    fail("scatter_add", "src ", src.shape(), " must have as many dims as the input ", a.shape());
  const std::vector<int64_t> idx = checked_index("scatter_add", a, d, index, &src);
  Tensor out = empty(a.shape(), a.dtype());  // a's shape
  kernels::copy_into(out, a);
  scatter_add_into(out, d, index.shape(), idx, src);
  return record(
      "ScatterAddBackward0", out, {a, src},
      [d, idx, index_shape = index.shape(), src_shape = src.shape()](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a + (src scattered to index), so da = dout and dsrc[p] =
        // dout at p's scattered place (gather); src elements outside index's shape were unused
        if (grads.wants(0)) grads.add(0, dout);
        if (grads.wants(1)) {
          const Shape a_shape = dout.shape();
          auto gather = [=](const Tensor& g) { return gather_to_zeros(g, src_shape, d, index_shape, idx); };
          auto scatter = [=](const Tensor& g) { return scatter_to_zeros(g, a_shape, d, index_shape, idx); };
          grads.add(1, linear_map("GatherBackward0", "ScatterAddBackward0", dout, gather, scatter));
        }
      });
}

// ---------------------------------------------------------------- masked_select

Tensor masked_select(const Tensor& a, const Tensor& mask) {
  profiler::RecordFunction rec("masked_select");
  if (!mask.defined() || mask.dtype() != kBool)
    fail("masked_select", "expected a bool mask, got ",
         mask.defined() ? dtype_name(mask.dtype()) : "an undefined tensor", " (input ", a.shape(),
         mask.defined() ? ", mask " + shape_str(mask.shape()) : std::string(), ")");
  const Shape shape = kernels::broadcast_shapes("masked_select", a.shape(), mask.shape());
  const Tensor m = mask.expand(shape).contiguous();
  const std::vector<int64_t> from = offsets_of(shape, kernels::broadcast_strides(a, shape));
  const bool* pm = m.data_ptr<bool>();
  std::vector<int64_t> picked;  // positions of the broadcast shape, row-major
  for (int64_t i = 0, n = numel_of(shape); i < n; ++i)
    if (pm[i]) picked.push_back(i);
  Tensor out = empty({static_cast<int64_t>(picked.size())}, a.dtype());  // (number of trues)
  kernels::dispatch_all(a.dtype(), "masked_select", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    T* po = out.data_ptr<T>();
    for (std::size_t j = 0; j < picked.size(); ++j) po[j] = pa[from[picked[j]]];
  });
  return record("MaskedSelectBackward0", out, {a},
                [a_shape = a.shape(), shape, picked](const Tensor& dout, Grads& grads) {
                  // in the forward pass out[j] = a at the j-th true position, so that position of the
                  // broadcast shape gets dout[j]; then sum over the dims a was broadcast along
                  auto place = [=](const Tensor& dout) {
                    Tensor g = zeros(shape, dout.dtype());
                    const Tensor gd = dout.contiguous();
                    kernels::dispatch_float(dout.dtype(), "masked_select", [&](auto tag) {
                      using T = decltype(tag);
                      const T* pd = gd.data_ptr<T>();
                      T* pg = g.data_ptr<T>();
                      for (std::size_t j = 0; j < picked.size(); ++j) pg[picked[j]] = pd[j];
                    });
                    return g;
                  };
                  auto pick = [=](const Tensor& g) {
                    Tensor out = empty({static_cast<int64_t>(picked.size())}, g.dtype());
                    const Tensor gc = g.contiguous();
                    kernels::dispatch_float(g.dtype(), "masked_select", [&](auto tag) {
                      using T = decltype(tag);
                      const T* pg = gc.data_ptr<T>();
                      T* po = out.data_ptr<T>();
                      for (std::size_t j = 0; j < picked.size(); ++j) po[j] = pg[picked[j]];
                    });
                    return out;
                  };
                  Tensor g = linear_map("MaskedScatterBackward0", "MaskedSelectBackward0", dout, place, pick);
                  grads.add(0, g.shape() == a_shape ? g : sum_to(g, a_shape));
                });
}

// ---------------------------------------------------------------- topk

ValuesIndices topk(const Tensor& a, Int k, Int dim, Flag largest, Flag sorted) {
  (void)sorted;  // the result is always sorted (torch leaves the order unspecified otherwise)
  const int64_t d = wrap_dim("topk", dim, a.shape());
  const int64_t R = a.dim() == 0 ? 1 : a.shape()[d];
  if (k < 0 || k > R)
    fail("topk", "k (", k.get(), ") is out of range for dim ", d, " of size ", R, " (shape ", a.shape(), ")");
  if (a.dtype() == kBool) fail("topk", "bool tensors are not supported (shape ", a.shape(), ")");
  Shape out_shape = a.shape();
  if (a.dim() > 0) out_shape[d] = k;
  // rows along d: the positions of a with dim d at 0, each with R elements stride a.stride(d)
  Shape rows_shape = a.shape();
  if (a.dim() > 0) rows_shape[d] = 1;
  const std::vector<int64_t> row_in = offsets_of(rows_shape, a.dim() == 0 ? Shape{} : a.strides());
  ValuesIndices r{empty(out_shape, a.dtype()), empty(out_shape, kInt64)};
  const std::vector<int64_t> row_out = offsets_of(rows_shape, a.dim() == 0 ? Shape{} : r.values.strides());
  const int64_t in_step = a.dim() == 0 ? 0 : a.strides()[d];
  const int64_t out_step = a.dim() == 0 ? 0 : r.values.strides()[d];
  kernels::dispatch_all(a.dtype(), "topk", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* pa = a.data_ptr<T>();
      T* pv = r.values.data_ptr<T>();
      int64_t* pi = r.indices.data_ptr<int64_t>();
      std::vector<int64_t> order(static_cast<std::size_t>(R));
      for (std::size_t row = 0; row < row_in.size(); ++row) {
        const T* x = pa + row_in[row];
        // NaN ranks above every number (largest) or below none (smallest), like torch;
        // equal values keep the lower index first
        const auto before = [&](int64_t i, int64_t j) {
          const T xi = x[i * in_step], xj = x[j * in_step];
          const bool ni = xi != xi, nj = xj != xj;
          if (ni || nj) {
            if (ni && nj) return i < j;
            return largest ? ni : nj;
          }
          if (xi != xj) return largest ? xi > xj : xi < xj;
          return i < j;
        };
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          pv[row_out[row] + j * out_step] = x[order[j] * in_step];
          pi[row_out[row] + j * out_step] = order[j];
        }
      }
    }
  });
  r.values = record(
      "TopkBackward0", r.values, {a},
      [a_shape = a.shape(), d, idx = r.indices.to_vector<int64_t>(), out_shape](const Tensor& dout,
                                                                                Grads& grads) {
        // in the forward pass values = a at the chosen indices along d, so each chosen element
        // gets its dout (the indices are distinct within a row)
        auto scatter = [=](const Tensor& g) { return scatter_to_zeros(g, a_shape, d, out_shape, idx); };
        auto gather = [=](const Tensor& g) { return gather_to_zeros(g, out_shape, d, out_shape, idx); };
        grads.add(0, linear_map("ScatterBackward0", "TopkBackward0", dout, scatter, gather));
      });
  return r;
}

// ---------------------------------------------------------------- index_put_
// reference: torch's Tensor.index_put_(indices, values, accumulate): indices (int64 tensors,
// broadcast together to B) index self's first k dims; the indexed region has shape
// B + self.shape[k:], and values broadcast to it. accumulate=False writes (a repeated index
// keeps one of its values; torch leaves which unspecified, here the last), True adds (repeats
// add up). Negative indices count from the end, as in Python.
namespace {

struct IndexPutPlan {
  Shape region;              // B + self.shape[k:]
  std::vector<int64_t> dst;  // per region element (row-major): element offset in `strides`
};

IndexPutPlan plan_index_put(const char* op, const Shape& self_shape, const Shape& self_strides,
                            const std::vector<Tensor>& indices) {
  const int64_t k = static_cast<int64_t>(indices.size());
  if (k == 0 || k > static_cast<int64_t>(self_shape.size()))
    fail(op, "got ", k, " index tensors for a tensor of shape ", self_shape, " (expected 1 to ",
         self_shape.size(), ")");
  Shape b;
  for (int64_t j = 0; j < k; ++j) {
    const Tensor& ix = indices[j];
    if (!ix.defined()) fail(op, "index ", j, " is undefined (None slices are not supported)");
    if (ix.dtype() != kInt64)
      fail(op, "index ", j, " must be an int64 tensor, got ", dtype_name(ix.dtype()), " of shape ",
           ix.shape(), ix.dtype() == kBool ? " (bool masks are not supported: use masked_fill_)" : "");
    b = j == 0 ? ix.shape() : kernels::broadcast_shapes(op, b, ix.shape());
  }
  const Shape rest(self_shape.begin() + k, self_shape.end());
  const Shape rest_strides(self_strides.begin() + k, self_strides.end());
  IndexPutPlan plan;
  plan.region = b;
  plan.region.insert(plan.region.end(), rest.begin(), rest.end());
  const int64_t nb = numel_of(b);
  std::vector<int64_t> base(static_cast<std::size_t>(nb), 0);
  for (int64_t j = 0; j < k; ++j) {
    const std::vector<int64_t> v = indices[j].expand(b).contiguous().to_vector<int64_t>();
    const int64_t n = self_shape[j];
    for (int64_t i = 0; i < nb; ++i) {
      if (v[i] < -n || v[i] >= n)
        fail(op, "index ", v[i], " is out of bounds for dim ", j, " with size ", n, " (tensor shape ",
             self_shape, ", index ", j, " of shape ", indices[j].shape(), ")");
      base[i] += (v[i] < 0 ? v[i] + n : v[i]) * self_strides[j];
    }
  }
  const std::vector<int64_t> rest_off = offsets_of(rest, rest_strides);
  plan.dst.reserve(static_cast<std::size_t>(nb) * rest_off.size());
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t r : rest_off) plan.dst.push_back(base[i] + r);
  return plan;
}

}  // namespace

namespace tensor_ops {

Tensor& index_put_(Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate) {
  const char* op = "index_put_";
  if (!values.defined()) fail(op, "values is undefined");
  if (values.dtype() != self.dtype())
    fail(op, "values (", dtype_name(values.dtype()), ", shape ", values.shape(),
         ") must have the dtype of self (", dtype_name(self.dtype()), ", shape ", self.shape(), ")");
  check_recorded_inplace(op, self, {values});
  check_no_internal_overlap(op, self);
  const IndexPutPlan plan = plan_index_put(op, self.shape(), self.strides(), indices);
  bool fits = values.dim() <= static_cast<int64_t>(plan.region.size());
  for (int64_t d = 1; fits && d <= values.dim(); ++d) {
    const int64_t vs = values.shape()[values.dim() - d], rs = plan.region[plan.region.size() - d];
    fits = vs == rs || vs == 1;
  }
  if (!fits)
    fail(op, "values of shape ", values.shape(), " cannot be broadcast to the indexed shape ", plan.region,
         " (tensor shape ", self.shape(), ")");
  const Tensor v = values.expand(plan.region).contiguous();
  const bool acc = accumulate;
  kernels::dispatch_all(self.dtype(), "index_put_", [&](auto tag) {
    using T = decltype(tag);
    T* ps = self.data_ptr<T>();
    const T* pv = v.data_ptr<T>();
    for (std::size_t i = 0; i < plan.dst.size(); ++i) {
      if (acc) ps[plan.dst[i]] += pv[i];
      else ps[plan.dst[i]] = pv[i];
    }
  });
  self.bump_version();
  // backward: dout's positions, in a contiguous dout of self's shape
  std::vector<int64_t> pos = plan_index_put(op, self.shape(), contiguous_strides(self.shape()), indices).dst;
  return record_inplace(
      "IndexPutBackward0", self, {values},
      [pos = std::move(pos), acc, region = plan.region, v_shape = values.shape()](const Tensor& dout,
                                                                                  Grads& grads) {
        // in the forward pass self[pos] = values (or += values with accumulate), so
        // dvalues = dout[pos] (summed over broadcast dims) and dself = dout, zeroed at pos
        // unless accumulating (the written elements no longer depend on the old self)
        const Shape self_shape = dout.shape();
        if (grads.wants(1)) {
          auto take = [=](const Tensor& dout) {  // dout[pos], shaped as the region
            const Tensor dy = dout.contiguous();
            Tensor dv = empty(region, dy.dtype());
            kernels::dispatch_float(dy.dtype(), "index_put_backward", [&](auto tag) {
              using T = decltype(tag);
              const T* pd = dy.data_ptr<T>();
              T* pv = dv.data_ptr<T>();
              for (std::size_t i = 0; i < pos.size(); ++i) pv[i] = pd[pos[i]];
            });
            return dv;
          };
          auto put = [=](const Tensor& g) {  // zeros with g added at pos: take's adjoint
            const Tensor gc = g.contiguous();
            Tensor out = zeros(self_shape, g.dtype());
            kernels::dispatch_float(g.dtype(), "index_put_backward", [&](auto tag) {
              using T = decltype(tag);
              const T* pg = gc.data_ptr<T>();
              T* po = out.data_ptr<T>();
              for (std::size_t i = 0; i < pos.size(); ++i) po[pos[i]] += pg[i];
            });
            return out;
          };
          Tensor dv = linear_map("IndexBackward0", "IndexPutBackward0", dout, take, put);
          grads.add(1, dv.shape() == v_shape ? dv : sum_to(dv, v_shape));
        }
        if (grads.wants(0)) {
          if (acc) return grads.add(0, dout);
          auto zero_at_pos = [=](const Tensor& g) {
            Tensor dx = g.contiguous().clone().detach();
            kernels::dispatch_float(dx.dtype(), "index_put_backward", [&](auto tag) {
              using T = decltype(tag);
              T* px = dx.data_ptr<T>();
              for (int64_t p : pos) px[p] = T(0);
            });
            return dx;
          };
          grads.add(0, linear_map("IndexPutBackward0", "IndexPutBackward0", dout, zero_at_pos, zero_at_pos));
        }
      });
}

}  // namespace tensor_ops

Tensor index_put(const Tensor& a, const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate) {
  profiler::RecordFunction rec("index_put");
  return a.index_put(indices, values, accumulate);
}

}  // namespace xgrad
