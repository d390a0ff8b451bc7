// core/src/tensor.cpp: the Tensor handle: construction (empty, from_blob, make_view), metadata
// and data accessors, autograd accessors, copies (contiguous, clone, to) and the basic in-place
// ops. Storage and its allocator are in storage.cpp; the method forms of the ops, views
// included, forward to ops/*.cpp from tensor_methods.cpp.
#include <cstring>
#include <limits>

#include "bf16_kernel.h"
#include "elementwise_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

// ---------------------------------------------------------------- construction
Tensor empty(const Shape& shape, DType dtype) {
  for (int64_t s : shape)
    if (s < 0) fail("empty", "negative size in shape ", shape);
  const int64_t n = numel_of(shape);
  if (n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(itemsize(dtype)))
    fail("empty", "a ", dtype_name(dtype), " tensor of shape ", shape, " needs more than 2^63 bytes");
  const auto nbytes = static_cast<std::size_t>(n) * itemsize(dtype);
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = std::make_shared<Storage>(nbytes);
  } catch (const std::exception&) {  // Storage's OutOfMemory or std::bad_alloc: say who asked for what
    throw OutOfMemory(detail::message("empty", "out of memory: cannot allocate ", nbytes, " bytes for a ",
                                      dtype_name(dtype), " tensor of shape ", shape, " (",
                                      memory_stats().current_bytes, " bytes already in use)"));
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor from_blob(void* data, const Shape& shape, const Shape& strides, DType dtype,
                 std::shared_ptr<void> owner) {
  if (shape.size() != strides.size())
    fail("from_blob", "shape ", shape, " and strides ", strides, " differ in rank");
  for (int64_t s : shape)
    if (s < 0) fail("from_blob", "negative size in shape ", shape);
  for (int64_t s : strides)
    if (s < 0)
      fail("from_blob", "negative stride in strides ", strides, " (shape ", shape,
           "): xgrad tensors, like torch's, have non-negative strides; copy the data instead");
  // the elements addressed are [0, span): the storage is exactly that span
  int64_t span = numel_of(shape) == 0 ? 0 : 1;  // numel_of throws when the count overflows
  for (std::size_t d = 0; d < shape.size() && span > 0; ++d) {
    const int64_t reach = checked_mul(shape[d] - 1, strides[d], shape);
    if (__builtin_add_overflow(span, reach, &span))
      fail("from_blob", "shape ", shape, " with strides ", strides, " overflows int64");
  }
  const int64_t size = static_cast<int64_t>(itemsize(dtype));
  if (span > std::numeric_limits<int64_t>::max() / size)
    fail("from_blob", "shape ", shape, " with strides ", strides, " spans more than 2^63 bytes");
  if (data == nullptr && span > 0) fail("from_blob", "null data for a tensor of shape ", shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, static_cast<std::size_t>(span * size), std::move(owner));
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  const TensorImpl& b = *base.impl();
  if (shape.size() != strides.size())
    fail("make_view", "shape ", shape, " and strides ", strides, " differ in rank");
  // bounds: the lowest and highest element addressed must lie inside the storage
  int64_t lo = offset, hi = offset;
  for (int64_t s : shape)
    if (s < 0) fail("make_view", "negative size in shape ", shape);
  const bool empty_view = numel_of(shape) == 0;                    // throws when the element count overflows
  for (std::size_t d = 0; d < shape.size() && !empty_view; ++d) {  // no element: no bounds
    const int64_t span = checked_mul(shape[d] - 1, strides[d], shape);
    if (__builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      fail("make_view", "view with shape ", shape, " and strides ", strides, " overflows int64");
  }
  const int64_t capacity = static_cast<int64_t>(b.storage->nbytes / itemsize(b.dtype));
  if (!empty_view && (lo < 0 || hi >= capacity))
    fail("make_view", "view with shape ", shape, ", strides ", strides, " and offset ", offset,
         " reaches outside a storage of ", capacity, " elements");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = b.storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = b.dtype;
  // remember the root base for in-place ops (core/src/inplace.cpp); views made in backward
  // closures (grad mode off, nothing requires grad) skip it
  const std::shared_ptr<TensorImpl>& root = b.view_base ? b.view_base : base.impl();
  const bool grad_mode = GradMode::is_enabled();
  if (grad_mode || root->requires_grad || root->grad_fn) {
    impl->view_base = root;
    impl->view_version = b.storage->version;
    impl->view_made_without_grad = !grad_mode;
  }
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- metadata
static const char* const kUndefinedTensor =
    "Tensor: use of an undefined tensor (default-constructed, or a grad() that was never set)";

const TensorImpl& Tensor::checked() const {
  if (!impl_) throw Error(kUndefinedTensor);
  return *impl_;
}
const Shape& Tensor::shape() const { return checked().shape; }
int64_t Tensor::dim() const { return static_cast<int64_t>(checked().shape.size()); }
int64_t Tensor::numel() const { return numel_of(checked().shape); }
const Shape& Tensor::strides() const { return checked().strides; }
int64_t Tensor::storage_offset() const { return checked().offset; }
DType Tensor::dtype() const { return checked().dtype; }

int64_t Tensor::size(int64_t d) const {
  d = wrap_dim("size", d, dim(), shape());
  return shape()[d];
}
int64_t Tensor::stride(int64_t d) const {
  d = wrap_dim("stride", d, dim(), shape());
  return strides()[d];
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = checked();
  if (numel_of(t.shape) == 0) return true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(t.shape.size()) - 1; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

template <std::size_t N>
static std::array<int64_t, N> shape_n(const Tensor& t) {
  if (t.dim() != static_cast<int64_t>(N)) fail("shape", "expected a ", N, "-D tensor, got shape ", t.shape());
  std::array<int64_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = t.shape()[i];
  return out;
}
std::array<int64_t, 2> Tensor::shape2() const { return shape_n<2>(*this); }
std::array<int64_t, 3> Tensor::shape3() const { return shape_n<3>(*this); }
std::array<int64_t, 4> Tensor::shape4() const { return shape_n<4>(*this); }

// ---------------------------------------------------------------- data
void* Tensor::raw_data_ptr() const {
  const TensorImpl& t = checked();
  char* data = static_cast<char*>(t.storage->data);
  // Only an empty view can hold an offset past its storage's end (slicing an empty dim keeps
  // any offset: nothing is read through it); its pointer is the end, never offset * itemsize,
  // which may overflow.
  if (static_cast<uint64_t>(t.offset) > t.storage->nbytes) return data + t.storage->nbytes;
  return data + t.offset * static_cast<int64_t>(itemsize(t.dtype));
}

template <class T>
T* Tensor::data_ptr() const {
  if (dtype() != dtype_of<T>::value)
    fail("data_ptr", "requested ", dtype_name(dtype_of<T>::value), " data from a ", dtype_name(dtype()),
         " tensor of shape ", shape());
  return static_cast<T*>(raw_data_ptr());
}
template float* Tensor::data_ptr<float>() const;
template double* Tensor::data_ptr<double>() const;
template int64_t* Tensor::data_ptr<int64_t>() const;
template bool* Tensor::data_ptr<bool>() const;
template bf16* Tensor::data_ptr<bf16>() const;

double Tensor::item() const {
  if (numel() != 1)
    fail("item", "a tensor with ", numel(), " elements (shape ", shape(),
         ") cannot be converted to a scalar");
  if (dtype() == kBFloat16)  // widening is exact
    return static_cast<double>(kernels::bf16_to_float(*static_cast<const uint16_t*>(raw_data_ptr())));
  return kernels::dispatch_all(dtype(), "item", [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(*data_ptr<T>());
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = empty(shape(), dtype_of<T>::value);
  kernels::copy_into(c, *this);
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

// ---------------------------------------------------------------- autograd accessors
// A view's grad_fn is regenerated when its storage was written since (core/src/inplace.cpp).
static TensorImpl& fresh(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw Error(kUndefinedTensor);
  detail::refresh_grad_fn(impl);
  return *impl;
}

bool Tensor::requires_grad() const {
  const TensorImpl& t = fresh(impl_);
  return t.requires_grad || t.grad_fn != nullptr;
}
Tensor& Tensor::requires_grad_(bool on) {
  TensorImpl& t = fresh(impl_);
  if (t.grad_fn)
    fail("requires_grad_", "only leaf tensors can change requires_grad; this one (shape ", t.shape,
         ") was produced by ", t.grad_fn->name, ". Use .detach().requires_grad_() for a new leaf");
  if (on && !is_floating(t.dtype))
    fail("requires_grad_", "only floating-point tensors can require gradients, got ", dtype_name(t.dtype));
  t.requires_grad = on;
  return *this;
}
bool Tensor::is_leaf() const { return fresh(impl_).grad_fn == nullptr; }
Tensor Tensor::grad() const { return Tensor(checked().grad); }
void Tensor::set_grad(const Tensor& g) {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (g.defined() && (g.shape() != t.shape || g.dtype() != t.dtype))
    fail("set_grad", "gradient of shape ", g.shape(), " (", dtype_name(g.dtype()),
         ") does not match tensor of shape ", t.shape, " (", dtype_name(t.dtype), ")");
  t.grad = g.impl();
}
void Tensor::retain_grad() {
  TensorImpl& t = fresh(impl_);
  if (!requires_grad()) fail("retain_grad", "called on a tensor that does not require grad");
  if (t.grad_fn) {
    // torch 1.13's order of retain_grad and hooks (core/src/hooks.cpp)
    if (t.grad_fn->retained.lock() != impl_) t.grad_fn->retain_first = t.grad_fn->hooks == nullptr;
    t.retains_grad = true;
    t.grad_fn->retained = impl_;
  }
}
const std::shared_ptr<Node>& Tensor::grad_fn() const { return fresh(impl_).grad_fn; }
std::string Tensor::grad_fn_name() const {
  const auto& fn = fresh(impl_).grad_fn;
  return fn ? fn->name : std::string();
}
void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  run_backward(*this, gradient, retain_graph.value_or(create_graph), create_graph);
}
uint64_t Tensor::version() const { return checked().storage->version; }
void Tensor::bump_version() const { ++checked().storage->version; }

void Tensor::set_data(const Tensor& new_data) {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (!new_data.defined())
    fail("set_data", "new data is an undefined tensor (tensor of shape ", t.shape, ")");
  const TensorImpl& n = new_data.checked();
  if ((t.requires_grad || t.grad_fn) && !is_floating(n.dtype))
    fail("set_data", "a tensor that requires grad (shape ", t.shape, ", ", dtype_name(t.dtype),
         ") cannot take ", dtype_name(n.dtype), " data of shape ", n.shape,
         "; only floating-point tensors can require gradients");
  t.storage = n.storage;
  t.shape = n.shape;
  t.strides = n.strides;
  t.offset = n.offset;
  t.dtype = n.dtype;
  t.view_base = nullptr;  // its old base's storage is no longer this tensor's
  t.view_version = 0;
  t.view_made_without_grad = false;
}

bool Tensor::is_alias_of(const Tensor& other) const { return checked().storage == other.checked().storage; }
const void* Tensor::storage_id() const { return checked().storage.get(); }

Tensor Tensor::detach() const {
  const TensorImpl& t = checked();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage;
  impl->shape = t.shape;
  impl->strides = t.strides;
  impl->offset = t.offset;
  impl->dtype = t.dtype;
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- copies
Tensor Tensor::clone() const {
  profiler::RecordFunction rec("clone");
  Tensor out = empty(shape(), dtype());
  kernels::copy_into(out, *this);
  return record("CloneBackward0", out, {*this}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass out = self, so dself = dout
    grads.add(0, dout);
  });
}

Tensor Tensor::contiguous() const {
  profiler::RecordFunction rec("contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType target) const {
  profiler::RecordFunction rec("to");
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target);
  kernels::copy_into(out, *this);
  if (!is_floating(target) || !is_floating(dtype())) return out;  // no gradient across kinds
  const DType source = dtype();
  return record("ToCopyBackward0", out, {*this}, [source](const Tensor& dout, Grads& grads) {
    // in the forward pass out = self converted, so dself = dout converted back
    grads.add(0, dout.to(source));
  });
}

// ---------------------------------------------------------------- in-place basics
// Each checks before writing, writes, bumps the version counter, then records its backward
// with record_inplace (which rebases a view's base: core/src/inplace.cpp).

// fill_ and zero_: the old values' gradient is 0. An expanded view is fine (one value).
static Tensor& fill_with(Tensor& self, const char* op, const char* node, double value) {
  check_recorded_inplace(op, self);
  kernels::copy_into(self, scalar_tensor(value, self.dtype()));
  self.bump_version();
  return record_inplace(node, self, {}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass self was overwritten with a constant, so the old self gets 0
    grads.add(0, zeros(dout.shape(), dout.dtype()));
  });
}

Tensor& Tensor::zero_() { return fill_with(*this, "zero_", "ZeroBackward0", 0.0); }
Tensor& Tensor::fill_(double value) { return fill_with(*this, "fill_", "FillBackward2", value); }

Tensor& Tensor::copy_(const Tensor& src) {
  profiler::RecordFunction rec("copy_");
  check_recorded_inplace("copy_", *this, {src});
  check_no_internal_overlap("copy_", *this);
  kernels::broadcast_strides(src, shape());  // throws naming both shapes when src cannot broadcast
  kernels::copy_into(*this, src);
  bump_version();
  if (!GradMode::is_enabled()) return *this;
  const Shape src_shape = src.shape();
  const DType src_dtype = src.dtype();
  return record_inplace("CopyBackwards", *this, {src},
                        [src_shape, src_dtype](const Tensor& dout, Grads& grads) {
                          // in the forward pass self = src broadcast and converted, so the old self gets 0
                          // and src gets dout summed over the broadcast dims, converted back
                          if (grads.wants(0)) grads.add(0, zeros(dout.shape(), dout.dtype()));
                          if (grads.wants(1)) grads.add(1, sum_to(dout, src_shape).to(src_dtype));
                        });
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_recorded_inplace("add_", *this, {other});
  check_no_internal_overlap("add_", *this);
  if (other.dtype() != dtype())
    fail("add_", "dtype mismatch: ", dtype_name(dtype()), " tensor of shape ", shape(), " and ",
         dtype_name(other.dtype()), " tensor of shape ", other.shape());
  // throws naming both shapes when other cannot broadcast to this one
  const std::array<Shape, 2> st{strides(), kernels::broadcast_strides(other, shape())};
  if (dtype() == kBFloat16) {  // self + alpha * other in float32, rounded once (alpha rounded first)
    const float a = static_cast<float>(scalar_as(*this, alpha));
    kernels::copy_into(*this, kernels::map_same<2>("add_", shape(), {detach(), other},
                                                   [a](auto x, auto y) { return x + a * y; }));
  } else
    kernels::dispatch_float(dtype(), "add_", [&](auto tag) {
      using T = decltype(tag);
      const T a = static_cast<T>(alpha);
      T* po = data_ptr<T>();
      const T* pb = other.data_ptr<T>();
      kernels::parallel_for_each_row<2>(
          shape(), st, kernels::kGrain,
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
            T* o = po + off[0];
            const T* x = pb + off[1];
            const T alpha_t = a;  // a local copy: the stores to o cannot alias it
            if (in[0] == 1 && in[1] == 1) {
              for (int64_t i = 0; i < n; ++i) o[i] += alpha_t * x[i];
            } else {
              for (int64_t i = 0; i < n; ++i) o[i * in[0]] += alpha_t * x[i * in[1]];
            }
          });
    });
  bump_version();
  if (!GradMode::is_enabled()) return *this;  // gradient accumulation's path: no closure to build
  return record_inplace("AddBackward0", *this, {other},
                        [alpha, other_shape = other.shape()](const Tensor& dout, Grads& grads) {
                          // in the forward pass self = self + alpha * other, so dself = dout, dother = alpha
                          // * dout
                          if (grads.wants(0)) grads.add(0, dout);
                          if (grads.wants(1))
                            grads.add(1, sum_to(alpha == 1.0 ? dout : dout * alpha, other_shape));
                        });
}

Tensor& Tensor::mul_(double value) {
  check_recorded_inplace("mul_", *this);
  check_no_internal_overlap("mul_", *this);
  if (dtype() == kBFloat16) {  // in float32 by a bfloat16-rounded value, rounded once
    const float v = static_cast<float>(scalar_as(*this, value));
    kernels::map_unary<bf16, bf16>(*this, *this,
                                   [v](bf16 x) { return kernels::to_bf16(kernels::widen(x) * v); });
  } else
    kernels::dispatch_float(dtype(), "mul_", [&](auto tag) {
      using T = decltype(tag);
      kernels::map_unary<T, T>(*this, *this, [v = static_cast<T>(value)](T x) { return x * v; });
    });
  bump_version();
  return record_inplace("MulBackward0", *this, {}, [value](const Tensor& dout, Grads& grads) {
    // in the forward pass self = self * value, so dself = dout * value
    grads.add(0, dout * value);
  });
}

Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) {
  check_recorded_inplace("clamp_", *this);
  check_no_internal_overlap("clamp_", *this);
  const Tensor old = detach();
  Tensor out = xgrad::clamp(old, min, max);  // checks min/max; records nothing (detached)
  // where the value was kept (NaN is not: like torch's min <= x <= max on the old values)
  const Tensor kept = GradMode::is_enabled() && requires_grad() ? eq(out, old) : Tensor();
  kernels::copy_into(*this, out);
  bump_version();
  return record_inplace("ClampBackward1", *this, {}, [k = save(kept)](const Tensor& dout, Grads& grads) {
    // in the forward pass self kept its values inside [min, max], so dself = dout there, 0 outside
    grads.add(0, xgrad::masked_fill(dout, logical_not(k.get()), 0.0));
  });
}

// Random fills draw a contiguous block exactly as torch does, then scatter into this view.
template <class Fill>
static Tensor& random_fill(Tensor& self, const char* op, const char* node, Fill&& fill) {
  check_recorded_inplace(op, self);
  check_no_internal_overlap(op, self);
  kernels::dispatch_float(self.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (self.is_contiguous()) {
      fill(self.data_ptr<T>(), self.numel());
    } else {
      Tensor tmp = empty(self.shape(), self.dtype());
      fill(tmp.data_ptr<T>(), tmp.numel());
      kernels::copy_into(self, tmp);
    }
  });
  self.bump_version();
  return record_inplace(node, self, {}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass self was overwritten with random draws, so the old self gets 0
    grads.add(0, zeros(dout.shape(), dout.dtype()));
  });
}

Tensor& Tensor::uniform_(double from, double to, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return random_fill(*this, "uniform_", "UniformBackward0",
                     [&](auto* p, int64_t n) { g.uniform(p, n, from, to); });
}
Tensor& Tensor::normal_(double mean, double std, Generator* gen) {
  if (std < 0) fail("normal_", "std must be >= 0, got ", std);
  Generator& g = gen ? *gen : default_generator();
  return random_fill(*this, "normal_", "NormalBackward0",
                     [&](auto* p, int64_t n) { g.normal(p, n, mean, std); });
}
Tensor& Tensor::bernoulli_(double p, Generator* gen) {
  if (!(p >= 0.0 && p <= 1.0)) fail("bernoulli_", "p must be in [0, 1], got ", p);
  Generator& g = gen ? *gen : default_generator();
  return random_fill(*this, "bernoulli_", "BernoulliBackward2",
                     [&](auto* ptr, int64_t n) { g.bernoulli(ptr, n, p); });
}

}  // namespace xgrad
