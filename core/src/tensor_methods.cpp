// core/src/tensor_methods.cpp: the method forms of the ops (x.view(b, t, c), x.sum(-1),
// x.softmax(-1), x.max(-1), x.topk(k), x.split({2, 1}, -1), x.masked_fill_(m, v), ...). Each
// forwards to its function, where the op, its backward and its checks live: the free
// functions of ops.h, or for the views, masked_fill_ and index_put_ those of tensor_ops.h.
// The Tensor handle's own methods (metadata, data, autograd, copies, the basic in-place ops)
// are in tensor.cpp.
#include "tensor_ops.h"
#include "xgrad/ops.h"

namespace xgrad {

// ---------------------------------------------------------------- views (ops/views.cpp)
Tensor Tensor::view(Shape shape) const { return tensor_ops::view(*this, std::move(shape)); }
Tensor Tensor::reshape(Shape shape) const { return tensor_ops::reshape(*this, std::move(shape)); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  return tensor_ops::flatten(*this, start_dim, end_dim);
}
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  return tensor_ops::transpose(*this, dim0, dim1);
}
Tensor Tensor::t() const { return tensor_ops::t(*this); }
Tensor Tensor::permute(Shape dims) const { return tensor_ops::permute(*this, std::move(dims)); }
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  return tensor_ops::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return tensor_ops::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return tensor_ops::select(*this, dim, index); }
Tensor Tensor::unsqueeze(int64_t dim) const { return tensor_ops::unsqueeze(*this, dim); }
Tensor Tensor::squeeze() const { return tensor_ops::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return tensor_ops::squeeze(*this, dim); }
Tensor Tensor::expand(Shape shape) const { return tensor_ops::expand(*this, std::move(shape)); }

// ---------------------------------------------------------------- in place, with their own op
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return tensor_ops::masked_fill_(*this, mask, value);
}
Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate) {
  return tensor_ops::index_put_(*this, indices, values, accumulate);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate) const {
  Tensor out = clone();
  out.index_put_(indices, values, accumulate);
  return out;
}

