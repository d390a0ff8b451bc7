// xgrad/nn/module.h: the Module base class (torch.nn.Module) and StateDict.
//
// A module owns named parameters (trainable leaf tensors), named buffers (saved, not
// trained: the causal mask) and named child modules, each registered once in its
// constructor. Names and orders follow PyTorch, so `named_parameters()` yields
// "trf_blocks.0.att.W_query.weight" in the same order as torch and a state dict written by a
// torch twin of the model loads key for key.
//
// Writing a module (see linear.h / linear.cpp for the smallest complete one):
//
//   class Block : public Module {
//    public:
//     explicit Block(int64_t d) {
//       fc = register_module("fc", std::make_shared<Linear>(d, d));   // constructs (and draws
//       scale = register_parameter("scale", ones({d}));              // its init) in this order
//     }
//     Tensor forward(const Tensor& x) override { return fc(x) * scale; }
//     ModuleHolder<Linear> fc;   // public members named like the Python attributes (below)
//     Tensor scale;
//   };
//
// Members and the registry hold handles to the same tensor, so `to(kFloat64)`,
// `load_state_dict()` and optimizers (which update parameters in place) are seen through
// both. Construct submodules in the order torch's __init__ does: random initialisation draws
// from the default generator in construction order.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xgrad/autograd.h"
#include "xgrad/io/safetensors.h"
#include "xgrad/tensor.h"

namespace xgrad::nn {

// Ordered name -> tensor map, the result of Module::state_dict() (like torch's OrderedDict).
// Inserting an existing name replaces its tensor and keeps its position.
class StateDict {
 public:
  using value_type = std::pair<std::string, Tensor>;
  using const_iterator = std::vector<value_type>::const_iterator;

  void insert(const std::string& name, const Tensor& tensor);
  bool contains(const std::string& name) const;
  const Tensor& at(const std::string& name) const;  // throws xgrad::Error for a missing name
  Tensor& at(const std::string& name);
  bool erase(const std::string& name);
  std::vector<std::string> keys() const;
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  // A deep copy (copy.deepcopy(model.state_dict())): state_dict() shares storage with the
  // model, so keep a clone when you mean to restore the values later.
  StateDict clone() const;
  // The tensors in order, e.g. xgrad::load(path).tensors; throws for a repeated name.
  static StateDict from(const io::NamedTensors& tensors);

 private:
  std::vector<value_type> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

// What load_state_dict(strict=false) skipped (torch's _IncompatibleKeys).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module {
 public:
  Module() = default;
  virtual ~Module();
  Module(const Module&) = delete;             // parameters are shared handles: a copy would
  Module& operator=(const Module&) = delete;  // silently alias them

  // ---- calling: modules whose forward takes and returns one tensor override this one;
  // Sequential chains them. The default throws.
  virtual Tensor forward(const Tensor& input);
  // Calling a module (also through a ModuleHolder, and Sequential's calls) runs its hooks
  // around forward; with none registered and anomaly mode off it is forward itself.
  Tensor operator()(const Tensor& input) {
    if (!hooks_ && !autograd::AnomalyMode::is_enabled()) return forward(input);
    return call_with_hooks(input);
  }

