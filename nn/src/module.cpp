// nn/src/module.cpp: Module registration, traversal, modes, dtype conversion, state dicts
// and torch-style printing; StateDict.
#include "xgrad/nn/module.h"

#include "xgrad/autograd.h"

#include <cxxabi.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "xgrad/autograd.h"

namespace xgrad::nn {

// ====================================================================  StateDict
void StateDict::insert(const std::string& name, const Tensor& tensor) {
  auto it = index_.find(name);
  if (it != index_.end()) {
    items_[it->second].second = tensor;
    return;
  }
  index_.emplace(name, items_.size());
  items_.emplace_back(name, tensor);
}

bool StateDict::contains(const std::string& name) const { return index_.count(name) > 0; }

const Tensor& StateDict::at(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) fail("StateDict::at", "no tensor named '", name, "'");
  return items_[it->second].second;
}

Tensor& StateDict::at(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) fail("StateDict::at", "no tensor named '", name, "'");
  return items_[it->second].second;
}

bool StateDict::erase(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (std::size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(k);
  return out;
}

StateDict StateDict::clone() const {
  NoGradGuard no_grad;
  StateDict out;
  for (const auto& [k, v] : items_) out.insert(k, v.defined() ? v.detach().clone() : Tensor());
  return out;
}

// ====================================================================  registration
Tensor Module::forward(const Tensor&) {
  fail(name().c_str(), "this module has no forward(Tensor); call its own forward overload");
}

void Module::check_new_name(const char* what, const std::string& name) const {
  if (name.empty()) fail(what, "name must not be empty");
  if (name.find('.') != std::string::npos) fail(what, "name '", name, "' must not contain '.'");
  for (const auto& [n, t] : params_)
    if (n == name) fail(what, "'", name, "' is already a parameter of ", this->name());
  for (const auto& b : buffers_)
    if (b.name == name) fail(what, "'", name, "' is already a buffer of ", this->name());
  for (const auto& [n, m] : children_)
    if (n == name) fail(what, "'", name, "' is already a submodule of ", this->name());
}

Tensor Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_new_name("register_parameter", name);
  if (!tensor.defined()) return tensor;  // like register_parameter(name, None)
  if (!tensor.is_leaf())
    fail("register_parameter", "'", name, "' must be a leaf tensor (it was produced by ",
         tensor.grad_fn_name(), "); pass .detach()");
  if (requires_grad && !tensor.is_floating_point())
    fail("register_parameter", "'", name, "' has dtype ", dtype_name(tensor.dtype()),
         "; only floating-point parameters can require gradients");
  tensor.requires_grad_(requires_grad);
  params_.emplace_back(name, tensor);
  return tensor;
}

Tensor Module::set_parameter(const std::string& name, Tensor tensor) {
  for (auto& [n, t] : params_) {
    if (n != name) continue;
    if (!tensor.defined() || !tensor.is_leaf() || !tensor.requires_grad())
      fail("set_parameter", "'", name,
           "' must be set to another module's parameter (a leaf "
           "that requires grad)");
    if (tensor.shape() != t.shape() || tensor.dtype() != t.dtype())
      fail("set_parameter", "'", name, "' has shape ", t.shape(), " (", dtype_name(t.dtype()),
           ") but the new parameter has shape ", tensor.shape(), " (", dtype_name(tensor.dtype()), ")");
    t = tensor;
    return tensor;
  }
  fail("set_parameter", this->name(), " has no parameter named '", name, "'");
}

Tensor Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_new_name("register_buffer", name);
  if (!tensor.defined()) fail("register_buffer", "buffer '", name, "' is an undefined tensor");
  buffers_.push_back({name, tensor, persistent});
  return tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name("register_module", name);
  if (!module) fail("register_module", "submodule '", name, "' is null");
  // registration is the only way to add an edge, so refusing ancestors keeps the tree acyclic
  bool cycle = false;
  module->visit("", [&](const Module& m, const std::string&) { cycle = cycle || &m == this; });
  if (cycle)
    fail("register_module", "'", name, "' (a ", module->name(), ") contains this ", this->name(),
         "; registering it would make a cycle");
  children_.emplace_back(name, std::move(module));
}

