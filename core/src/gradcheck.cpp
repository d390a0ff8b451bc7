// core/src/gradcheck.cpp: compare analytic gradients (backward) with central differences.
//
// loss(inputs) = sum(fn(inputs) * w), w uniform in [-1, 1] from a private generator, so every
// output element gets a different weight. For each input that requires grad and each of its
// elements e: numeric = (loss(x_e + eps) - loss(x_e - eps)) / (2 eps), perturbing the element
// in storage (so non-contiguous views are checked through their strides).
#include <cmath>
#include <sstream>

#include "kernels.h"
#include "xgrad/autograd.h"
#include "xgrad/gradcheck.h"
#include "xgrad/ops.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {
std::string index_str(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return shape_str(idx);
}

int64_t storage_index(int64_t flat, const Tensor& t) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (flat % t.shape()[d]) * t.strides()[d];
    flat /= t.shape()[d];
  }
  return off;  // relative to the view's first element
}

bool overlaps(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.shape()[d] > 1 && t.strides()[d] == 0) return true;
  return false;
}

double weighted_loss(const GradcheckFn& fn, const std::vector<Tensor>& inputs, const Tensor& w) {
  NoGradGuard guard;
  Tensor out = fn(inputs);
  return sum(mul(out.to(w.dtype()), w)).item();
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult result;
  auto failed = [&](const std::string& msg) {
    result.ok = false;
    result.message = "gradcheck(" + opt.name + "): " + msg;
    return result;
  };

  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) return failed("input " + std::to_string(i) + " is undefined");
    if (inputs[i].requires_grad() && !inputs[i].is_leaf())
      return failed("input " + std::to_string(i) + " is not a leaf; pass leaves and build views inside fn");
    if (inputs[i].requires_grad() && overlaps(inputs[i]))
      return failed("input " + std::to_string(i) + " has overlapping memory (an expanded view of shape " +
                    shape_str(inputs[i].shape()) + "); pass the unexpanded tensor and expand inside fn");
  }

  // keep the callers' gradients; compute ours from none
  std::vector<Tensor> saved_grads;
  for (const Tensor& t : inputs) {
    saved_grads.push_back(t.grad());
    if (t.requires_grad()) const_cast<Tensor&>(t).set_grad(Tensor());
  }
  auto restore = [&] {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].requires_grad()) const_cast<Tensor&>(inputs[i]).set_grad(saved_grads[i]);
  };

  Tensor out = fn(inputs);
  if (!out.requires_grad()) {
    restore();
    return failed("the output does not require grad (no input requires grad, or fn detached it)");
  }
  Generator gen(opt.seed);
  Tensor w = rand(out.shape(), &gen, kFloat64) * 2.0 - 1.0;
  w = w.to(out.dtype());
  sum(mul(out, w)).backward();

  std::vector<std::vector<double>> analytic(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    Tensor g = inputs[i].grad();
    analytic[i] = g.defined() ? g.to_vector<double>() : std::vector<double>(inputs[i].numel(), 0.0);
  }
  restore();

  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    for (int64_t e = 0; e < x.numel(); ++e) {
      const int64_t off = storage_index(e, x);
      double numeric = 0.0;
      kernels::dispatch_float(x.dtype(), "gradcheck", [&](auto tag) {
        using T = decltype(tag);
        T* p = x.data_ptr<T>() + off;
        const T orig = *p;
        *p = static_cast<T>(orig + opt.eps);
        const double plus = weighted_loss(fn, inputs, w);
        *p = static_cast<T>(orig - opt.eps);
        const double minus = weighted_loss(fn, inputs, w);
        *p = orig;
        numeric = (plus - minus) / (2.0 * opt.eps);
      });
      const double a = analytic[i][e];
      const double err = std::abs(a - numeric);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (!(err <= opt.atol + opt.rtol * std::abs(numeric))) {
        std::ostringstream os;
        os.precision(10);
        os << "input " << i << " (shape " << shape_str(x.shape()) << ", element "
           << index_str(e, x.shape()) << "): analytic " << a << " vs numeric " << numeric
           << " (|diff| " << err << " > atol " << opt.atol << " + rtol " << opt.rtol
           << " * |numeric|); the output came from " << out.grad_fn_name();
        return failed(os.str());
      }
    }
  }
  return result;
}

}  // namespace xgrad
