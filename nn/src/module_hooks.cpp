// nn/src/module_hooks.cpp: calling a Module with its hooks (torch 1.13's Module._call_impl):
// forward pre-hooks, forward, forward hooks, and full backward hooks through identity nodes
// around the input and output (torch's BackwardHook and BackwardHookFunction). Also the module
// path that anomaly mode records for the nodes made inside a module's forward.
//
// The full backward hooks, as torch runs them:
//   input' = BackwardHookFunction(input)    its backward sees the gradient w.r.t. the input
//   output = forward(input')
//   output' = BackwardHookFunction(output)  its backward sees the gradient w.r.t. the output
// In backward, output' runs first and stores grad_output; when input' runs, every hook is
// called with (grad_input, grad_output) and what it returns flows on to the input. When the
// input does not require grad there is no input', and output' calls the hooks with an undefined
// grad_input. The hooks called are those registered when the module was called.
#include <algorithm>
#include <optional>

#include "xgrad/autograd.h"
#include "xgrad/nn/module.h"

namespace xgrad::nn {

struct Module::Hooks {
  template <class Fn>
  struct List {
    std::vector<std::pair<uint64_t, Fn>> fns;
    std::vector<Fn> snapshot() const {
      std::vector<Fn> out;
      for (const auto& [id, fn] : fns) out.push_back(fn);
      return out;
    }
  };
  List<ForwardPreHook> forward_pre;
  List<ForwardHook> forward;
  List<FullBackwardHook> full_backward;
  uint64_t next_id = 0;
  // The module, for the backward hooks of its calls; null once it is destroyed.
  std::shared_ptr<Module*> self;

  // Makes module.hooks_ if needed and appends fn to its `list`.
  template <class Fn>
  static RemovableHandle add(Module& module, List<Fn> Hooks::*list, Fn fn, const char* what) {
    if (!fn) fail(what, "the hook is an empty function");
    if (!module.hooks_) {
      module.hooks_ = std::make_shared<Hooks>();
      module.hooks_->self = std::make_shared<Module*>(&module);
    }
    Hooks& hooks = *module.hooks_;
    const uint64_t id = hooks.next_id++;
    (hooks.*list).fns.emplace_back(id, std::move(fn));
    return RemovableHandle([weak = std::weak_ptr<Hooks>(module.hooks_), list, id] {
      if (auto h = weak.lock())
        std::erase_if(((*h).*list).fns, [id](const auto& e) { return e.first == id; });
    });
  }
};

Module::~Module() {
  if (hooks_) *hooks_->self = nullptr;
}

RemovableHandle Module::add_forward_pre_hook(ForwardPreHook hook) {
  return Hooks::add(*this, &Hooks::forward_pre, std::move(hook), "register_forward_pre_hook");
}
RemovableHandle Module::add_forward_hook(ForwardHook hook) {
  return Hooks::add(*this, &Hooks::forward, std::move(hook), "register_forward_hook");
}
RemovableHandle Module::add_full_backward_hook(FullBackwardHook hook) {
  return Hooks::add(*this, &Hooks::full_backward, std::move(hook), "register_full_backward_hook");
}

namespace {
// One call's full backward hooks (torch's BackwardHook), shared by its two identity nodes.
struct BackwardHookCall {
  std::shared_ptr<Module*> module;
  std::vector<Module::FullBackwardHook> hooks;
  bool input_wrapped = false;
  std::vector<Tensor> grad_output;  // set by the output's node, used by the input's

  Module& target() const {
    if (*module == nullptr)
      throw Error("register_full_backward_hook: the module was destroyed before backward reached its hooks");
    return **module;
  }

