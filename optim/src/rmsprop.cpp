// optim/src/rmsprop.cpp: RMSprop, with momentum, the centered variant and L2 weight decay.
//
// reference: torch/optim/rmsprop.py (torch 1.13), _single_tensor_rmsprop:
//   grad = grad + weight_decay * param
//   square_avg = alpha * square_avg + (1 - alpha) * grad * grad
//   grad_avg   = alpha * grad_avg + (1 - alpha) * grad                  (centered)
//   avg = sqrt(square_avg - grad_avg * grad_avg) + eps  (centered)  |  sqrt(square_avg) + eps
//   buf = momentum * buf + grad / avg;  param = param - lr * buf      (momentum > 0)
//   param = param - lr * grad / avg                                    (otherwise)
// one pass per parameter, element by element, with the scalars rounded to the parameter's
// dtype and each operation rounded (or fused) as torch's CPU kernels do: add(other, alpha)
// is fma(alpha, other, self), addcmul(t1, t2, value) is fma(value * t1, t2, self) and
// addcdiv(t1, t2, value) is self + (value * t1) / t2.
#include <cmath>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/optim/rmsprop.h"
#include "xgrad/profiler.h"

namespace xgrad::optim {

namespace {

// v as rounded on its own: keeps the compiler from contracting a product into the addition
// that follows it (torch rounds square_avg * alpha before adding to it)
template <class T>
T rounded(T v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(v));
#endif
  return v;
}

// The per-step scalars, in the parameter's dtype.
template <class T>
struct RMSpropScalars {
  T alpha, one_minus_alpha, eps, weight_decay, momentum, neg_lr;
};

// One parameter's update over n elements; grad_avg is null unless centered, buf null unless
// momentum > 0.
template <class T>
void rmsprop_update(T* p, const T* grad, T* square_avg, T* grad_avg, T* buf, int64_t n,
                    const RMSpropScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (s.weight_decay != 0) g = std::fma(s.weight_decay, p[i], g);               // grad.add(p, alpha=wd)
    square_avg[i] = std::fma(s.one_minus_alpha * g, g, square_avg[i] * s.alpha);  // .mul_(a).addcmul_(g, g)
    T avg;
    if (grad_avg) {
      grad_avg[i] = std::fma(s.one_minus_alpha, g, grad_avg[i] * s.alpha);  // .mul_(a).add_(g, alpha=1-a)
      avg = std::sqrt(std::fma(-grad_avg[i], grad_avg[i], square_avg[i]));  // addcmul(ga, ga, -1).sqrt_()
    } else {
      avg = std::sqrt(square_avg[i]);
    }
    avg = avg + s.eps;
    if (buf) {
      buf[i] = rounded(buf[i] * s.momentum) + g / avg;  // buf.mul_(momentum).addcdiv_(g, avg)
      p[i] = std::fma(s.neg_lr, buf[i], p[i]);          // param.add_(buf, alpha=-lr)
    } else {
      p[i] = p[i] + (s.neg_lr * g) / avg;  // param.addcdiv_(g, avg, value=-lr)
    }
  }
}

}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : OptimizerBase({ParamGroup{std::move(params)}}, options) {
  init_groups();
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults)
    : OptimizerBase(std::move(groups), defaults) {
  init_groups();
}

void RMSprop::validate(const RMSpropOptions& o) const {
  if (!(o.lr >= 0)) fail("RMSprop", "invalid learning rate: ", o.lr, " (must be >= 0)");
  if (!(o.eps >= 0)) fail("RMSprop", "invalid epsilon value: ", o.eps, " (must be >= 0)");
  if (!(o.momentum >= 0)) fail("RMSprop", "invalid momentum value: ", o.momentum, " (must be >= 0)");
  if (!(o.weight_decay >= 0))
    fail("RMSprop", "invalid weight_decay value: ", o.weight_decay, " (must be >= 0)");
  if (!(o.alpha >= 0)) fail("RMSprop", "invalid alpha value: ", o.alpha, " (must be >= 0)");
}

