// core/src/hooks.cpp: gradient hooks on tensors (torch's Tensor.register_hook).
//
// A leaf keeps its hooks on its TensorImpl; a non-leaf on its grad_fn, so they see the gradient
// of the values the tensor had when the hook was registered. The backward pass
// (core/src/autograd.cpp) runs a node's hooks on its gradient before the node runs, and a
// leaf's on the gradient summed over the pass before it reaches .grad (or autograd::grad's
// result).
//
// retain_grad() and hooks on one non-leaf, as torch 1.13 orders them: the retain_grad hook and
// the tensor's hooks are registered on the node as two groups, in the order of their first
// registration. So the retained .grad is the gradient after every hook when a hook was
// registered before retain_grad(), and the gradient before any hook otherwise
// (Node::retain_first, set by retain_grad()).
#include <algorithm>

#include "xgrad/autograd.h"

namespace xgrad {

RemovableHandle Tensor::register_hook_fn(std::function<Tensor(const Tensor&)> fn) const {
  if (!defined()) throw Error("register_hook: called on an undefined tensor");
  if (!fn) throw Error("register_hook: the hook is an empty function");
  if (!requires_grad())
    fail("register_hook", "cannot register a hook on a tensor that doesn't require gradient (shape ", shape(),
         ")");
  const std::shared_ptr<Node>& node = grad_fn();
  std::shared_ptr<detail::TensorHooks>& hooks = node ? node->hooks : impl()->hooks;
  if (!hooks) hooks = std::make_shared<detail::TensorHooks>();
  const uint64_t id = hooks->next_id++;
  hooks->fns.emplace_back(id, std::move(fn));
  return RemovableHandle([weak = std::weak_ptr<detail::TensorHooks>(hooks), id] {
    if (auto list = weak.lock()) std::erase_if(list->fns, [id](const auto& h) { return h.first == id; });
  });
}

namespace detail {
Tensor run_hooks(const TensorHooks& hooks, Tensor grad) {
  const auto fns = hooks.fns;  // a hook may remove itself or register another
  for (const auto& [id, fn] : fns) {
    Tensor replaced = fn(grad);
    if (!replaced.defined()) continue;
    if (replaced.shape() != grad.shape() || replaced.dtype() != grad.dtype())
      fail("register_hook", "a hook returned a gradient of shape ", replaced.shape(), " (",
           dtype_name(replaced.dtype()), ") in place of one of shape ", grad.shape(), " (",
           dtype_name(grad.dtype()),
           "): a hook may only replace the gradient with one of the same shape and dtype");
    grad = std::move(replaced);
  }
  return grad;
}
}  // namespace detail

}  // namespace xgrad
