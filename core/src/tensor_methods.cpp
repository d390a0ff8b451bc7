// core/src/tensor_methods.cpp: the method forms added with issue #12 (x.std(-1), x.max(-1),
// x.topk(k), x.split({2, 1}, -1), x.gather(d, i), ...). Each forwards to its free function in
// ops.h, where the op, its backward and its checks live. (The older method forms are at the
// end of tensor.cpp.)
#include "xgrad/ops.h"

namespace xgrad {

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

}  // namespace xgrad