// ---------------------------------------------------------------- the ops of ops.h
Tensor Tensor::sum() const { return xgrad::sum(*this); }
Tensor Tensor::sum(Dims dims, Flag keepdim) const { return xgrad::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return xgrad::mean(*this); }
Tensor Tensor::mean(Dims dims, Flag keepdim) const { return xgrad::mean(*this, dims, keepdim); }
Tensor Tensor::var(Flag unbiased) const { return xgrad::var(*this, unbiased); }
Tensor Tensor::var(Dims dims, Flag unbiased, Flag keepdim) const {
  return xgrad::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::max() const { return xgrad::max(*this); }
Tensor Tensor::argmax(Int d, Flag keepdim) const { return xgrad::argmax(*this, d, keepdim); }
Tensor Tensor::exp() const { return xgrad::exp(*this); }
Tensor Tensor::log() const { return xgrad::log(*this); }
Tensor Tensor::sqrt() const { return xgrad::sqrt(*this); }
Tensor Tensor::rsqrt() const { return xgrad::rsqrt(*this); }
Tensor Tensor::tanh() const { return xgrad::tanh(*this); }
Tensor Tensor::abs() const { return xgrad::abs(*this); }
Tensor Tensor::pow(double e) const { return xgrad::pow(*this, e); }
Tensor Tensor::clamp(std::optional<double> lo, std::optional<double> hi) const {
  return xgrad::clamp(*this, lo, hi);
}
Tensor Tensor::softmax(Int d) const { return xgrad::softmax(*this, d); }
Tensor Tensor::log_softmax(Int d) const { return xgrad::log_softmax(*this, d); }
Tensor Tensor::matmul(const Tensor& other) const { return xgrad::matmul(*this, other); }
Tensor Tensor::masked_fill(const Tensor& mask, double value) const {
  return xgrad::masked_fill(*this, mask, value);
}
Tensor Tensor::std(Flag unbiased) const { return xgrad::std(*this, unbiased); }
Tensor Tensor::std(Dims dims, Flag unbiased, Flag keepdim) const {
  return xgrad::std(*this, std::move(dims), unbiased, keepdim);
}
Tensor Tensor::min() const { return xgrad::min(*this); }
ValuesIndices Tensor::max(Int dim, Flag keepdim) const { return xgrad::max(*this, dim, keepdim); }
ValuesIndices Tensor::min(Int dim, Flag keepdim) const { return xgrad::min(*this, dim, keepdim); }
Tensor Tensor::max(const Tensor& other) const { return xgrad::max(*this, other); }
Tensor Tensor::min(const Tensor& other) const { return xgrad::min(*this, other); }
Tensor Tensor::amax(Dims dims, Flag keepdim) const { return xgrad::amax(*this, std::move(dims), keepdim); }
Tensor Tensor::amin(Dims dims, Flag keepdim) const { return xgrad::amin(*this, std::move(dims), keepdim); }
Tensor Tensor::argmax() const { return xgrad::argmax(*this); }
Tensor Tensor::argmin() const { return xgrad::argmin(*this); }
Tensor Tensor::argmin(Int dim, Flag keepdim) const { return xgrad::argmin(*this, dim, keepdim); }
ValuesIndices Tensor::topk(Int k, Int dim, Flag largest, Flag sorted) const {
  return xgrad::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::relu() const { return xgrad::relu(*this); }
Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return xgrad::where(condition, *this, other);
}
std::vector<Tensor> Tensor::split(Int split_size, Int dim) const {
  return xgrad::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, Int dim) const {
  return xgrad::split(*this, sizes, dim);
}
std::vector<Tensor> Tensor::split(std::initializer_list<int64_t> sizes, Int dim) const {
  return xgrad::split(*this, std::vector<int64_t>(sizes), dim);
}
std::vector<Tensor> Tensor::chunk(Int chunks, Int dim) const { return xgrad::chunk(*this, chunks, dim); }
Tensor Tensor::index_select(Int dim, const Tensor& index) const {
  return xgrad::index_select(*this, dim, index);
}
Tensor Tensor::gather(Int dim, const Tensor& index) const { return xgrad::gather(*this, dim, index); }
Tensor Tensor::scatter_add(Int dim, const Tensor& index, const Tensor& src) const {
  return xgrad::scatter_add(*this, dim, index, src);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return xgrad::masked_select(*this, mask); }
Tensor Tensor::roll(Dims shifts, Dims dims) const {
  return xgrad::roll(*this, std::move(shifts), std::move(dims));
}
Tensor Tensor::tril(Int diagonal) const { return xgrad::tril(*this, diagonal); }
Tensor Tensor::triu(Int diagonal) const { return xgrad::triu(*this, diagonal); }
Tensor& Tensor::tril_(Int diagonal) { return xgrad::tril_(*this, diagonal); }
Tensor& Tensor::triu_(Int diagonal) { return xgrad::triu_(*this, diagonal); }
Tensor Tensor::outer(const Tensor& other) const { return xgrad::outer(*this, other); }
Tensor Tensor::norm(double p, Dims dims, Flag keepdim) const {
  return xgrad::norm(*this, p, std::move(dims), keepdim);
}
Tensor Tensor::sin() const { return xgrad::sin(*this); }
Tensor Tensor::cos() const { return xgrad::cos(*this); }
Tensor Tensor::log1p() const { return xgrad::log1p(*this); }
Tensor Tensor::expm1() const { return xgrad::expm1(*this); }
Tensor Tensor::erf() const { return xgrad::erf(*this); }
Tensor Tensor::atan2(const Tensor& other) const { return xgrad::atan2(*this, other); }
Tensor Tensor::cumsum(Int dim) const { return xgrad::cumsum(*this, dim); }
Tensor Tensor::logsumexp(Dims dims, Flag keepdim) const {
  return xgrad::logsumexp(*this, std::move(dims), keepdim);
}
Tensor Tensor::repeat_interleave(Int repeats) const { return xgrad::repeat_interleave(*this, repeats); }
Tensor Tensor::repeat_interleave(Int repeats, Int dim) const {
  return xgrad::repeat_interleave(*this, repeats, dim);
}

}  // namespace xgrad
