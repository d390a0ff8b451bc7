// core/src/inplace.cpp: in-place ops on tensors in the autograd graph, directly or through
// views (torch's CopySlices and view-grad_fn regeneration). The ops themselves (add_, mul_,
// copy_, fill_, zero_, clamp_, masked_fill_, the random fills) write, bump the version counter
// and call record_inplace(); this file decides what that records.
//
// Design.
// - A view knows its root base and the storage version its grad_fn was made at
//   (TensorImpl::view_base, view_version; views of views point at the root). make_view sets
//   them when grad mode is on, or under NoGradGuard when the base requires grad (then
//   view_made_without_grad). Views made inside backward closures carry nothing, and record()
//   drops them from an op's output laid over the op's own buffer (matmul of a 1-D operand).
// - In-place op F on a tensor that is not a view: F's node becomes its grad_fn, with input 0
//   its previous history.
// - In-place op F on a view v of base b rebases b's history: b's grad_fn becomes CopySlices,
//   whose inputs are b's previous history and F's other inputs. Its backward takes the gradient
//   of the whole base, runs F's backward on the region under v (found from b's and v's
//   shape/strides/offset in their shared storage), writes F's gradient for v's old values into
//   that region, and hands the result to b's previous history; F's gradients for its other
//   inputs go straight to them.
// - A view whose view_version is not its storage's version (the base or some view of it was
//   written since) regenerates its grad_fn on first use (grad_fn(), requires_grad(), being an
//   op's input): AsStridedBackward0, whose input is the base's current history and whose
//   backward scatters the view's gradient into a zero gradient of the base (summing over expanded
//   dims). So after a write through either, both the base and every view give right gradients.
//   v itself is regenerated at once after an in-place op on it.
// - The version counter guards what cannot be rebased: a tensor saved for backward remembers the
//   version it saw (SavedTensor) and backward throws if an in-place op moved it since.
// - Refused as in torch: with grad mode on, an in-place op on a leaf that requires grad or a view
//   of one, and on a view made under NoGradGuard of a base that requires grad; an in-place op on
//   an expanded view (one memory location would get several values: always for ops other than
//   fill_/zero_, and for those too when recorded, since torch's backward fails there).
// - Cost: an op input that is not a view pays one null test (refresh_grad_fn); none of this runs
//   unless an in-place op is recorded or a view is used after its storage was written.
#include <algorithm>

#include "kernels.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"

