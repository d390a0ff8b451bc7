// core/src/tensor_ops.h (private): the ops behind the Tensor methods that are ops of their own,
// with a backward: the views (ops/views.cpp), masked_fill_ (ops/shape.cpp) and index_put_
// (ops/indexing.cpp). Tensor's methods (tensor_methods.cpp) call them; they read like the
// free-function ops of ops.h, with the tensor as `self`.
#pragma once
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad::tensor_ops {

// ops/views.cpp
Tensor view(const Tensor& self, Shape shape);
Tensor reshape(const Tensor& self, Shape shape);
Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim);
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& self);
Tensor permute(const Tensor& self, Shape dims);
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor squeeze(const Tensor& self);
Tensor squeeze(const Tensor& self, int64_t dim);
Tensor expand(const Tensor& self, Shape shape);

// ops/shape.cpp
Tensor& masked_fill_(Tensor& self, const Tensor& mask, double value);

// ops/indexing.cpp
Tensor& index_put_(Tensor& self, const std::vector<Tensor>& indices, const Tensor& values, Flag accumulate);

}  // namespace xgrad::tensor_ops