// ====================================================================  traversal
// Preorder over the module tree with dotted prefixes ("" for the root). A module reachable
// twice is visited once when `dedup` (torch's named_modules), at every path otherwise (torch's
// state_dict).
template <class F>
void Module::visit(const std::string& prefix, F&& f, bool dedup) const {
  std::unordered_set<const Module*> seen;
  struct Walker {
    std::unordered_set<const Module*>& seen;
    F& f;
    bool dedup;
    void operator()(const Module& m, const std::string& prefix) {
      if (!seen.insert(&m).second && dedup) return;
      f(m, prefix);
      for (const auto& [n, c] : m.children_) (*this)(*c, prefix.empty() ? n : prefix + "." + n);
    }
  };
  Walker{seen, f, dedup}(*this, prefix);
}

static std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;  // tied weights are listed once, as in torch
  auto add = [&](const Module& m, const std::string& prefix) {
    for (const auto& [n, t] : m.params_)
      if (seen.insert(t.unsafe_impl()).second) out.emplace_back(join(prefix, n), t);
  };
  if (recurse) visit("", add);
  else add(*this, "");
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const Module& m, const std::string& prefix) {
    for (const auto& b : m.buffers_)
      if (seen.insert(b.tensor.unsafe_impl()).second) out.emplace_back(join(prefix, b.name), b.tensor);
  };
  if (recurse) visit("", add);
  else add(*this, "");
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, m] : children_) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  visit("", [&](const Module& m, const std::string& prefix) {
    out.emplace_back(prefix, const_cast<Module*>(&m));
  });
  return out;
}

// ====================================================================  modes
Module& Module::train(bool on) {
  for (auto& [n, m] : named_modules()) m->training_ = on;
  return *this;
}

void Module::zero_grad(Flag set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else grad.zero_();
  }
}

Module& Module::requires_grad_(bool on) {
  for (Tensor& p : parameters()) p.requires_grad_(on);
  return *this;
}

int64_t Module::num_parameters(bool only_trainable) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!only_trainable || p.requires_grad()) n += p.numel();
  return n;
}

// Converts `t` in place, so every handle to it sees the new dtype (torch's
// param.data = param.data.to(dtype), and the same for its .grad).
static void convert_in_place(Tensor t, DType dtype) {
  if (!t.is_floating_point() || t.dtype() == dtype) return;
  NoGradGuard no_grad;
  t.set_data(t.detach().to(dtype));
  if (t.grad().defined()) t.set_grad(t.grad().detach().to(dtype));
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype))
    fail("Module::to", "modules can only be converted to a floating dtype, got ", dtype_name(dtype));
  std::unordered_set<const TensorImpl*> done;
  for (auto& [n, m] : named_modules()) {
    for (auto& [pn, p] : m->params_)
      if (done.insert(p.unsafe_impl()).second) convert_in_place(p, dtype);
    for (auto& b : m->buffers_)
      if (done.insert(b.tensor.unsafe_impl()).second) convert_in_place(b.tensor, dtype);
  }
  return *this;
}

// ====================================================================  state dict
StateDict Module::state_dict() const {
  StateDict out;
  visit(
      "",
      [&](const Module& m, const std::string& prefix) {
        for (const auto& [n, t] : m.params_) out.insert(join(prefix, n), t.detach());
        for (const auto& b : m.buffers_)
          if (b.persistent) out.insert(join(prefix, b.name), b.tensor.detach());
      },
      /*dedup=*/false);
  return out;
}