namespace xgrad {

namespace {

struct Geometry {
  Shape shape, strides;
  int64_t offset = 0;
};

Geometry geometry_of(const TensorImpl& t) { return {t.shape, t.strides, t.offset}; }

bool has_expanded_dim(const Shape& shape, const Shape& strides) {
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (strides[d] == 0 && shape[d] > 1) return true;
  return false;
}

// A fresh buffer laid out like the span of storage that `base` addresses, so that a gradient of
// the base and one of any view of it are read and written through their own strides. When the
// base is dense and row-major (the usual root: an op's output) the buffer is the base itself.
struct StorageLike {
  Tensor buffer;  // 1-D: storage elements [lo, lo + numel)
  int64_t lo = 0;
  Tensor as(const Geometry& g) const { return make_view(buffer, g.shape, g.strides, g.offset - lo); }
};

StorageLike storage_like(const Geometry& base, DType dtype, bool zero) {
  int64_t lo = base.offset, hi = base.offset;
  bool empty_base = false;
  for (std::size_t d = 0; d < base.shape.size(); ++d) {
    if (base.shape[d] == 0) empty_base = true;
    if (base.shape[d] <= 0) continue;
    const int64_t span = (base.shape[d] - 1) * base.strides[d];
    (span < 0 ? lo : hi) += span;
  }
  const int64_t n = empty_base ? 0 : hi - lo + 1;
  const bool dense = n == numel_of(base.shape);  // every element of the span is the base's
  return {zero || !dense ? zeros({n}, dtype) : empty({n}, dtype), lo};
}

// The base-shaped gradient held in s (a copy only when the base is not dense and row-major).
Tensor base_grad(const StorageLike& s, const Geometry& base) {
  Tensor g = s.as(base);
  return g.is_contiguous() && g.numel() == s.buffer.numel() ? g.view(base.shape) : g.contiguous();
}

// Writes grad into the zero region of a fresh buffer. An expanded view's grad is summed over its
// expanded dims into the one location they share; every other dim of a view made by the view ops
// addresses distinct elements, so nothing else overlaps.
void scatter_into(const Tensor& region, const Tensor& grad) {
  Tensor dst = region, src = grad;
  if (has_expanded_dim(region.shape(), region.strides())) {
    Shape dims;
    for (int64_t d = 0; d < region.dim(); ++d)
      if (region.strides()[d] == 0 && region.shape()[d] > 1) {
        dims.push_back(d);
        dst = dst.slice(d, 0, 1);
      }
    src = grad.sum(dims, /*keepdim=*/true);
  }
  kernels::copy_into(dst, src);
}

// The view's gradient as a gradient of its base: AsStridedBackward0's backward.
void as_strided_backward(const Geometry& base, const Geometry& view, const Tensor& dout, Grads& grads) {
  // in the forward pass the view read the base's elements at its strides, so the base gets
  // dout at those elements and 0 elsewhere (summed where an expanded view read one twice)
  StorageLike s = storage_like(base, dout.dtype(), /*zero=*/true);
  scatter_into(s.as(view), dout);
  grads.add(0, base_grad(s, base));
}

// t.retain_grad() keeps the gradient of t's current values: the node that now produces them
// (torch 2 does the same; 1.13 leaves it on the old node when a view was written).
void move_retained_grad(TensorImpl& t, const std::shared_ptr<TensorImpl>& handle,
                        const std::shared_ptr<Node>& new_fn) {
  if (!t.retains_grad) return;
  if (t.grad_fn && t.grad_fn->retained.lock() == handle) t.grad_fn->retained.reset();
  new_fn->retained = handle;
}

}  // namespace

// ---------------------------------------------------------------- views: grad_fn regeneration
namespace detail {
void regenerate_view_grad_fn(const std::shared_ptr<TensorImpl>& view) {
  TensorImpl& v = *view;
  v.view_version = v.storage->version;
  if (v.view_made_without_grad) return;  // a constant view: it never had a history
  const Tensor base(v.view_base);
  if (!base.requires_grad()) {
    v.grad_fn = nullptr;
    return;
  }
  Node::Edge edge = edge_to(base);
  std::shared_ptr<Node> node = new_node("AsStridedBackward0");
  node->next.push_back(std::move(edge));
  node->backward = [b = geometry_of(*v.view_base), g = geometry_of(v)](const Tensor& dout, Grads& grads) {
    as_strided_backward(b, g, dout, grads);
  };
  node->output = &v;
  v.grad_fn = std::move(node);
  if (v.retains_grad) v.grad_fn->retained = view;
}
}  // namespace detail

// ---------------------------------------------------------------- checks
void check_recorded_inplace(const char* op, const Tensor& self, std::initializer_list<Tensor> others) {
  if (!GradMode::is_enabled()) return;
  const TensorImpl& impl = *self.impl();
  if (impl.view_made_without_grad)
    fail(op, "a view (shape ", self.shape(),
         ") was made under NoGradGuard from a tensor that "
         "requires grad (shape ",
         impl.view_base->shape,
         ") and is being modified in place with "
         "grad mode on; that is ambiguous, so it is refused (as in torch). Make the view and the "
         "in-place op both inside the NoGradGuard, or both outside it");
  if (!self.requires_grad() && !any_requires_grad(others)) return;  // nothing will be recorded
  check_no_internal_overlap(op, self);  // even fill_: its backward would write one place twice
  const TensorImpl* base = impl.view_base.get();
  if (base && has_expanded_dim(base->shape, base->strides))
    fail(op, "in-place op on a view (shape ", self.shape(),
         ") of a tensor whose elements share "
         "memory (shape ",
         base->shape, ", strides ", base->strides,
         "): its gradient cannot be "
         "told apart. Call .clone() on that tensor first");
  if (self.is_leaf() && impl.requires_grad)
    fail(op, "a leaf tensor that requires grad (shape ", self.shape(),
         ") is being used in an in-place operation; wrap it in NoGradGuard, or use the "
         "out-of-place op");
  if (base && !base->grad_fn && base->requires_grad)
    fail(op, "a view (shape ", self.shape(), ") of a leaf tensor that requires grad (shape ", base->shape,
         ") is being used in an in-place operation; wrap it in NoGradGuard, or "
         "clone() the leaf first");
}

void check_inplace(const char* op, const Tensor& self) {
  check_recorded_inplace(op, self);
  if (GradMode::is_enabled() && self.requires_grad())
    fail(op, "in-place ", op, " on a tensor that is part of the autograd graph (shape ", self.shape(),
         ", produced by ", self.grad_fn_name(),
         ") is not recorded for backward; use the out-of-place op, or NoGradGuard if the "
         "gradient should not see it");
}

void check_no_internal_overlap(const char* op, const Tensor& self) {
  if (has_expanded_dim(self.shape(), self.strides()))
    fail(op, "more than one element of the written-to tensor (shape ", self.shape(), ", strides ",
         self.strides(),
         ") refers to a single memory location: it is an expanded view. Call "
         ".clone() before the in-place operation");
}

// ---------------------------------------------------------------- recording
namespace detail {
Tensor& attach_inplace(const char* name, Tensor& self, const std::vector<Tensor>& others, BackwardFn fn) {
  TensorImpl& impl = *self.impl();
  if ((impl.grad_fn == nullptr && impl.requires_grad) || impl.view_made_without_grad)
    check_recorded_inplace(name, self);  // throws; ops call it before writing
  // Edges first: reading them may regenerate a view's node, which must precede ours on the tape.
  std::vector<Node::Edge> other_edges;
  other_edges.reserve(others.size());
  for (const Tensor& t : others) other_edges.push_back(edge_to(t));

  if (!impl.view_base) {  // not a view: F's input 0 is self's previous history
    Node::Edge self_edge = edge_to(self);
    std::shared_ptr<Node> node = new_node(name);
    node->next.push_back(std::move(self_edge));
    for (Node::Edge& e : other_edges) node->next.push_back(std::move(e));
    node->backward = std::move(fn);
    move_retained_grad(impl, self.impl(), node);
    node->output = &impl;
    impl.grad_fn = std::move(node);
  } else {  // a view: the base's history is rebased (CopySlices)
    const std::shared_ptr<TensorImpl>& base_impl = impl.view_base;
    const Tensor base(base_impl);
    Node::Edge base_edge = edge_to(base);  // the base's history before the op
    // F's input 0 (the view's old values) is a region of that history: a private sink node
    // collects F's gradient for it, which CopySlices writes into the region
    auto sink = base_edge.wants() ? std::make_shared<Node>() : nullptr;
    Node::Edge sink_edge;
    sink_edge.fn = sink;
    sink_edge.shape = self.shape();
    sink_edge.dtype = self.dtype();
    std::shared_ptr<Node> f = new_node(name);
    f->next.push_back(std::move(sink_edge));
    for (const Node::Edge& e : other_edges) f->next.push_back(e);
    f->backward = std::move(fn);
    f->output = &impl;

    std::shared_ptr<Node> copy = new_node("CopySlices");
    copy->next.push_back(std::move(base_edge));
    for (Node::Edge& e : other_edges) copy->next.push_back(std::move(e));
    copy->backward = [f, sink, b = geometry_of(*base_impl), v = geometry_of(impl)](const Tensor& dout,
                                                                                   Grads& grads) {
      // in the forward pass the base's region under the view was replaced by F(view, others)
      // and the rest kept its old values: the old base gets dout outside the region and F's
      // gradient for the view's old values inside it; F's other inputs get F's gradients
      StorageLike s = storage_like(b, dout.dtype(), /*zero=*/false);
      Tensor whole = s.as(b);
      kernels::copy_into(whole, dout);
      Tensor region = s.as(v);
      Tensor dregion = empty(v.shape, dout.dtype());
      kernels::copy_into(dregion, region);
      if (sink) sink->pending = Tensor();  // nothing left by a pass that failed
      Grads to_f(*f);
      f->backward(dregion, to_f);  // F's inputs 1.. are CopySlices' inputs 1..: filled directly
      if (!sink) return;
      Tensor d_old = std::move(sink->pending);
      sink->pending = Tensor();
      sink->pending_owned = false;
      if (d_old.defined()) {
        kernels::copy_into(region, d_old);
      } else {
        kernels::copy_into(region, scalar_tensor(0.0, dout.dtype()));
      }
      grads.add(0, base_grad(s, b));
    };
    move_retained_grad(*base_impl, base_impl, copy);
    copy->output = base_impl.get();
    base_impl->grad_fn = std::move(copy);
    regenerate_view_grad_fn(self.impl());  // the view now reads the rebased history
  }
  // A view among `others` may have had its node regenerated above from the history this op
  // just replaced: make it regenerate again on its next use.
  for (const Tensor& t : others)
    if (t.defined() && t.impl()->view_base) t.impl()->view_version = ~uint64_t{0};
  return self;
}
}  // namespace detail

}  // namespace xgrad
