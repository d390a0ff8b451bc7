// optim/src/optimizer.cpp: the Optimizer base (zero_grad, lr access) and the checking
// helpers every optimizer shares (parameters, state-dict options and tensors).
#include <cmath>
#include <set>
#include <utility>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/optim/optimizer.h"
#include "xgrad/profiler.h"

namespace xgrad::optim {

// ---------------------------------------------------------------- Optimizer
void Optimizer::zero_grad(Flag set_to_none) {
  profiler::RecordFunction rec("Optimizer.zero_grad");
  NoGradGuard no_grad;
  for (std::size_t g = 0; g < num_param_groups(); ++g) {
    for (Tensor p : group_params(g)) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none) p.set_grad(Tensor());
      else grad.zero_();
    }
  }
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (std::size_t g = 0; g < num_param_groups(); ++g) {
    const auto& ps = group_params(g);
    out.insert(out.end(), ps.begin(), ps.end());
  }
  return out;
}

void Optimizer::set_lr(double lr) {
  for (std::size_t g = 0; g < num_param_groups(); ++g) set_lr(g, lr);
}

// ---------------------------------------------------------------- helpers
namespace detail {

void check_contiguous(const char* optimizer, const Tensor& p, std::size_t group, std::size_t index) {
  if (!p.is_contiguous())
    fail(optimizer, "parameter ", index, " of param group ", group, " (shape ", p.shape(), ", strides ",
         p.strides(),
         ") is not contiguous; optimizers update parameters in place "
         "through their buffer, so make the parameter contiguous before optimizing it");
}

void check_params(const char* optimizer, const std::vector<const std::vector<Tensor>*>& groups) {
  // the same storage at the same offset is the same parameter (p and p.detach() included)
  std::set<std::pair<const void*, int64_t>> seen;  // (storage_id, storage_offset)
  std::size_t total = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::vector<Tensor>& params = *groups[g];
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i];
      if (!p.defined()) fail(optimizer, "parameter ", i, " of param group ", g, " is an undefined tensor");
      if (!p.is_leaf())
        fail(optimizer, "can't optimize a non-leaf tensor: parameter ", i, " of param group ", g, " (shape ",
             p.shape(), ") was produced by ", p.grad_fn_name());
      if (!p.is_floating_point())
        fail(optimizer, "parameter ", i, " of param group ", g, " (shape ", p.shape(), ") is ",
             dtype_name(p.dtype()), "; only float32 and float64 parameters can be optimized");
      check_contiguous(optimizer, p, g, i);
      if (!seen.emplace(p.storage_id(), p.storage_offset()).second)
        fail(optimizer, "parameter ", i, " of param group ", g, " (shape ", p.shape(),
             ") appears more than once; a parameter may belong to one param group only, once");
      ++total;
    }
  }
  if (total == 0) fail(optimizer, "got an empty parameter list");
}

Tensor copy_as(const Tensor& t, DType dtype) {
  NoGradGuard no_grad;
  Tensor out = empty(t.shape(), dtype);
  out.copy_(t);
  return out;
}

Tensor step_tensor(int64_t step) { return scalar_tensor(static_cast<double>(step), kFloat32); }

int64_t step_from_tensor(const char* op, const Tensor& t, int64_t index) {
  if (!t.defined() || t.numel() != 1)
    fail(op, "'step' of parameter ", index, " must be a one-element tensor",
         t.defined() ? ", got shape " + shape_str(t.shape()) : std::string(", got an undefined tensor"));
  const double v = t.item();
  if (!(v >= 0) || v != std::floor(v) || v > 9.0e15)
    fail(op, "'step' of parameter ", index, " must be a non-negative integer, got ", v);
  return static_cast<int64_t>(v);
}

double option(const char* op, const std::map<std::string, double>& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end()) fail(op, "the param group's options have no '", key, "'");
  return it->second;
}

bool bool_option(const char* op, const std::map<std::string, double>& m, const char* key) {
  const double v = option(op, m, key);
  if (v != 0.0 && v != 1.0) fail(op, "option '", key, "' must be 0 or 1, got ", v);
  return v == 1.0;
}

void check_known_options(const char* op, const std::map<std::string, double>& m,
                         std::initializer_list<const char*> known) {
  for (const auto& [key, value] : m) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(op, "unknown option '", key, "' in a param group (expected ", list, ")");
    }
  }
}

Tensor state_tensor(const char* op, const std::map<std::string, Tensor>& m, const char* key,
                    const Tensor& param, int64_t index) {
  auto it = m.find(key);
  if (it == m.end()) fail(op, "the state of parameter ", index, " has no '", key, "'");
  const Tensor& t = it->second;
  if (!t.defined()) fail(op, "'", key, "' of parameter ", index, " is an undefined tensor");
  if (!t.is_floating_point())
    fail(op, "'", key, "' of parameter ", index, " is ", dtype_name(t.dtype()),
         ", expected a floating-point tensor");
  if (t.shape() != param.shape())
    fail(op, "'", key, "' of parameter ", index, " has shape ", t.shape(), " but the parameter has shape ",
         param.shape());
  return copy_as(t, param.dtype());
}

void check_known_state(const char* op, const std::map<std::string, Tensor>& m,
                       std::initializer_list<const char*> known, int64_t index) {
  for (const auto& [key, value] : m) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) fail(op, "unknown state '", key, "' for parameter ", index);
  }
}

}  // namespace detail
}  // namespace xgrad::optim