static std::string quoted_list(const std::vector<std::string>& keys) {
  std::string s;
  for (std::size_t i = 0; i < keys.size(); ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
  return s;
}

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  const StateDict own = state_dict();
  // names of one tied parameter: a name is not missing when a twin of it is in `state`
  std::unordered_map<std::string, const TensorImpl*> impl_of;
  std::unordered_set<const TensorImpl*> provided;
  visit(
      "",
      [&](const Module& m, const std::string& prefix) {
        for (const auto& [n, t] : m.params_) {
          impl_of[join(prefix, n)] = t.unsafe_impl();
          if (state.contains(join(prefix, n))) provided.insert(t.unsafe_impl());
        }
      },
      /*dedup=*/false);
  auto tied_twin_given = [&](const std::string& name) {
    auto it = impl_of.find(name);
    return it != impl_of.end() && provided.count(it->second) > 0;
  };
  LoadResult result;
  std::vector<std::string> mismatches;
  for (const auto& [name, dst] : own) {
    if (!state.contains(name)) {
      if (!tied_twin_given(name)) result.missing_keys.push_back(name);
      continue;
    }
    const Tensor& src = state.at(name);
    if (!src.defined()) {
      mismatches.push_back("\"" + name + "\" is an undefined tensor in the state dict");
    } else if (src.shape() != dst.shape()) {
      mismatches.push_back("size mismatch for " + name + ": copying a param with shape " +
                           shape_str(src.shape()) + " from checkpoint, the shape in current model is " +
                           shape_str(dst.shape()) + ".");
    } else if (src.is_floating_point() != dst.is_floating_point()) {
      mismatches.push_back("dtype mismatch for " + name + ": copying a " + dtype_name(src.dtype()) +
                           " tensor into a " + dtype_name(dst.dtype()) + " one.");
    }
  }
  for (const auto& [name, t] : state)
    if (!own.contains(name)) result.unexpected_keys.push_back(name);

  const bool key_errors = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_errors || !mismatches.empty()) {
    std::ostringstream os;
    os << "Error(s) in loading state_dict for " << name() << " (nothing was loaded):";
    if (strict && !result.unexpected_keys.empty())
      os << "\n\tUnexpected key(s) in state_dict: " << quoted_list(result.unexpected_keys) << ".";
    if (strict && !result.missing_keys.empty())
      os << "\n\tMissing key(s) in state_dict: " << quoted_list(result.missing_keys) << ".";
    for (const auto& m : mismatches) os << "\n\t" << m;
    fail("load_state_dict", os.str());
  }

  NoGradGuard no_grad;
  for (const auto& [name, dst] : own) {
    if (!state.contains(name)) continue;
    Tensor target = dst;  // detached handle on the module's storage
    target.copy_(state.at(name));
  }
  return result;
}

// ====================================================================  printing
std::string Module::name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = (status == 0 && demangled) ? demangled : mangled;
  std::free(demangled);
  // drop namespaces (outside template arguments): xgrad::nn::Linear -> Linear
  const std::size_t lt = full.find('<');
  const std::size_t colons = full.rfind("::", lt == std::string::npos ? std::string::npos : lt);
  return colons == std::string::npos ? full : full.substr(colons + 2);
}

std::string Module::extra_repr() const { return ""; }

// torch's _addindent: indent every line but the first by `spaces`.
static std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  const std::string pad(static_cast<std::size_t>(spaces), ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

// reference: torch/nn/modules/module.py, Module.__repr__
std::string Module::repr() const {
  std::vector<std::string> extra_lines;
  const std::string extra = extra_repr();
  if (!extra.empty()) {
    std::istringstream is(extra);
    for (std::string line; std::getline(is, line);) extra_lines.push_back(line);
  }
  std::vector<std::string> child_lines;
  for (const auto& [n, m] : children_) child_lines.push_back("(" + n + "): " + add_indent(m->repr(), 2));
  std::string out = name() + "(";
  if (extra_lines.size() == 1 && child_lines.empty()) {
    out += extra_lines[0];
  } else if (!extra_lines.empty() || !child_lines.empty()) {
    for (const auto& l : extra_lines) out += "\n  " + l;
    for (const auto& l : child_lines) out += "\n  " + l;
    out += "\n";
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) { return os << module.repr(); }
std::string to_string(const Module& module) { return module.repr(); }

// reference: Python's float_repr_style 'short': the shortest digits that round-trip, in
// positional notation when the decimal exponent is in [-4, 16), else d.ddde[+-]XX.
std::string repr_float(double value) {
  if (value != value) return "nan";
  if (value == std::numeric_limits<double>::infinity()) return "inf";
  if (value == -std::numeric_limits<double>::infinity()) return "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.2345e-05"
  const std::size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp10 < -4 || exp10 >= 16) {
    std::string m = digits.substr(0, 1);
    if (digits.size() > 1) m += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    return sign + m + ebuf;
  }
  std::string out;
  if (exp10 < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp10 - 1), '0') + digits;
  } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
    out = digits + std::string(static_cast<std::size_t>(exp10 + 1) - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<std::size_t>(exp10 + 1)) + "." +
          digits.substr(static_cast<std::size_t>(exp10 + 1));
  }
  return sign + out;
}

}  // namespace xgrad::nn
