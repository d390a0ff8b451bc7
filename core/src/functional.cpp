// core/src/functional.cpp: torch.autograd.functional (vjp, jvp, vhp, hvp, jacobian, hessian)
// on autograd::grad, following torch/autograd/functional.py step by step:
// - the function sees its own copies of the inputs, leaves that require grad (with
//   create_graph, an input that requires grad is seen through a recorded alias instead, so
//   the results stay differentiable with respect to it);
// - vjp is one autograd::grad; jvp is the double-vjp trick: g(u) = J^T u is linear in u, so
//   d<g(u), v>/du = J v, taken at u = 0; vhp differentiates the gradient once more, and hvp
//   applies the double-vjp trick to it; jacobian takes one vjp per output element (reverse
//   mode), and hessian is the jacobian of the jacobian;
// - a gradient that autograd::grad leaves undefined (an output independent of an input) is
//   zeros, or an error with strict; without create_graph every result is detached.
#include "xgrad/functional.h"

#include <string>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"

namespace xgrad::autograd::functional {

namespace {
using Tensors = std::vector<Tensor>;

// The inputs the function sees (torch's _grad_preprocess with need_graph).
Tensors prepare(const char* op, const Tensors& inputs, bool create_graph) {
  if (inputs.empty()) fail(op, "expected at least one input");
  Tensors out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined()) fail(op, "input ", i, " is an undefined tensor");
    if (!x.is_floating_point())
      fail(op, "input ", i, " (shape ", x.shape(), ") is ", dtype_name(x.dtype()),
           ": only floating-point inputs can be differentiated");
    out.push_back(create_graph && x.requires_grad() ? x.view(x.shape()) : x.detach().requires_grad_());
  }
  return out;
}

// v checked against the tensors it pairs with (outputs for vjp, inputs otherwise); omitted, it
// is 1 where every such tensor has a single element.
Tensors check_v(const char* op, const Tensors& v, const Tensors& like, const char* what) {
  if (v.empty()) {
    for (const Tensor& t : like)
      if (t.numel() != 1)
        fail(op, "v can only be omitted when every ", what, " has a single element; ", what, " of shape ",
             t.shape(), " needs one");
    Tensors ones_v;
    for (const Tensor& t : like) ones_v.push_back(ones(t.shape(), t.dtype()));
    return ones_v;
  }
  if (v.size() != like.size()) fail(op, "got ", v.size(), " tensors in v for ", like.size(), " ", what, "s");
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!v[i].defined() || v[i].shape() != like[i].shape() || v[i].dtype() != like[i].dtype())
      fail(op, "v[", i, "] ",
           v[i].defined() ? "of shape " + shape_str(v[i].shape()) : std::string("(undefined)"),
           " does not match ", what, " ", i, " of shape ", like[i].shape(), " (", dtype_name(like[i].dtype()),
           ")");
  return v;
}

void check_outputs(const char* op, const Tensors& outputs, bool strict) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) fail(op, "output ", i, " of the function is an undefined tensor");
    if (strict && !outputs[i].requires_grad())
      fail(op, "output ", i, " (shape ", outputs[i].shape(),
           ") does not require grad: with strict, every output must be computed differentiably from the "
           "inputs");
  }
}

// torch's _autograd_grad: the gradients of the outputs that are defined and require grad
// (with their grad_outputs) with respect to inputs; undefined for an input none reaches.
Tensors grads_of(const Tensors& outputs, const Tensors& inputs, const Tensors& grad_outputs,
                 bool create_graph, bool retain_graph) {
  Tensors outs, gos;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].defined() && outputs[i].requires_grad()) {
      outs.push_back(outputs[i]);
      gos.push_back(grad_outputs.empty() ? Tensor() : grad_outputs[i]);
    }
  if (outs.empty()) return Tensors(inputs.size());
  return grad(outs, inputs, gos,
              {.retain_graph = retain_graph, .create_graph = create_graph, .allow_unused = true});
}

// torch's _fill_in_zeros: an undefined gradient is zeros like its reference, or an error
// with strict saying which independence `stage` found.
Tensors fill_in_zeros(const char* op, Tensors grads, const Tensors& refs, bool strict, const char* stage) {
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    if (strict) fail(op, stage, " ", i, ": this is not allowed with strict");
    grads[i] = zeros(refs[i].shape(), refs[i].dtype());
  }
  return grads;
}

// torch's _grad_postprocess: without create_graph the results carry no history.
Tensors finish(Tensors ts, bool create_graph) {
  if (!create_graph)
    for (Tensor& t : ts)
      if (t.defined()) t = t.detach();
  return ts;
}

