// optim/src/adam.cpp: Adam and AdamW, with amsgrad: one class (AdamW is Adam with
// decoupled_ set), one step (Adam::step, at the bottom), one fused kernel; the two differ
// in where the weight decay goes.
//
// reference: torch/optim/adam.py and adamw.py (torch 1.13), _single_tensor_adam(w):
//   step += 1
//   param *= 1 - lr * weight_decay                          (AdamW: decoupled decay)
//   grad = grad + weight_decay * param                      (Adam: L2 penalty)
//   exp_avg    = exp_avg * beta1 + (1 - beta1) * grad
//   exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
//   max_exp_avg_sq = maximum(max_exp_avg_sq, exp_avg_sq)    (amsgrad; used below instead)
//   bias_correction1 = 1 - beta1^step, bias_correction2 = 1 - beta2^step   (in double)
//   step_size = lr / bias_correction1
//   denom = sqrt(exp_avg_sq) / sqrt(bias_correction2) + eps
//   param = param - step_size * exp_avg / denom
// torch runs these as 6-8 separate passes over memory; here they are one streaming pass
// that reads p, g, m, v and writes p, m, v (xsimd batches + a scalar tail), with the same
// operation order, the same fused multiply-adds and the scalars rounded to the parameter's
// dtype as torch's CPU kernels do: the results equal torch 1.13's to the bit (see
// adam_element in adam_kernel.h), which tests/optim checks to 1e-6. All parameters' updates form one flat
// range split over xgrad's threads (run_jobs), with the same bits at any thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "adam_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"

namespace xgrad::optim {

namespace {

// One parameter's share of a step: its buffers, length and scalars.
template <class T>
struct AdamJob {
  T* p;
  const T* g;
  T* m;
  T* v;
  T* vmax;
  int64_t n;
  bool l2, amsgrad;
  kernels::AdamScalars<T> s;
  Tensor grad;  // keeps a contiguous copy of the gradient alive
};

// Runs jobs over xgrad's threads: the parameters are laid end to end, each starting at a
// multiple of kParallelAlign, and the flat range is split (parallel_elems), so a
// chunk boundary inside a parameter falls on a SIMD-batch boundary and every element sees
// exactly the operations of the serial pass (bit-exact with torch at any thread count).
template <class T>
void run_jobs(const std::vector<AdamJob<T>>& jobs, bool decoupled) {
  if (jobs.empty()) return;
  std::vector<int64_t> start(jobs.size() + 1, 0);
  for (std::size_t j = 0; j < jobs.size(); ++j)
    start[j + 1] = start[j] + (jobs[j].n + kParallelAlign - 1) / kParallelAlign * kParallelAlign;
  auto run = decoupled ? kernels::adam_step<T, true> : kernels::adam_step<T, false>;
  parallel_elems(start.back(), kParallelGrain, [&](int64_t lo, int64_t hi) {
    std::size_t j =
        static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), lo) - start.begin()) - 1;
    for (; j < jobs.size() && start[j] < hi; ++j) {
      const AdamJob<T>& jb = jobs[j];
      const int64_t a = std::max<int64_t>(lo - start[j], 0);
      const int64_t b = std::min<int64_t>(hi - start[j], jb.n);
      if (a >= b) continue;
      run(jb.p + a, jb.g + a, jb.m + a, jb.v + a, jb.vmax ? jb.vmax + a : nullptr, b - a, jb.l2, jb.amsgrad,
          jb.s);
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- Adam, AdamW
Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam({ParamGroup{std::move(params)}}, options, /*decoupled=*/false) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults)
    : Adam(std::move(groups), defaults, /*decoupled=*/false) {}
Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults, bool decoupled)
    : OptimizerBase(std::move(groups), defaults), decoupled_(decoupled) {
  init_groups();
}
AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam({ParamGroup{std::move(params)}}, options, /*decoupled=*/true) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults)
    : Adam(std::move(groups), defaults, /*decoupled=*/true) {}

void Adam::validate(const AdamOptions& o) const {
  if (!(o.lr >= 0)) fail(name(), "invalid learning rate: ", o.lr, " (must be >= 0)");
  if (!(o.eps >= 0)) fail(name(), "invalid epsilon value: ", o.eps, " (must be >= 0)");
  if (!(o.betas.first >= 0 && o.betas.first < 1))
    fail(name(), "invalid beta parameter at index 0: ", o.betas.first, " (must be in [0, 1))");
  if (!(o.betas.second >= 0 && o.betas.second < 1))
    fail(name(), "invalid beta parameter at index 1: ", o.betas.second, " (must be in [0, 1))");
  if (!(o.weight_decay >= 0)) fail(name(), "invalid weight_decay value: ", o.weight_decay, " (must be >= 0)");
}

std::map<std::string, double> Adam::options_to_map(const AdamOptions& o) const {
  return {{"lr", o.lr},   {"beta1", o.betas.first},         {"beta2", o.betas.second},
          {"eps", o.eps}, {"weight_decay", o.weight_decay}, {"amsgrad", o.amsgrad ? 1.0 : 0.0}};
}

