// xgrad/tensor.h: the Tensor handle.
//
// A Tensor is a cheap handle (a shared_ptr) to a TensorImpl: shape, strides and offset into a
// shared Storage. Views (view, transpose, permute, slice, narrow, select, unsqueeze, squeeze,
// expand, detach) share the Storage and copy nothing; contiguous() copies only when needed.
// Every differentiable op records a node on the autograd tape (see autograd.h). The method
// forms here (x.sum(), x.softmax(-1), ...) call the free functions declared in ops.h.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "xgrad/arg_types.h"
#include "xgrad/dtype.h"
#include "xgrad/error.h"

namespace xgrad {

struct Node;
class Generator;
struct ValuesIndices;  // (values, indices) of max/min along a dim and topk; below Tensor
namespace detail {
struct TensorHooks;  // a tensor's gradient hooks (autograd.h)
}

// What Tensor::register_hook and the nn::Module hook registrations return (torch's
// RemovableHandle): remove() unregisters the hook. Removing twice, from a copy of the handle,
// or after the tensor or module is gone does nothing.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remove) : remove_(std::move(remove)) {}
  void remove() {
    std::function<void()> f = std::move(remove_);
    remove_ = nullptr;
    if (f) f();
  }

 private:
  std::function<void()> remove_;
};