void RMSprop::step() {
  profiler::RecordFunction rec("Optimizer.step");
  check_step();  // options, contiguity, gradient shapes: throws before anything is written
  NoGradGuard no_grad;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const RMSpropOptions& o = groups_[gi].options;
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Tensor& p = groups_[gi].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad = grad.contiguous();
      RMSpropParamState& st = state_[gi][i];
      if (!st.square_avg.defined()) {
        st.step = 0;
        st.square_avg = zeros(p.shape(), p.dtype());
      }
      if (o.momentum > 0 && !st.momentum_buffer.defined()) st.momentum_buffer = zeros(p.shape(), p.dtype());
      if (o.centered && !st.grad_avg.defined()) st.grad_avg = zeros(p.shape(), p.dtype());
      st.step += 1;
      dispatch_float(p.dtype(), "RMSprop", [&](auto tag) {
        using T = decltype(tag);
        const RMSpropScalars<T> s{.alpha = static_cast<T>(o.alpha),
                                  .one_minus_alpha = static_cast<T>(1.0 - o.alpha),
                                  .eps = static_cast<T>(o.eps),
                                  .weight_decay = static_cast<T>(o.weight_decay),
                                  .momentum = static_cast<T>(o.momentum),
                                  .neg_lr = static_cast<T>(-o.lr)};
        rmsprop_update<T>(p.data_ptr<T>(), grad.data_ptr<T>(), st.square_avg.data_ptr<T>(),
                          o.centered ? st.grad_avg.data_ptr<T>() : nullptr,
                          o.momentum > 0 ? st.momentum_buffer.data_ptr<T>() : nullptr, p.numel(), s);
      });
      p.bump_version();  // written through data_ptr above, like an in-place op
      st.square_avg.bump_version();
      if (o.centered) st.grad_avg.bump_version();
      if (o.momentum > 0) st.momentum_buffer.bump_version();
    }
  }
}

std::map<std::string, double> RMSprop::options_to_map(const RMSpropOptions& o) const {
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered ? 1.0 : 0.0}};
}

RMSpropOptions RMSprop::options_from_map(const std::map<std::string, double>& m, const char* op) const {
  detail::check_known_options(op, m, {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"});
  return {.lr = detail::option(op, m, "lr"),
          .alpha = detail::option(op, m, "alpha"),
          .eps = detail::option(op, m, "eps"),
          .weight_decay = detail::option(op, m, "weight_decay"),
          .momentum = detail::option(op, m, "momentum"),
          .centered = detail::bool_option(op, m, "centered")};
}

std::map<std::string, Tensor> RMSprop::state_to_map(const RMSpropParamState& s) const {
  if (!s.square_avg.defined()) return {};
  std::map<std::string, Tensor> m{{"step", detail::step_tensor(s.step)},
                                  {"square_avg", detail::copy_as(s.square_avg, s.square_avg.dtype())}};
  if (s.momentum_buffer.defined())
    m["momentum_buffer"] = detail::copy_as(s.momentum_buffer, s.momentum_buffer.dtype());
  if (s.grad_avg.defined()) m["grad_avg"] = detail::copy_as(s.grad_avg, s.grad_avg.dtype());
  return m;
}

// momentum_buffer and grad_avg may be absent even when the options use them (they then
// start at zero, as when momentum or centered is switched on mid-run).
RMSpropParamState RMSprop::state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                          const RMSpropOptions&, int64_t index, const char* op) const {
  detail::check_known_state(op, m, {"step", "square_avg", "momentum_buffer", "grad_avg"}, index);
  RMSpropParamState s;
  if (m.empty()) return s;
  auto step = m.find("step");
  if (step == m.end()) fail(op, "the state of parameter ", index, " has no 'step'");
  s.step = detail::step_from_tensor(op, step->second, index);
  s.square_avg = detail::state_tensor(op, m, "square_avg", param, index);
  if (m.count("momentum_buffer"))
    s.momentum_buffer = detail::state_tensor(op, m, "momentum_buffer", param, index);
  if (m.count("grad_avg")) s.grad_avg = detail::state_tensor(op, m, "grad_avg", param, index);
  return s;
}

}  // namespace xgrad::optim
