// optim/src/sgd.cpp: SGD with momentum, dampening, Nesterov and L2 weight decay.
//
// reference: torch/optim/sgd.py (torch 1.13), _single_tensor_sgd:
//   d_p = grad + weight_decay * param
//   buf = d_p (first step)  |  buf = momentum * buf + (1 - dampening) * d_p
//   d_p = d_p + momentum * buf (nesterov)  |  d_p = buf
//   param = param - lr * d_p
// done here in one pass over param, grad and buf, with the scalars rounded to the
// parameter's dtype and the operations fused exactly as torch's CPU kernels fuse them.
#include <cmath>

#include "xgrad/autograd.h"
#include "xgrad/optim/sgd.h"
#include "xgrad/profiler.h"

namespace xgrad::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : OptimizerBase({ParamGroup{std::move(params)}}, options) {
  init_groups();
}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults) : OptimizerBase(std::move(groups), defaults) {
  init_groups();
}

void SGD::validate(const SGDOptions& o) const {
  if (!(o.lr >= 0)) fail("SGD", "invalid learning rate: ", o.lr, " (must be >= 0)");
  if (!(o.momentum >= 0)) fail("SGD", "invalid momentum value: ", o.momentum, " (must be >= 0)");
  if (!std::isfinite(o.dampening)) fail("SGD", "invalid dampening value: ", o.dampening);
  if (!(o.weight_decay >= 0)) fail("SGD", "invalid weight_decay value: ", o.weight_decay, " (must be >= 0)");
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    fail("SGD", "Nesterov momentum requires a momentum and zero dampening (got momentum ", o.momentum,
         ", dampening ", o.dampening, ")");
}

namespace {

// One fused pass. kFirst: the momentum buffer is created from this step's d_p. torch's
// add(other, alpha) computes fma(alpha, other, self); std::fma does the same here, so the
// results agree to the bit.
template <class T, bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n, const SGDOptions& o) {
  const T neg_lr = static_cast<T>(-o.lr);
  const T wd = static_cast<T>(o.weight_decay);
  const T momentum = static_cast<T>(o.momentum);
  const T keep = static_cast<T>(1.0 - o.dampening);
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i];
    if constexpr (kDecay) d = std::fma(wd, p[i], d);  // grad.add(p, alpha=wd)
    if constexpr (kMomentum) {
      T b;
      if constexpr (kFirst) b = d;                    // clone(d_p)
      else b = std::fma(keep, d, buf[i] * momentum);  // buf.mul_(m).add_(d_p, alpha=1-damp)
      buf[i] = b;
      if constexpr (kNesterov) d = std::fma(momentum, b, d);  // d_p.add(buf, alpha=m)
      else d = b;
    }
    p[i] = std::fma(neg_lr, d, p[i]);  // p.add_(d_p, alpha=-lr)
  }
}

template <class T, bool kDecay>
void sgd_dispatch(T* p, const T* g, T* buf, int64_t n, bool first, const SGDOptions& o) {
  if (o.momentum == 0) sgd_kernel<T, kDecay, false, false, false>(p, g, buf, n, o);
  else if (first && o.nesterov) sgd_kernel<T, kDecay, true, true, true>(p, g, buf, n, o);
  else if (first) sgd_kernel<T, kDecay, true, true, false>(p, g, buf, n, o);
  else if (o.nesterov) sgd_kernel<T, kDecay, true, false, true>(p, g, buf, n, o);
  else sgd_kernel<T, kDecay, true, false, false>(p, g, buf, n, o);
}

}  // namespace

void SGD::step() {
  profiler::RecordFunction rec("Optimizer.step");
  check_step();  // options, contiguity, gradient shapes: throws before anything is written
  NoGradGuard no_grad;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const SGDOptions& o = groups_[gi].options;
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Tensor& p = groups_[gi].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad = grad.contiguous();
      SGDParamState& st = state_[gi][i];
      const bool first = o.momentum != 0 && !st.momentum_buffer.defined();
      if (first) st.momentum_buffer = empty(p.shape(), p.dtype());
      dispatch_float(p.dtype(), "SGD", [&](auto tag) {
        using T = decltype(tag);
        T* buf = o.momentum != 0 ? st.momentum_buffer.data_ptr<T>() : nullptr;
        if (o.weight_decay != 0)
          sgd_dispatch<T, true>(p.data_ptr<T>(), grad.data_ptr<T>(), buf, p.numel(), first, o);
        else sgd_dispatch<T, false>(p.data_ptr<T>(), grad.data_ptr<T>(), buf, p.numel(), first, o);
      });
      p.bump_version();  // written through data_ptr above, like an in-place op
      if (o.momentum != 0) st.momentum_buffer.bump_version();
    }
  }
}

std::map<std::string, double> SGD::options_to_map(const SGDOptions& o) const {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0}};
}

SGDOptions SGD::options_from_map(const std::map<std::string, double>& m, const char* op) const {
  detail::check_known_options(op, m, {"lr", "momentum", "dampening", "weight_decay", "nesterov"});
  return {.lr = detail::option(op, m, "lr"),
          .momentum = detail::option(op, m, "momentum"),
          .dampening = detail::option(op, m, "dampening"),
          .weight_decay = detail::option(op, m, "weight_decay"),
          .nesterov = detail::bool_option(op, m, "nesterov")};
}

std::map<std::string, Tensor> SGD::state_to_map(const SGDParamState& s) const {
  if (!s.momentum_buffer.defined()) return {};
  return {{"momentum_buffer", detail::copy_as(s.momentum_buffer, s.momentum_buffer.dtype())}};
}

SGDParamState SGD::state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                  const SGDOptions&, int64_t index, const char* op) const {
  detail::check_known_state(op, m, {"momentum_buffer"}, index);
  SGDParamState s;
  if (m.count("momentum_buffer"))
    s.momentum_buffer = detail::state_tensor(op, m, "momentum_buffer", param, index);
  return s;
}

}  // namespace xgrad::optim