// A reference-counted buffer that views alias. Its version counter is bumped by every
// in-place op on any view of it; tensors saved for backward remember the version they saw.
struct Storage {
  explicit Storage(std::size_t nbytes);
  // Memory xgrad did not allocate (from_blob): never freed or cached here; `owner` (may be
  // null: borrowed memory) is released when the storage is.
  Storage(void* data, std::size_t nbytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  std::size_t nbytes = 0;
  uint64_t version = 0;
  bool external = false;        // from_blob's memory
  std::shared_ptr<void> owner;  // what keeps external memory alive, if anything
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  bool requires_grad = false;                  // for leaves; a tensor with grad_fn always requires grad
  bool retains_grad = false;                   // non-leaf asked to keep its .grad (retain_grad())
  std::shared_ptr<TensorImpl> grad;            // accumulated gradient (leaves, retained non-leaves)
  std::shared_ptr<Node> grad_fn;               // the op that produced this tensor, if recorded
  std::shared_ptr<detail::TensorHooks> hooks;  // a leaf's register_hook()s (a non-leaf's are on grad_fn)
  // A view's root base, and the storage version its grad_fn was made at: once the storage is
  // written, grad_fn is regenerated from the base's (core/src/inplace.cpp explains).
  std::shared_ptr<TensorImpl> view_base;
  uint64_t view_version = 0;
  bool view_made_without_grad = false;  // made under NoGradGuard from a base requiring grad
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t dim() const;
  int64_t numel() const;
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t storage_offset() const;
  DType dtype() const;
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  // Structured-binding helpers that check the rank: auto [b, T, C] = x.shape3();
  std::array<int64_t, 2> shape2() const;
  std::array<int64_t, 3> shape3() const;
  std::array<int64_t, 4> shape4() const;

  // ---- data
  // Pointer to the first element of this view (storage + offset); checks T against dtype().
  template <class T>
  T* data_ptr() const;
  void* raw_data_ptr() const;
  double item() const;  // one-element tensor, any dtype
  template <class T>
  T item() const {
    return static_cast<T>(item());
  }
  // All elements in row-major order, converted to T (any layout, any dtype).
  template <class T = float>
  std::vector<T> to_vector() const;

  // ---- autograd
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves only
  bool is_leaf() const;
  Tensor grad() const;             // undefined Tensor when no gradient yet
  void set_grad(const Tensor& g);  // g undefined = set to none
  void retain_grad();              // keep .grad() of a non-leaf after backward
  const std::shared_ptr<Node>& grad_fn() const;
  std::string grad_fn_name() const;  // "SoftmaxBackward0", or "" for none
  // loss.backward() for a one-element tensor; t.backward(grad) otherwise. torch's arguments:
  // retain_graph keeps the graph for another pass (unset: as create_graph); create_graph
  // records the backward itself, so the gradients it accumulates into .grad() carry grad_fns
  // and can be differentiated again (x.grad() of a leaf: CopyBackwards, then AddBackward0).
  // As in torch, such a .grad() refers back to its leaf: set_grad(Tensor()) when done.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const;  // same storage, no history
  // torch's t.register_hook(fn): during backward (and autograd::grad) fn(grad) sees the gradient
  // flowing into this tensor and may return a replacement of the same shape and dtype; an
  // undefined Tensor, or a fn returning void, keeps it. Several hooks run in registration order.
  // On a leaf the hooks see the gradient summed over the pass, before it is accumulated into
  // .grad(); on a non-leaf they see it before it reaches the op that produced the tensor, and
  // retain_grad() keeps it at torch 1.13's place: after the hooks if one was registered before
  // retain_grad(), else before them. Throws for a tensor that does not require grad.
  template <class F>
  RemovableHandle register_hook(F&& fn) const;
  RemovableHandle register_hook_fn(std::function<Tensor(const Tensor&)> fn) const;
  // torch's `x.data = new_data`: this tensor (every handle to it) now sees new_data's storage,
  // shape, strides, offset and dtype; its autograd identity stays (requires_grad, grad_fn,
  // .grad, retains_grad), no history is recorded, and it is no longer a view of its old base.
  // A tensor that requires grad needs floating-point data. (Module::to converts parameters
  // with it.)
  void set_data(const Tensor& new_data);
  Tensor clone() const;      // contiguous copy, differentiable
  uint64_t version() const;  // the storage's in-place version counter
  // Counts a write made through data_ptr() outside the ops (an optimizer's fused update, a
  // kernel of your own) as an in-place modification, as every in-place op does: a tensor
  // saved for backward from this storage then fails loudly instead of giving a wrong
  // gradient (torch.autograd.graph.increment_version).
  void bump_version() const;

  // ---- storage identity
  // True when both tensors view the same storage (torch's Tensor::is_alias_of), whatever their
  // shapes and offsets: a view, its base and a detach() of either all alias one another.
  bool is_alias_of(const Tensor& other) const;
  // A key for the storage, equal exactly for tensors that alias each other (for hashing, e.g.
  // an optimizer refusing a parameter listed twice); valid while a tensor holds the storage.
  const void* storage_id() const;

  // ---- views (zero-copy, differentiable)
  Tensor view(Shape shape) const;     // one -1 allowed; throws on incompatible strides
  Tensor reshape(Shape shape) const;  // view when possible, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor permute(Shape dims) const;
  // Python's t[:, start:end:step] on one dim; start/end clamp like Python slicing.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes dim
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(Shape shape) const;  // -1 keeps a size; new leading dims allowed
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor contiguous() const;  // *this when already contiguous

  // ---- conversion
  Tensor to(DType dtype) const;  // differentiable between float types

  // ---- method forms of ops.h
  // (Flag binds to bool only, Int to integers only, Dims to one dim or a list: arg_types.h)
  Tensor sum() const;
  Tensor sum(Dims dims, Flag keepdim = false) const;
  Tensor mean() const;
  Tensor mean(Dims dims, Flag keepdim = false) const;
  Tensor var(Flag unbiased = true) const;  // x.var(-1) is var over dim -1, as in torch
  Tensor var(Dims dims, Flag unbiased = true, Flag keepdim = false) const;
  Tensor max() const;
  Tensor argmax(Int dim, Flag keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor pow(double exponent) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  Tensor softmax(Int dim) const;
  Tensor log_softmax(Int dim) const;
  Tensor matmul(const Tensor& other) const;
  Tensor masked_fill(const Tensor& mask, double value) const;

  // (torch's spellings: a dim is an Int, a list of dims a Dims, a bool flag a Flag)
  Tensor std(Flag unbiased = true) const;
  Tensor std(Dims dims, Flag unbiased = true, Flag keepdim = false) const;
  Tensor min() const;
  ValuesIndices max(Int dim, Flag keepdim = false) const;  // auto [values, indices] = x.max(-1);
  ValuesIndices min(Int dim, Flag keepdim = false) const;
  Tensor max(const Tensor& other) const;  // torch.max(x, y) = maximum(x, y)
  Tensor min(const Tensor& other) const;
  Tensor amax(Dims dims = {}, Flag keepdim = false) const;
  Tensor amin(Dims dims = {}, Flag keepdim = false) const;
  Tensor argmax() const;
  Tensor argmin() const;
  Tensor argmin(Int dim, Flag keepdim = false) const;
  ValuesIndices topk(Int k, Int dim = -1, Flag largest = true, Flag sorted = true) const;
  Tensor relu() const;
  Tensor where(const Tensor& condition, const Tensor& other) const;  // where(cond, *this, other)
  std::vector<Tensor> split(Int split_size, Int dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, Int dim = 0) const;
  std::vector<Tensor> split(std::initializer_list<int64_t> sizes, Int dim = 0) const;  // {2}: sizes
  std::vector<Tensor> chunk(Int chunks, Int dim = 0) const;
  Tensor index_select(Int dim, const Tensor& index) const;
  Tensor gather(Int dim, const Tensor& index) const;
  Tensor scatter_add(Int dim, const Tensor& index, const Tensor& src) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor roll(Dims shifts, Dims dims = {}) const;  // shifts: one int or a list, like dims
  Tensor tril(Int diagonal = 0) const;
  Tensor triu(Int diagonal = 0) const;
  Tensor& tril_(Int diagonal = 0);  // in place, differentiable
  Tensor& triu_(Int diagonal = 0);
  Tensor outer(const Tensor& other) const;
  Tensor norm(double p = 2.0, Dims dims = {}, Flag keepdim = false) const;  // x.norm(2, -1)
  Tensor sin() const;
  Tensor cos() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor erf() const;
  Tensor atan2(const Tensor& other) const;  // atan2(*this, other)
  Tensor cumsum(Int dim) const;
  Tensor logsumexp(Dims dims, Flag keepdim = false) const;
  Tensor repeat_interleave(Int repeats) const;
  Tensor repeat_interleave(Int repeats, Int dim) const;
  // Plain-int shapes, as in torch: x.view(b, t, h, d), x.view(-1), x.permute(2, 0, 1).
  template <Integer... I>
  requires(sizeof...(I) > 0) Tensor view(I... sizes)
  const { return view(Shape{static_cast<int64_t>(sizes)...}); }
  template <Integer... I>
  requires(sizeof...(I) > 0) Tensor reshape(I... sizes)
  const { return reshape(Shape{static_cast<int64_t>(sizes)...}); }
  template <Integer... I>
  requires(sizeof...(I) > 0) Tensor permute(I... dims)
  const { return permute(Shape{static_cast<int64_t>(dims)...}); }
  template <Integer... I>
  requires(sizeof...(I) > 0) Tensor expand(I... sizes)
  const { return expand(Shape{static_cast<int64_t>(sizes)...}); }
  // A bool or a float where torch wants an int does not compile (C++ would convert it: x[true]
  // would be x[1], where torch's x[True] adds a dim).
  template <class I>
  requires NotAnInt<I> Tensor operator[](I) const = delete;
  template <class... A>
  requires(NotAnInt<A> || ...) Tensor transpose(A...)
  const = delete;
  template <class... A>
  requires(NotAnInt<A> || ...) Tensor select(A...)
  const = delete;
  template <class... A>
  requires(NotAnInt<A> || ...) Tensor narrow(A...)
  const = delete;
  template <class... A>
  requires(NotAnInt<A> || ...) Tensor slice(A...)
  const = delete;
  template <class... A>
  requires(NotAnInt<A> || ...) Tensor flatten(A...)
  const = delete;
  template <class A>
  requires NotAnInt<A> Tensor unsqueeze(A)
  const = delete;
  template <class A>
  requires NotAnInt<A> Tensor squeeze(A)
  const = delete;
  template <class A>
  requires NotAnInt<A> int64_t size(A)
  const = delete;

  // ---- in-place (bump the version counter)
  Tensor& masked_fill_(const Tensor& mask, double value);  // differentiable
  // torch's x.index_put_((i, j), v, accumulate): x[i, j] = v (or += v), differentiable in
  // self and values; int64 indices into the first dims, broadcast together (ops.h).
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate = false);
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate = false) const;
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // broadcasts src to this shape
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(double value);
  Tensor& clamp_(std::optional<double> min, std::optional<double> max = std::nullopt);
  Tensor& uniform_(double from = 0.0, double to = 1.0, Generator* gen = nullptr);
  Tensor& normal_(double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
  Tensor& bernoulli_(double p, Generator* gen = nullptr);

  // ---- internals (for op implementations and extensions)
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  TensorImpl* unsafe_impl() const { return impl_.get(); }

 private:
  const TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

// What max/min along a dim and topk return: auto [values, indices] = x.max(-1);
struct ValuesIndices {
  Tensor values;
  Tensor indices;  // int64
};

template <class F>
RemovableHandle Tensor::register_hook(F&& fn) const {
  if constexpr (std::is_void_v<std::invoke_result_t<F&, const Tensor&>>) {
    return register_hook_fn([f = std::forward<F>(fn)](const Tensor& grad) mutable {
      f(grad);
      return Tensor();
    });
  } else {
    return register_hook_fn(std::forward<F>(fn));
  }
}

// Prints like PyTorch: tensor([[ 0.3374, -0.1778], ...], grad_fn=<SoftmaxBackward0>)
std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::string to_string(const Tensor& t);

// Bytes held by live tensor storages (all threads), and the peak since the last reset.
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};
MemoryStats memory_stats();
void reset_peak_memory_stats();
// Freed storage blocks are kept (up to 2 GiB, by size class) and reused by later tensors of a
// similar size, so a training step allocates almost nothing from the system. This returns the
// cached blocks to the system (like torch.cuda.empty_cache()); the bytes cached right now:
void empty_cache();
int64_t cached_bytes();

// ---- low-level construction (ops and extensions)
// A new contiguous tensor with uninitialised data.
Tensor empty(const Shape& shape, DType dtype = kFloat32);
// Memory xgrad did not allocate, seen as a tensor without a copy (torch::from_blob): `data`
// points at element [0, ..., 0]; strides are in elements and must not be negative. `owner` is
// kept alive as long as any tensor uses the memory (pass what owns it, e.g. a shared_ptr to
// the container); with no owner the memory is borrowed and must outlive every tensor made
// from it. The result is a leaf that does not require grad. <xgrad/xtensor.h> builds on it.
Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype,
                 std::shared_ptr<void> owner = nullptr);
// A view of `base`'s storage with the given geometry (no autograd record; checks bounds).
Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset);
// Row-major strides for a shape.
Shape contiguous_strides(const Shape& shape);
int64_t numel_of(const Shape& shape);

}  // namespace xgrad