AdamOptions Adam::options_from_map(const std::map<std::string, double>& m, const char* op) const {
  detail::check_known_options(op, m, {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"});
  return {.lr = detail::option(op, m, "lr"),
          .betas = {detail::option(op, m, "beta1"), detail::option(op, m, "beta2")},
          .eps = detail::option(op, m, "eps"),
          .weight_decay = detail::option(op, m, "weight_decay"),
          .amsgrad = detail::bool_option(op, m, "amsgrad")};
}

std::map<std::string, Tensor> Adam::state_to_map(const AdamParamState& s) const {
  if (!s.exp_avg.defined()) return {};
  std::map<std::string, Tensor> m{{"step", detail::step_tensor(s.step)},
                                  {"exp_avg", detail::copy_as(s.exp_avg, s.exp_avg.dtype())},
                                  {"exp_avg_sq", detail::copy_as(s.exp_avg_sq, s.exp_avg_sq.dtype())}};
  if (s.max_exp_avg_sq.defined())
    m["max_exp_avg_sq"] = detail::copy_as(s.max_exp_avg_sq, s.max_exp_avg_sq.dtype());
  return m;
}

// max_exp_avg_sq may be absent even with amsgrad (it then starts at zero, as when amsgrad is
// switched on mid-run).
AdamParamState Adam::state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                                    const AdamOptions&, int64_t index, const char* op) const {
  detail::check_known_state(op, m, {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}, index);
  AdamParamState s;
  if (m.empty()) return s;
  auto step = m.find("step");
  if (step == m.end()) fail(op, "the state of parameter ", index, " has no 'step'");
  s.step = detail::step_from_tensor(op, step->second, index);
  s.exp_avg = detail::state_tensor(op, m, "exp_avg", param, index);
  s.exp_avg_sq = detail::state_tensor(op, m, "exp_avg_sq", param, index);
  if (m.count("max_exp_avg_sq"))
    s.max_exp_avg_sq = detail::state_tensor(op, m, "max_exp_avg_sq", param, index);
  return s;
}

// ---------------------------------------------------------------- the step
// One step of every parameter with a gradient (torch's @torch.no_grad() step()): the
// per-parameter scalars here, then all parameters' fused updates in one parallel pass.
void Adam::step() {
  profiler::RecordFunction rec("Optimizer.step");
  check_step();  // options, contiguity, gradient shapes: throws before anything is written
  NoGradGuard no_grad;
  const bool decoupled = decoupled_;
  std::vector<AdamJob<float>> jobs_f;
  std::vector<AdamJob<double>> jobs_d;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& o = groups_[gi].options;
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Tensor& p = groups_[gi].params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad = grad.contiguous();
      AdamParamState& st = state_[gi][i];
      if (!st.exp_avg.defined()) {
        st.step = 0;
        st.exp_avg = zeros(p.shape(), p.dtype());
        st.exp_avg_sq = zeros(p.shape(), p.dtype());
      }
      if (o.amsgrad && !st.max_exp_avg_sq.defined()) st.max_exp_avg_sq = zeros(p.shape(), p.dtype());
      st.step += 1;

      const double step = static_cast<double>(st.step);
      const double bias_correction1 = 1.0 - std::pow(o.betas.first, step);
      const double bias_correction2 = 1.0 - std::pow(o.betas.second, step);
      const double step_size = o.lr / bias_correction1;
      const bool l2 = !decoupled && o.weight_decay != 0;
      dispatch_float(p.dtype(), name(), [&](auto tag) {
        using T = decltype(tag);
        const kernels::AdamScalars<T> s{.decay = static_cast<T>(1.0 - o.lr * o.weight_decay),
                                        .wd = static_cast<T>(o.weight_decay),
                                        .beta1 = static_cast<T>(o.betas.first),
                                        .one_minus_beta1 = static_cast<T>(1.0 - o.betas.first),
                                        .beta2 = static_cast<T>(o.betas.second),
                                        .one_minus_beta2 = static_cast<T>(1.0 - o.betas.second),
                                        .bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2)),
                                        .eps = static_cast<T>(o.eps),
                                        .neg_step_size = static_cast<T>(-step_size)};
        T* vmax = o.amsgrad ? st.max_exp_avg_sq.data_ptr<T>() : nullptr;
        AdamJob<T> job{p.data_ptr<T>(),
                       grad.data_ptr<T>(),
                       st.exp_avg.data_ptr<T>(),
                       st.exp_avg_sq.data_ptr<T>(),
                       vmax,
                       p.numel(),
                       l2,
                       o.amsgrad,
                       s,
                       grad};
        if constexpr (std::is_same_v<T, float>) jobs_f.push_back(job);
        else jobs_d.push_back(job);
      });
      p.bump_version();  // written through data_ptr below, like an in-place op
      st.exp_avg.bump_version();
      st.exp_avg_sq.bump_version();
      if (o.amsgrad) st.max_exp_avg_sq.bump_version();
    }
  }
  run_jobs(jobs_f, decoupled);
  run_jobs(jobs_d, decoupled);
}

}  // namespace xgrad::optim
