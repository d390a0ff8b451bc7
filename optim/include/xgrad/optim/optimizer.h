// xgrad/optim/optimizer.h: the Optimizer base, parameter groups and the state dict.
//
// An optimizer holds parameter groups, each a list of leaf tensors with its own options
// (torch's param_groups), and per-parameter state (moments, step counts). step() runs under
// NoGradGuard and updates every parameter that has a gradient in place, through its raw
// buffer, bumping the storage version like any in-place op; parameters whose grad is
// undefined are skipped, as in torch.
//
//   AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
//   // or, nanoGPT's split: weights decay, biases / LayerNorm / embeddings do not. As in
//   // torch, an option a group does not set comes from the constructor-level defaults:
//   AdamW opt({{decay}, {no_decay, {.weight_decay = 0.0}}}, {.lr = 6e-4, .weight_decay = 0.1});
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Adding an optimizer: an options struct (PyTorch names and defaults), a per-parameter state
// struct, a class deriving from OptimizerBase<Options, State> that implements the hooks at
// the bottom of OptimizerBase, and `template class OptimizerBase<...>;` in its .cpp (the
// template's members live in optim/src/optimizer_base_impl.h). See sgd.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad::optim {

// ---- the state dict: flat and easy to walk (tensors to safetensors, options to JSON)
struct ParamGroupState {
  // The group's options by PyTorch name ("lr", "momentum", "eps", "weight_decay", ...;
  // torch's betas tuple as "beta1" and "beta2"); bools are 0 or 1.
  std::map<std::string, double> options;
  // The group's parameters as indices into the flat parameter order: group 0's parameters
  // first, then group 1's, ... (torch numbers them the same way).
  std::vector<int64_t> params;
};

struct OptimizerState {
  std::string type;                          // "SGD", "Adam", "AdamW"
  std::vector<ParamGroupState> param_groups;
  // Per-parameter state by flat index, e.g. {"step", "exp_avg", "exp_avg_sq"} for Adam
  // ("step" is a 0-d float32 tensor, as in torch: exact up to 2^24 steps) or
  // {"momentum_buffer"} for SGD. A
  // parameter that never had a gradient has no entry. The tensors are copies.
  std::map<int64_t, std::map<std::string, Tensor>> state;
};

// ---- the interface schedulers and trainers use
class Optimizer {
 public:
  Optimizer() = default;
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  Optimizer(Optimizer&&) = default;
  Optimizer& operator=(Optimizer&&) = default;

  // One update of every parameter that has a gradient, under NoGradGuard. Checks the
  // options and parameters first, so a bad option or parameter throws with nothing updated.
  void step();
  // torch 1.13's Optimizer.zero_grad(set_to_none=False): by default every grad is zeroed in
  // place (the tensor stays); zero_grad(true) makes every grad undefined (None), torch 2's
  // default. The two give the same next step: backward adds into a zeroed grad.
  void zero_grad(Flag set_to_none = false);

  virtual const char* name() const = 0;  // "SGD", "Adam", "AdamW"
  virtual std::size_t num_param_groups() const = 0;
  virtual const std::vector<Tensor>& group_params(std::size_t group) const = 0;
  std::vector<Tensor> parameters() const;  // every group's, in the flat order
  virtual double lr(std::size_t group) const = 0;
  virtual void set_lr(std::size_t group, double lr) = 0;  // throws for a negative lr
  void set_lr(double lr);                                // every group

  // Copies of the step counts, moments and options; load_state_dict checks everything
  // (type, group and parameter counts, option names and values, state names, shapes) before
  // changing anything, and throws xgrad::Error leaving the optimizer untouched.
  virtual OptimizerState state_dict() const = 0;
  virtual void load_state_dict(const OptimizerState& state) = 0;

 protected:
  virtual void check_step() const = 0;  // throws before step_impl touches anything
  virtual void step_impl() = 0;
};

// A list of parameters with the options this group sets (Options::Group: every option a
// std::optional). An option left unset takes the optimizer's constructor-level default, as
// torch fills a param group from `defaults`; a full Options struct converts to group options
// with every option set. `{params}` alone takes all the defaults.
template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  typename Options::Group options{};
};

// The shared machinery of the concrete optimizers: groups, positional per-parameter state,
// validation, state-dict plumbing. State is kept parallel to the groups: state_[g][i]
// belongs to groups_[g].params[i].
template <class Options, class State>
class OptimizerBase : public Optimizer {
 public:
  using ParamGroup = optim::ParamGroup<Options>;
  // A param group as the optimizer holds it: every option filled in (torch's param_groups).
  struct Group {
    std::vector<Tensor> params;
    Options options;
  };

