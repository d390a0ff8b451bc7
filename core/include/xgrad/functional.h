// xgrad/functional.h: torch.autograd.functional: derivatives of a whole function at a point.
//
//   vjp(f, x, v)     (f(x), v^T J)          v has f(x)'s shape, J = df/dx
//   jvp(f, x, v)     (f(x), J v)            v has x's shape (by the double-vjp trick)
//   vhp(f, x, v)     (f(x), v^T H)          f returns one element, H = d2f/dx2
//   hvp(f, x, v)     (f(x), H v)
//   jacobian(f, x)   J, shaped f(x).shape + x.shape
//   hessian(f, x)    H, shaped x.shape + x.shape
//
// Each comes in two forms, as torch's take a Tensor or a tuple:
// - one input:   f is Tensor(const Tensor&); results are Tensors;
// - several:     f is std::vector<Tensor>(const std::vector<Tensor>&) (vjp, jvp, jacobian;
//                several outputs too) or Tensor(const std::vector<Tensor>&) (vhp, hvp,
//                hessian); results are one Tensor per input, jacobian J[i][j] = d out_i / d in_j
//                and hessian H[i][j] = d2 f / d in_i d in_j.
// The inputs are evaluated as given; they need not require grad (f sees copies of them that
// do). Options as torch's: create_graph records the computation, so the results can be
// differentiated again (with respect to the inputs, when those require grad); without it the
// results carry no history. strict throws xgrad::Error when an output does not depend on an
// input (or, for jvp, an input-output pair is independent) instead of returning zeros there.
// v may be omitted (an undefined Tensor, an empty list) where f's output (vjp) or the input
// (jvp, vhp, hvp) has a single element; it is then 1.
//
//   auto [y, g] = autograd::functional::vjp([](const Tensor& x) { return x.pow(3.0).sum(); }, x);
//   Tensor H = autograd::functional::hessian([](const Tensor& x) { return x.pow(3.0).sum(); }, x);
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad::autograd::functional {

struct Options {
  bool create_graph = false;  // record the computation of the results (differentiable again)
  bool strict = false;        // an output independent of an input throws instead of giving zeros
};

using Function = std::function<Tensor(const Tensor&)>;
using MultiFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using ScalarFunction = std::function<Tensor(const std::vector<Tensor>&)>;

// (f(x), v^T J)
std::pair<Tensor, Tensor> vjp(const Function& func, const Tensor& inputs, const Tensor& v = Tensor(),
                              Options options = {});
std::pair<std::vector<Tensor>, std::vector<Tensor>> vjp(const MultiFunction& func,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& v = {},
                                                        Options options = {});

// (f(x), J v)
std::pair<Tensor, Tensor> jvp(const Function& func, const Tensor& inputs, const Tensor& v = Tensor(),
                              Options options = {});
std::pair<std::vector<Tensor>, std::vector<Tensor>> jvp(const MultiFunction& func,
                                                        const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& v = {},
                                                        Options options = {});

// (f(x), v^T H) for f returning a single element
std::pair<Tensor, Tensor> vhp(const Function& func, const Tensor& inputs, const Tensor& v = Tensor(),
                              Options options = {});
std::pair<Tensor, std::vector<Tensor>> vhp(const ScalarFunction& func, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v = {}, Options options = {});

// (f(x), H v) for f returning a single element
std::pair<Tensor, Tensor> hvp(const Function& func, const Tensor& inputs, const Tensor& v = Tensor(),
                              Options options = {});
std::pair<Tensor, std::vector<Tensor>> hvp(const ScalarFunction& func, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& v = {}, Options options = {});

// J, shaped f(x).shape + x.shape; several: J[i][j] shaped out_i.shape + in_j.shape
Tensor jacobian(const Function& func, const Tensor& inputs, Options options = {});
std::vector<std::vector<Tensor>> jacobian(const MultiFunction& func, const std::vector<Tensor>& inputs,
                                          Options options = {});

// H, shaped x.shape + x.shape, for f returning a single element; several: H[i][j] shaped
// in_i.shape + in_j.shape
Tensor hessian(const Function& func, const Tensor& inputs, Options options = {});
std::vector<std::vector<Tensor>> hessian(const ScalarFunction& func, const std::vector<Tensor>& inputs,
                                         Options options = {});

}  // namespace xgrad::autograd::functional
