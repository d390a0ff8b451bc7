// optim/src/adagrad.cpp: Adagrad, with lr decay, an initial accumulator value and L2 weight
// decay.
//
// reference: torch/optim/adagrad.py (torch 1.13), _single_tensor_adagrad:
//   step += 1
//   grad = grad + weight_decay * param
//   clr = lr / (1 + (step - 1) * lr_decay)                 (in double)
//   sum = sum + grad * grad
//   param = param - clr * grad / (sqrt(sum) + eps)
// one pass per parameter, element by element, with the scalars rounded to the parameter's
// dtype and each operation rounded (or fused) as torch's CPU kernels do: add(other, alpha)
// is fma(alpha, other, self), addcmul(t1, t2, value) is fma(value * t1, t2, self) and
// addcdiv(t1, t2, value) is self + (value * t1) / t2.
#include <cmath>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adagrad.h"
#include "xgrad/profiler.h"

namespace xgrad::optim {

namespace {

// One parameter's update over n elements.
template <class T>
void adagrad_update(T* p, const T* grad, T* sum, int64_t n, T weight_decay, T eps, T neg_clr) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (weight_decay != 0) g = std::fma(weight_decay, p[i], g);  // grad.add(param, alpha=wd)
    sum[i] = std::fma(g, g, sum[i]);                             // sum.addcmul_(g, g, value=1)
    const T std = std::sqrt(sum[i]) + eps;                       // sum.sqrt().add_(eps)
    p[i] = p[i] + (neg_clr * g) / std;                           // param.addcdiv_(g, std, value=-clr)
  }
}

// (step - 1) * lr_decay rounded on its own, as Python rounds it (not fused into the + 1)
double decay_steps(double step, double lr_decay) {
  double r = (step - 1) * lr_decay;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(r));
#endif
  return r;
}

}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : OptimizerBase({ParamGroup{std::move(params)}}, options) {
  init_groups();
  init_state();
}

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults)
    : OptimizerBase(std::move(groups), defaults) {
  init_groups();
  init_state();
}

void Adagrad::init_state() {
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      AdagradParamState& st = state_[g][i];
      if (st.sum.defined()) continue;
      const Tensor& p = groups_[g].params[i];
      st.step = 0;
      st.sum = full(p.shape(), groups_[g].options.initial_accumulator_value, p.dtype());
    }
}

void Adagrad::validate(const AdagradOptions& o) const {
  if (!(o.lr >= 0)) fail("Adagrad", "invalid learning rate: ", o.lr, " (must be >= 0)");
  if (!(o.lr_decay >= 0)) fail("Adagrad", "invalid lr_decay value: ", o.lr_decay, " (must be >= 0)");
  if (!(o.weight_decay >= 0))
    fail("Adagrad", "invalid weight_decay value: ", o.weight_decay, " (must be >= 0)");
  if (!(o.initial_accumulator_value >= 0))
    fail("Adagrad", "invalid initial_accumulator_value value: ", o.initial_accumulator_value,
         " (must be >= 0)");
  if (!(o.eps >= 0)) fail("Adagrad", "invalid epsilon value: ", o.eps, " (must be >= 0)");
}

void Adagrad::step() {
  profiler::RecordFunction rec("Optimizer.step");
  check_step();  // options, contiguity, gradient shapes: throws before anything is written
  init_state();  // parameters added by add_param_group
  NoGradGuard no_grad;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const AdagradOptions& o = groups_[gi].options;
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Tensor& p = groups_[gi].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad = grad.contiguous();
      AdagradParamState& st = state_[gi][i];
      st.step += 1;
      // torch keeps step as a float32 tensor and reads it back with item()
      const double step = static_cast<double>(static_cast<float>(st.step));
      const double clr = o.lr / (1 + decay_steps(step, o.lr_decay));
      dispatch_float(p.dtype(), "Adagrad", [&](auto tag) {
        using T = decltype(tag);
        adagrad_update<T>(p.data_ptr<T>(), grad.data_ptr<T>(), st.sum.data_ptr<T>(), p.numel(),
                          static_cast<T>(o.weight_decay), static_cast<T>(o.eps), static_cast<T>(-clr));
      });
      p.bump_version();  // written through data_ptr above, like an in-place op
      st.sum.bump_version();
    }
  }
}

std::map<std::string, double> Adagrad::options_to_map(const AdagradOptions& o) const {
  return {{"lr", o.lr},
          {"lr_decay", o.lr_decay},
          {"weight_decay", o.weight_decay},
          {"initial_accumulator_value", o.initial_accumulator_value},
          {"eps", o.eps}};
}

AdagradOptions Adagrad::options_from_map(const std::map<std::string, double>& m, const char* op) const {
  detail::check_known_options(op, m, {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"});
  return {.lr = detail::option(op, m, "lr"),
          .lr_decay = detail::option(op, m, "lr_decay"),
          .weight_decay = detail::option(op, m, "weight_decay"),
          .initial_accumulator_value = detail::option(op, m, "initial_accumulator_value"),
          .eps = detail::option(op, m, "eps")};
}

std::map<std::string, Tensor> Adagrad::state_to_map(const AdagradParamState& s) const {
  if (!s.sum.defined()) return {};
  return {{"step", detail::step_tensor(s.step)}, {"sum", detail::copy_as(s.sum, s.sum.dtype())}};
}

// A parameter without saved state starts afresh (step 0, sum full of the initial value).
AdagradParamState Adagrad::state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                          const AdagradOptions& options, int64_t index,
                                          const char* op) const {
  detail::check_known_state(op, m, {"step", "sum"}, index);
  AdagradParamState s;
  if (m.empty()) {
    s.sum = full(param.shape(), options.initial_accumulator_value, param.dtype());
    return s;
  }
  auto step = m.find("step");
  if (step == m.end()) fail(op, "the state of parameter ", index, " has no 'step'");
  s.step = detail::step_from_tensor(op, step->second, index);
  s.sum = detail::state_tensor(op, m, "sum", param, index);
  return s;
}

}  // namespace xgrad::optim
