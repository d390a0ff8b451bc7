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
// struct, and a class deriving from OptimizerBase<Options, State> that implements step()
// (check_step(), NoGradGuard, the update; bump_version() on what it writes through
// data_ptr) and the hooks at the bottom of OptimizerBase. See sgd.cpp; it needs no private
// header, so an optimizer of your own outside xgrad is written the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/error.h"
#include "xgrad/io/safetensors.h"
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
  std::string type;  // "SGD", "Adam", "AdamW"
  std::vector<ParamGroupState> param_groups;
  // Per-parameter state by flat index, e.g. {"step", "exp_avg", "exp_avg_sq"} for Adam
  // ("step" is a 0-d float32 tensor, as in torch: exact up to 2^24 steps) or
  // {"momentum_buffer"} for SGD. A
  // parameter that never had a gradient has no entry. The tensors are copies.
  std::map<int64_t, std::map<std::string, Tensor>> state;

  // The state saved by xgrad::save(opt.state_dict(), path) (below), e.g. xgrad::load(path);
  // throws xgrad::Error naming `source` for a key or value that is not of that layout.
  static OptimizerState from(const io::SafetensorsFile& file, const std::string& source = "");
  // The inverse: the tensors and metadata xgrad::save(state, path, metadata) writes, e.g. to
  // put them in a checkpoint with other files (xgrad/io/checkpoint.h). `metadata` may add
  // keys, not the layout's own ("optimizer", "param_groups*"); `source` names the caller in
  // that error.
  io::SafetensorsFile to_safetensors(const io::Metadata& metadata = {}, const std::string& source = "") const;
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

  // One update of every parameter that has a gradient, under NoGradGuard (each optimizer's
  // own, in its .cpp: Adam::step in adam.cpp). Checks the options and parameters first, so a
  // bad option or parameter throws with nothing updated.
  virtual void step() = 0;
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
  void set_lr(double lr);                                 // every group

  // Copies of the step counts, moments and options; load_state_dict checks everything
  // (type, group and parameter counts, option names and values, state names, shapes) before
  // changing anything, and throws xgrad::Error leaving the optimizer untouched.
  virtual OptimizerState state_dict() const = 0;
  virtual void load_state_dict(const OptimizerState& state) = 0;
  // The same from a file written by xgrad::save(opt.state_dict(), path): read and checked
  // whole (the file's checksums, then the state as above) before anything changes.
  void load_state_dict(const std::filesystem::path& path);
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
  using Optimizer::load_state_dict;  // from a file

 protected:
  OptimizerBase(std::vector<ParamGroup> groups, const Options& defaults) : defaults_(defaults) {
    for (ParamGroup& g : groups) groups_.push_back({std::move(g.params), g.options.over(defaults)});
  }
  // Checks the groups given to the constructor and sizes the state; the concrete
  // optimizer's constructor calls it (the hooks are not available in the base constructor).
  void init_groups();
  // What step() calls first: every option valid, every parameter contiguous, every gradient
  // of its parameter's shape and dtype; throws before anything is written.
  void check_step() const;

  // ---- hooks for the concrete optimizer
  // Throws "<name>: invalid <option> value: <v>" for a bad option.
  virtual void validate(const Options& options) const = 0;
  virtual std::map<std::string, double> options_to_map(const Options& options) const = 0;
  // Reads every option from `m`; throws "<op>: ..." for a missing or unknown name or a bool
  // that is not 0/1. Does not validate the values (load_state_dict calls validate()).
  virtual Options options_from_map(const std::map<std::string, double>& m, const char* op) const = 0;
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
Tensor state_tensor(const char* optimizer, const std::map<std::string, Tensor>& m, const char* key,
                    const Tensor& param, int64_t index);
void check_known_state(const char* optimizer, const std::map<std::string, Tensor>& m,
                       std::initializer_list<const char*> known, int64_t index);
}  // namespace detail

}  // namespace xgrad::optim

namespace xgrad {
// torch.save(opt.state_dict(), path) in safetensors, atomically: tensors "state.<i>.<key>"
// (torch's state_dict()["state"][i][key]) and string metadata "optimizer" (the type),
// "param_groups" (their count), "param_groups.<g>.params" ("0,1,2": flat parameter indices)
// and "param_groups.<g>.<option>" (%.17g, so every double reads back exactly). `metadata`
// may add other keys. Read back with opt.load_state_dict(path).
void save(const optim::OptimizerState& state, const std::filesystem::path& path,
          const io::Metadata& metadata = {});
}  // namespace xgrad