Tensor single_output(const char* op, const Tensor& out) {
  if (!out.defined() || out.numel() != 1)
    fail(op, "the function must return a tensor with a single element, got ",
         out.defined() ? "shape " + shape_str(out.shape()) : std::string("an undefined tensor"));
  return out;
}

MultiFunction as_multi(const Function& f) {
  return [f](const Tensors& in) { return Tensors{f(in[0])}; };
}
ScalarFunction as_scalar(const Function& f) {
  return [f](const Tensors& in) { return f(in[0]); };
}
Tensors maybe(const Tensor& v) { return v.defined() ? Tensors{v} : Tensors{}; }
}  // namespace

// ---------------------------------------------------------------- vjp / jvp
std::pair<Tensors, Tensors> vjp(const MultiFunction& func, const Tensors& inputs, const Tensors& v,
                                Options opt) {
  AutoGradMode grad_on(true);
  const Tensors x = prepare("vjp", inputs, opt.create_graph);
  const Tensors out = func(x);
  check_outputs("vjp", out, opt.strict);
  const Tensors w = check_v("vjp", v, out, "output");
  // v^T J = the gradient of sum_i <out_i, v_i>
  Tensors g = grads_of(out, x, w, opt.create_graph, opt.create_graph);
  g = fill_in_zeros("vjp", std::move(g), inputs, opt.strict, "the output is independent of input");
  return {finish(out, opt.create_graph), finish(std::move(g), opt.create_graph)};
}

std::pair<Tensors, Tensors> jvp(const MultiFunction& func, const Tensors& inputs, const Tensors& v,
                                Options opt) {
  AutoGradMode grad_on(true);
  const Tensors x = prepare("jvp", inputs, opt.create_graph);
  const Tensors w = check_v("jvp", v, inputs, "input");
  const Tensors out = func(x);
  check_outputs("jvp", out, opt.strict);
  // g(u) = J^T u at u = 0 keeps u in its graph; its vjp with v is J v
  Tensors u;
  for (const Tensor& o : out) u.push_back(zeros(o.shape(), o.dtype()).requires_grad_());
  const Tensors g = grads_of(out, x, u, /*create_graph=*/true, /*retain_graph=*/true);
  if (opt.strict)
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!g[i].defined() || !g[i].requires_grad())
        fail("jvp", "the gradient with respect to input ", i,
             " is independent of the grad_outputs of the double-vjp trick: this is not allowed with strict");
  Tensors jv = grads_of(g, u, w, opt.create_graph, opt.create_graph);
  jv = fill_in_zeros("jvp", std::move(jv), out, opt.strict, "the inputs do not reach output");
  return {finish(out, opt.create_graph), finish(std::move(jv), opt.create_graph)};
}

std::pair<Tensor, Tensor> vjp(const Function& func, const Tensor& inputs, const Tensor& v, Options opt) {
  auto [out, g] = vjp(as_multi(func), Tensors{inputs}, maybe(v), opt);
  return {out[0], g[0]};
}
std::pair<Tensor, Tensor> jvp(const Function& func, const Tensor& inputs, const Tensor& v, Options opt) {
  auto [out, g] = jvp(as_multi(func), Tensors{inputs}, maybe(v), opt);
  return {out[0], g[0]};
}

// ---------------------------------------------------------------- vhp / hvp
std::pair<Tensor, Tensors> vhp(const ScalarFunction& func, const Tensors& inputs, const Tensors& v,
                               Options opt) {
  AutoGradMode grad_on(true);
  const Tensors x = prepare("vhp", inputs, opt.create_graph);
  const Tensors w = check_v("vhp", v, inputs, "input");
  const Tensor out = single_output("vhp", func(x));
  check_outputs("vhp", {out}, opt.strict);
  // the gradient, kept differentiable; then its vjp with v: v^T H
  const Tensors jac = grads_of({out}, x, {}, /*create_graph=*/true, /*retain_graph=*/true);
  if (opt.strict)
    for (std::size_t i = 0; i < jac.size(); ++i)
      if (!jac[i].defined() || !jac[i].requires_grad())
        fail("vhp", "the jacobian is independent of input ", i, ": this is not allowed with strict");
  Tensors h = grads_of(jac, x, w, opt.create_graph, opt.create_graph);
  h = fill_in_zeros("vhp", std::move(h), inputs, opt.strict, "the jacobian is independent of input");
  return {finish({out}, opt.create_graph)[0], finish(std::move(h), opt.create_graph)};
}