  const std::vector<Group>& param_groups() const { return groups_; }
  // The constructor-level options (torch's `defaults`): what a group's unset option takes.
  const Options& defaults() const { return defaults_; }
  // Mutable options of one group (e.g. opt.options(1).weight_decay = 0); checked again at
  // the next step().
  Options& options(std::size_t group);
  const Options& options(std::size_t group) const;
  // torch's add_param_group: fills unset options from defaults(), checks the options and
  // that no parameter is already present.
  void add_param_group(ParamGroup group);
  // Per-parameter state of groups_[group].params[index] (undefined tensors until a step).
  const State& state(std::size_t group, std::size_t index) const;

  std::size_t num_param_groups() const override { return groups_.size(); }
  const std::vector<Tensor>& group_params(std::size_t group) const override;
  double lr(std::size_t group) const override { return options(group).lr; }
  void set_lr(std::size_t group, double lr) override;
  using Optimizer::set_lr;
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& sd) override;

 protected:
  OptimizerBase(std::vector<ParamGroup> groups, const Options& defaults) : defaults_(defaults) {
    for (ParamGroup& g : groups) groups_.push_back({std::move(g.params), g.options.over(defaults)});
  }
  // Checks the groups given to the constructor and sizes the state; the concrete
  // optimizer's constructor calls it (the hooks are not available in the base constructor).
  void init_groups();
  void check_step() const override;

  // ---- hooks for the concrete optimizer
  // Throws "<name>: invalid <option> value: <v>" for a bad option.
  virtual void validate(const Options& options) const = 0;
  virtual std::map<std::string, double> options_to_map(const Options& options) const = 0;
  // Reads every option from `m`; throws "<op>: ..." for a missing or unknown name or a bool
  // that is not 0/1. Does not validate the values (load_state_dict calls validate()).
  virtual Options options_from_map(const std::map<std::string, double>& m,
                                   const char* op) const = 0;
  // The state as named tensors (copies); empty map for "no state yet".
  virtual std::map<std::string, Tensor> state_to_map(const State& state) const = 0;
  // Builds a state from named tensors (copies, in the parameter's dtype); throws "<op>: ..."
  // for a missing or unknown name, or a shape that does not match the parameter.
  virtual State state_from_map(const std::map<std::string, Tensor>& m, const Tensor& param,
                               const Options& options, int64_t index, const char* op) const = 0;

  Options defaults_;
  std::vector<Group> groups_;
  std::vector<std::vector<State>> state_;
};

// ---- helpers for optimizer implementations (optimizer.cpp)
namespace detail {
// Throws "<optimizer>: <what>" unless every parameter is a defined, floating-point,
// contiguous leaf and none appears twice across all of `groups`.
void check_params(const char* optimizer, const std::vector<const std::vector<Tensor>*>& groups);
// Throws unless p is contiguous (before step() writes through its raw pointer).
void check_contiguous(const char* optimizer, const Tensor& p, std::size_t group, std::size_t index);
// A contiguous copy of t in dtype (for state from a state dict).
Tensor copy_as(const Tensor& t, DType dtype);
// The state dict's "step": a 0-d float32 tensor; and its reading back (any numeric 0-d or
// one-element tensor holding a non-negative integer).
Tensor step_tensor(int64_t step);
int64_t step_from_tensor(const char* optimizer, const Tensor& t, int64_t index);
// options_from_map helpers: value of `key` (throws naming the key when missing), and the
// check that `m` has no name outside `known`.
double option(const char* optimizer, const std::map<std::string, double>& m, const char* key);
bool bool_option(const char* optimizer, const std::map<std::string, double>& m, const char* key);
void check_known_options(const char* optimizer, const std::map<std::string, double>& m,
                         std::initializer_list<const char*> known);
// state_from_map helpers: the tensor `key` of param `index` with the parameter's shape
// (throws naming both shapes), and the unknown-name check.
Tensor state_tensor(const char* optimizer, const std::map<std::string, Tensor>& m,
                    const char* key, const Tensor& param, int64_t index);
void check_known_state(const char* optimizer, const std::map<std::string, Tensor>& m,
                       std::initializer_list<const char*> known, int64_t index);
}  // namespace detail

}  // namespace xgrad::optim