  // ---- hooks (torch 1.13's, called in its order: forward pre-hooks, forward, forward hooks;
  // full backward hooks once the gradient w.r.t. the module's input is known). Each returns a
  // handle whose remove() unregisters it; hooks of one kind run in registration order.
  //
  // hook(module, input) -> Tensor: an undefined result (or a void hook) keeps the input, any
  // other replaces it for forward and for the later hooks.
  using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
  // hook(module, input, output) -> Tensor: likewise for the output (input is what forward got).
  using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;
  // hook(module, grad_input, grad_output) -> std::vector<Tensor>: the gradients with respect to
  // the module's input and output (one each here; grad_input[0] undefined when the input does
  // not require grad). A non-empty result replaces grad_input (same count, same shape) for the
  // later hooks and for what flows on to the input; an empty one (or a void hook) keeps it.
  // Calls made with grad mode off, or whose output does not require grad, run no backward hook.
  // As torch does, the input and output are wrapped in identity nodes
  // (BackwardHookFunctionBackward) that collect these gradients.
  using FullBackwardHook = std::function<std::vector<Tensor>(
      Module& module, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output)>;
  template <class F>
  RemovableHandle register_forward_pre_hook(F&& hook) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Module&, const Tensor&>>)
      return add_forward_pre_hook([h = std::forward<F>(hook)](Module& m, const Tensor& in) mutable {
        h(m, in);
        return Tensor();
      });
    else return add_forward_pre_hook(std::forward<F>(hook));
  }
  template <class F>
  RemovableHandle register_forward_hook(F&& hook) {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Module&, const Tensor&, const Tensor&>>)
      return add_forward_hook(
          [h = std::forward<F>(hook)](Module& m, const Tensor& in, const Tensor& out) mutable {
            h(m, in, out);
            return Tensor();
          });
    else return add_forward_hook(std::forward<F>(hook));
  }
  template <class F>
  RemovableHandle register_full_backward_hook(F&& hook) {
    using GradList = std::vector<Tensor>;
    if constexpr (std::is_void_v<std::invoke_result_t<F&, Module&, const GradList&, const GradList&>>)
      return add_full_backward_hook([h = std::forward<F>(hook)](Module& m, const GradList& grad_input,
                                                                const GradList& grad_output) mutable {
        h(m, grad_input, grad_output);
        return GradList();
      });
    else return add_full_backward_hook(std::forward<F>(hook));
  }
  RemovableHandle add_forward_pre_hook(ForwardPreHook hook);
  RemovableHandle add_forward_hook(ForwardHook hook);
  RemovableHandle add_full_backward_hook(FullBackwardHook hook);

  // ---- registration (in the constructor). Names are unique within a module and contain no
  // '.'. register_parameter makes `tensor` a leaf that requires grad (unless told otherwise)
  // and returns the same handle; an undefined tensor registers nothing (bias=False).
  Tensor register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Buffers are saved in state_dict() (unless persistent is false) and converted by to(),
  // but never trained.
  Tensor register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  // Points the already registered parameter `name` at another module's parameter, as torch's
  // `model.out_head.weight = model.tok_emb.weight` does (weight tying): afterwards both paths
  // name one tensor, which parameters() lists once and state_dict() under both names. The
  // shapes must match. Returns `tensor`; assign it to the member too.
  Tensor set_parameter(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module needs a Module subclass");
    add_child(name, module);
    return module;
  }

  // ---- traversal (recursive, dotted names, torch's order: a module's own tensors first,
  // then its children's in registration order; shared tensors/modules are listed once).
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Preorder, this module first under the name "" (pointers live as long as this module).
  std::vector<std::pair<std::string, Module*>> named_modules();

  // ---- modes and bookkeeping
  Module& train(bool on = true);  // recursive, like torch: affects Dropout
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // torch 1.13's Module.zero_grad(set_to_none=False): zeroes every parameter's .grad in
  // place; zero_grad(true) sets them to none (undefined), torch 2's default.
  void zero_grad(Flag set_to_none = false);
  Module& requires_grad_(bool on = true);  // freeze / unfreeze every parameter
  int64_t num_parameters(bool only_trainable = false) const;
  // Converts every floating-point parameter, buffer and gradient to `dtype` in place, like
  // torch's .double()/.float(): member handles and optimizers see the new tensors.
  Module& to(DType dtype);

  // ---- state
  // Parameters and persistent buffers by dotted name, sharing storage with the module
  // (detached); a module reachable by two paths appears under both, as in torch.
  // See StateDict::clone().
  StateDict state_dict() const;
  // Copies every tensor of `state` into the module in place (no grad recorded). A tied
  // parameter (set_parameter) loads from either of its names: the other is not missing. Missing and
  // unexpected keys (when strict), shape and dtype-kind mismatches are all reported together
  // in one xgrad::Error, and then nothing has been modified.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);
  // The same from a safetensors file (torch: load_state_dict(safetensors.torch.load_file(p))),
  // e.g. one written by xgrad::save(model.state_dict(), path): the file is read and checked
  // whole first (sizes, offsets, dtypes, checksums), so a bad file also changes nothing.
  LoadResult load_state_dict(const std::filesystem::path& path, bool strict = true);

  // ---- printing like torch: `Linear(in_features=6, out_features=6, bias=True)`
  virtual std::string name() const;        // the class name without namespaces
  virtual std::string extra_repr() const;  // the text inside the parentheses (default "")
  std::string repr() const;

 private:
  struct Hooks;  // module.cpp
  Tensor call_with_hooks(const Tensor& input);
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const char* what, const std::string& name) const;
  template <class F>
  void visit(const std::string& prefix, F&& f, bool dedup = true) const;

  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<Hooks> hooks_;  // made by the first registration
};

// A shared handle to a submodule that is callable like the Python attribute, so a forward
// reads `W_query(x)` as in the notebooks. register_module's std::shared_ptr<M> converts to it:
//   ModuleHolder<Linear> W_query;
//   W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out));
//   Tensor q = W_query(x);        // W_query->in_features works too
template <class M>
class ModuleHolder : public std::shared_ptr<M> {
 public:
  ModuleHolder() = default;
  ModuleHolder(std::shared_ptr<M> module) : std::shared_ptr<M>(std::move(module)) {}  // NOLINT
  Tensor operator()(const Tensor& input) const {
    if (!*this) throw Error("ModuleHolder: calling an empty module handle (not registered yet?)");
    return static_cast<Module&>(*this->get())(input);
  }
};

std::ostream& operator<<(std::ostream& os, const Module& module);
std::string to_string(const Module& module);

// Python's repr() of a float (0.1, 1e-05, 0.0, 1e+16), for extra_repr().
std::string repr_float(double value);

}  // namespace xgrad::nn

namespace xgrad {
// torch.save(model.state_dict(), path) in safetensors, atomically (xgrad/io/safetensors.h);
// read back with model.load_state_dict(path) or xgrad::load(path).
void save(const nn::StateDict& state, const std::filesystem::path& path, const io::Metadata& metadata = {});
}  // namespace xgrad