namespace xgrad::optim {

// ---- OptimizerBase's members (templates: here, so any optimizer can derive from it)
template <class O, class S>
void OptimizerBase<O, S>::init_groups() {
  std::vector<const std::vector<Tensor>*> all;
  for (const Group& g : groups_) {
    validate(g.options);
    all.push_back(&g.params);
  }
  detail::check_params(name(), all);
  state_.clear();
  for (const Group& g : groups_) state_.emplace_back(g.params.size());
}

template <class O, class S>
O& OptimizerBase<O, S>::options(std::size_t group) {
  if (group >= groups_.size())
    fail(name(), "param group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group].options;
}

template <class O, class S>
const O& OptimizerBase<O, S>::options(std::size_t group) const {
  if (group >= groups_.size())
    fail(name(), "param group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group].options;
}

template <class O, class S>
const std::vector<Tensor>& OptimizerBase<O, S>::group_params(std::size_t group) const {
  if (group >= groups_.size())
    fail(name(), "param group ", group, " does not exist (", groups_.size(), " groups)");
  return groups_[group].params;
}

template <class O, class S>
const S& OptimizerBase<O, S>::state(std::size_t group, std::size_t index) const {
  if (group >= groups_.size() || index >= groups_[group].params.size())
    fail(name(), "no parameter ", index, " in param group ", group);
  return state_[group][index];
}

template <class O, class S>
void OptimizerBase<O, S>::set_lr(std::size_t group, double lr) {
  O& o = options(group);
  O changed = o;
  changed.lr = lr;
  validate(changed);
  o.lr = lr;
}

template <class O, class S>
void OptimizerBase<O, S>::add_param_group(ParamGroup group) {
  Group filled{std::move(group.params), group.options.over(defaults_)};
  validate(filled.options);
  std::vector<const std::vector<Tensor>*> all;
  for (const Group& g : groups_) all.push_back(&g.params);
  all.push_back(&filled.params);
  detail::check_params(name(), all);
  state_.emplace_back(filled.params.size());
  groups_.push_back(std::move(filled));
}

template <class O, class S>
void OptimizerBase<O, S>::check_step() const {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    validate(groups_[g].options);
    const auto& params = groups_[g].params;
    for (std::size_t i = 0; i < params.size(); ++i) {
      detail::check_contiguous(name(), params[i], g, i);
      const Tensor grad = params[i].grad();
      if (grad.defined() && (grad.shape() != params[i].shape() || grad.dtype() != params[i].dtype()))
        fail(name(), "the gradient of parameter ", i, " of param group ", g, " has shape ", grad.shape(),
             " (", dtype_name(grad.dtype()), ") but the parameter has shape ", params[i].shape(), " (",
             dtype_name(params[i].dtype()), ")");
    }
  }
}

template <class O, class S>
OptimizerState OptimizerBase<O, S>::state_dict() const {
  OptimizerState sd;
  sd.type = name();
  int64_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    ParamGroupState gs;
    gs.options = options_to_map(groups_[g].options);
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i, ++index) {
      gs.params.push_back(index);
      auto m = state_to_map(state_[g][i]);
      if (!m.empty()) sd.state[index] = std::move(m);
    }
    sd.param_groups.push_back(std::move(gs));
  }
  return sd;
}

template <class O, class S>
void OptimizerBase<O, S>::load_state_dict(const OptimizerState& sd) {
  const std::string op = std::string(name()) + ".load_state_dict";
  if (sd.type != name())
    fail(op.c_str(), "state dict from ", sd.type.empty() ? "an unnamed optimizer" : sd.type, " loaded into ",
         name());
  if (sd.param_groups.size() != groups_.size())
    fail(op.c_str(), "the state dict has ", sd.param_groups.size(), " param groups but the optimizer has ",
         groups_.size());

  // saved parameter index -> (group, position), as torch zips saved ids with current params
  std::map<int64_t, std::pair<std::size_t, std::size_t>> where;
  std::vector<O> options;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroupState& gs = sd.param_groups[g];
    const std::string group_op = op + " (param group " + std::to_string(g) + ")";
    if (gs.params.size() != groups_[g].params.size())
      fail(group_op.c_str(), "the state dict's group has ", gs.params.size(),
           " parameters but the optimizer's has ", groups_[g].params.size());
    for (std::size_t i = 0; i < gs.params.size(); ++i)
      if (!where.emplace(gs.params[i], std::make_pair(g, i)).second)
        fail(group_op.c_str(), "parameter index ", gs.params[i], " appears more than once");
    O o = options_from_map(gs.options, group_op.c_str());
    try {
      validate(o);
    } catch (const Error& e) {
      fail(group_op.c_str(), e.what());
    }
    options.push_back(o);
  }

  std::vector<std::vector<S>> state;
  for (const Group& g : groups_) state.emplace_back(g.params.size());
  for (const auto& [index, named] : sd.state) {
    auto it = where.find(index);
    if (it == where.end())
      fail(op.c_str(), "the state dict has state for parameter ", index,
           ", which is in none of its param groups");
    const auto [g, i] = it->second;
    state[g][i] = state_from_map(named, groups_[g].params[i], options[g], index, op.c_str());
  }

  // everything checked: commit
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].options = options[g];
  state_ = std::move(state);
}

}  // namespace xgrad::optim