std::pair<Tensor, Tensors> hvp(const ScalarFunction& func, const Tensors& inputs, const Tensors& v,
                               Options opt) {
  AutoGradMode grad_on(true);
  const Tensors x = prepare("hvp", inputs, opt.create_graph);
  const Tensors w = check_v("hvp", v, inputs, "input");
  const Tensor out = single_output("hvp", func(x));
  check_outputs("hvp", {out}, opt.strict);
  // the gradient, then the double-vjp trick on it: u^T H at u = 0, and its vjp with v: H v
  const Tensors jac = grads_of({out}, x, {}, /*create_graph=*/true, /*retain_graph=*/true);
  if (opt.strict)
    for (std::size_t i = 0; i < jac.size(); ++i)
      if (!jac[i].defined() || !jac[i].requires_grad())
        fail("hvp", "the jacobian is independent of input ", i, ": this is not allowed with strict");
  Tensors u;
  for (const Tensor& t : x) u.push_back(zeros(t.shape(), t.dtype()).requires_grad_());
  const Tensors uh = grads_of(jac, x, u, /*create_graph=*/true, /*retain_graph=*/true);
  Tensors h = grads_of(uh, u, w, opt.create_graph, opt.create_graph);
  h = fill_in_zeros("hvp", std::move(h), inputs, opt.strict, "the hessian is independent of input");
  return {finish({out}, opt.create_graph)[0], finish(std::move(h), opt.create_graph)};
}

std::pair<Tensor, Tensor> vhp(const Function& func, const Tensor& inputs, const Tensor& v, Options opt) {
  auto [out, h] = vhp(as_scalar(func), Tensors{inputs}, maybe(v), opt);
  return {out, h[0]};
}
std::pair<Tensor, Tensor> hvp(const Function& func, const Tensor& inputs, const Tensor& v, Options opt) {
  auto [out, h] = hvp(as_scalar(func), Tensors{inputs}, maybe(v), opt);
  return {out, h[0]};
}

// ---------------------------------------------------------------- jacobian / hessian
std::vector<Tensors> jacobian(const MultiFunction& func, const Tensors& inputs, Options opt) {
  AutoGradMode grad_on(true);
  const Tensors x = prepare("jacobian", inputs, opt.create_graph);
  const Tensors out = func(x);
  check_outputs("jacobian", out, opt.strict);
  std::vector<Tensors> J(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    // row k of d out_i / d x_j: the vjp with the k-th one-hot vector
    std::vector<Tensors> rows(x.size());
    for (int64_t k = 0; k < out[i].numel(); ++k) {
      Tensor e = zeros({out[i].numel()}, out[i].dtype());
      {
        NoGradGuard no_grad;
        e.select(0, k).fill_(1.0);
      }
      const Tensors g =
          grads_of({out[i]}, x, {e.view(out[i].shape())}, opt.create_graph, /*retain_graph=*/true);
      for (std::size_t j = 0; j < x.size(); ++j) {
        if (!g[j].defined() && opt.strict)
          fail("jacobian", "output ", i, " is independent of input ", j, ": this is not allowed with strict");
        rows[j].push_back(g[j].defined() ? g[j].reshape({-1}) : zeros({x[j].numel()}, x[j].dtype()));
      }
    }
    for (std::size_t j = 0; j < x.size(); ++j) {
      Shape shape = out[i].shape();
      shape.insert(shape.end(), x[j].shape().begin(), x[j].shape().end());
      J[i].push_back(rows[j].empty() ? zeros(shape, x[j].dtype()) : stack(rows[j], 0).reshape(shape));
    }
    J[i] = finish(std::move(J[i]), opt.create_graph);
  }
  return J;
}

Tensor jacobian(const Function& func, const Tensor& inputs, Options opt) {
  return jacobian(as_multi(func), Tensors{inputs}, opt)[0][0];
}

std::vector<Tensors> hessian(const ScalarFunction& func, const Tensors& inputs, Options opt) {
  const bool strict = opt.strict;
  // the jacobian of the (single-element, as 0-d) output, recorded: one tensor per input
  const MultiFunction jac = [func, strict](const Tensors& x) {
    const ScalarFunction f = func;
    const MultiFunction scalar = [f](const Tensors& in) {
      return Tensors{single_output("hessian", f(in)).reshape({})};
    };
    return jacobian(scalar, x, {.create_graph = true, .strict = strict})[0];
  };
  return jacobian(jac, inputs, opt);
}

Tensor hessian(const Function& func, const Tensor& inputs, Options opt) {
  return hessian(as_scalar(func), Tensors{inputs}, opt)[0][0];
}

}  // namespace xgrad::autograd::functional
