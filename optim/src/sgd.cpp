// optim/src/sgd.cpp: SGD with momentum, dampening, Nesterov and L2 weight decay.
//
// reference: torch/optim/sgd.py (torch 1.13), _single_tensor_sgd:
//   d_p = grad + weight_decay * param
//   buf = d_p (first step)  |  buf = momentum * buf + (1 - dampening) * d_p
//   d_p = d_p + momentum * buf (nesterov)  |  d_p = buf
//   param = param - lr * d_p
// done in one pass over param, grad and buf (kernels/sgd_kernel.h), with the scalars rounded
// to the parameter's dtype and the operations fused exactly as torch's CPU kernels fuse them.
#include <cmath>

#include "sgd_kernel.h"
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
        const kernels::SgdScalars k{.lr = o.lr,
                                    .momentum = o.momentum,
                                    .dampening = o.dampening,
                                    .weight_decay = o.weight_decay,
                                    .nesterov = o.nesterov};
        kernels::sgd_step<T>(p.data_ptr<T>(), grad.data_ptr<T>(), buf, p.numel(), first, k);
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
