// optim/src/optimizer_base_impl.h (private): the members of OptimizerBase<Options, State>.
// Each optimizer's .cpp includes this and instantiates the template for its types
// (`template class OptimizerBase<SGDOptions, SGDParamState>;`).
#pragma once
#include <string>
#include <utility>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

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
        fail(name(), "the gradient of parameter ", i, " of param group ", g, " has shape ",
             grad.shape(), " (", dtype_name(grad.dtype()), ") but the parameter has shape ",
             params[i].shape(), " (", dtype_name(params[i].dtype()), ")");
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
    fail(op.c_str(), "state dict from ", sd.type.empty() ? "an unnamed optimizer" : sd.type,
         " loaded into ", name());
  if (sd.param_groups.size() != groups_.size())
    fail(op.c_str(), "the state dict has ", sd.param_groups.size(),
         " param groups but the optimizer has ", groups_.size());

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