  // The hooks in order, each seeing the grad_input the previous one returned.
  std::vector<Tensor> run(std::vector<Tensor> grad_input) {
    Module& m = target();
    for (const auto& hook : hooks) {
      std::vector<Tensor> out = hook(m, grad_input, grad_output);
      if (out.empty()) continue;
      if (out.size() != grad_input.size())
        fail("register_full_backward_hook", "a backward hook of ", m.name(), " returned ", out.size(),
             " grad_input tensors, but the module has ", grad_input.size(), " input");
      for (std::size_t i = 0; i < out.size(); ++i)
        if (out[i].defined() && grad_input[i].defined() &&
            (out[i].shape() != grad_input[i].shape() || out[i].dtype() != grad_input[i].dtype()))
          fail("register_full_backward_hook", "a backward hook of ", m.name(), " returned grad_input[", i,
               "] of shape ", out[i].shape(), " (", dtype_name(out[i].dtype()), ") for an input of shape ",
               grad_input[i].shape(), " (", dtype_name(grad_input[i].dtype()), ")");
      grad_input = std::move(out);
    }
    return grad_input;
  }
};

// x itself as a new tensor whose node runs `backward` (BackwardHookFunction: the identity).
template <class F>
Tensor identity_node(const Tensor& x, F&& backward) {
  Tensor alias = make_view(x, x.shape(), x.strides(), x.storage_offset());
  return record("BackwardHookFunctionBackward", alias, {x}, std::forward<F>(backward));
}

bool wraps(const Tensor& t) { return GradMode::is_enabled() && t.defined() && t.requires_grad(); }

// This module's dotted path under the module whose forward called it (anomaly mode).
autograd::detail::ModuleFrame frame_of(Module& m) {
  autograd::detail::ModuleFrame frame{&m, "", m.name()};
  const autograd::detail::ModuleFrame* caller = autograd::detail::current_module();
  if (caller == nullptr) return frame;  // the outermost module called
  auto* parent = static_cast<Module*>(const_cast<void*>(caller->module));
  for (const auto& [name, child] : parent->named_modules())
    if (child == &m && !name.empty()) {
      frame.path = caller->path.empty() ? name : caller->path + "." + name;
      return frame;
    }
  // not a submodule of its caller: named by its class under the caller
  frame.path = (caller->path.empty() ? "" : caller->path + ".") + "<" + m.name() + ">";
  return frame;
}
}  // namespace

Tensor Module::call_with_hooks(const Tensor& input_arg) {
  std::optional<autograd::detail::ModuleScope> scope;
  if (autograd::AnomalyMode::is_enabled()) scope.emplace(frame_of(*this));
  if (!hooks_) return forward(input_arg);
  const std::shared_ptr<Hooks> hooks = hooks_;  // a hook may register or remove hooks

  Tensor input = input_arg;
  for (const auto& hook : hooks->forward_pre.snapshot())
    if (Tensor replaced = hook(*this, input); replaced.defined()) input = std::move(replaced);

  std::shared_ptr<BackwardHookCall> call;
  if (!hooks->full_backward.fns.empty()) {
    call = std::make_shared<BackwardHookCall>();
    call->module = hooks->self;
    call->hooks = hooks->full_backward.snapshot();
    if (wraps(input)) {
      call->input_wrapped = true;
      input = identity_node(input, [call](const Tensor& dout, Grads& grads) {
        // the identity: the module input's gradient is dout, as the hooks leave it
        std::vector<Tensor> grad_input{dout};
        if (!call->grad_output.empty()) {  // (empty: the gradient did not come through the output)
          grad_input = call->run(std::move(grad_input));
          call->grad_output.clear();
        }
        grads.add(0, grad_input[0]);
      });
    }
  }

  Tensor output = forward(input);
  for (const auto& hook : hooks->forward.snapshot())
    if (Tensor replaced = hook(*this, input, output); replaced.defined()) output = std::move(replaced);

  if (call && wraps(output)) {
    output = identity_node(output, [call](const Tensor& dout, Grads& grads) {
      // the identity: dout is the gradient w.r.t. the module's output
      call->grad_output = {dout};
      if (!call->input_wrapped) {
        Module& m = call->target();
        for (const auto& hook : call->hooks) {
          const std::vector<Tensor> out = hook(m, {Tensor()}, call->grad_output);
          if (std::any_of(out.begin(), out.end(), [](const Tensor& t) { return t.defined(); }))
            fail("register_full_backward_hook", "a backward hook of ", m.name(),
                 " returned a grad_input, but no input of this call requires grad: return nothing "
                 "(or undefined tensors)");
        }
        call->grad_output.clear();
      }
      grads.add(0, dout);
    });
  }
  return output;
}

}  // namespace xgrad::nn
