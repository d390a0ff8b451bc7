// core/src/autograd.cpp: grad mode, saved tensors, recording nodes, and the backward pass.
//
// The tape: every node gets the next sequence number when recorded. backward() collects the
// nodes reachable from the root, sorts them by sequence number (newest first) and runs each
// one whose output received a gradient. A node runs only after every node recorded later
// (its consumers), so its gradient is complete when it runs.
#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "kernels.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {
thread_local bool grad_enabled = true;
std::atomic<uint64_t> next_sequence_nr{0};

// Is `t` the only handle on an unshared, contiguous buffer that covers exactly its elements?
// Then a gradient can be kept (and later accumulated into) without a copy.
bool exclusively_owned(const Tensor& t) {
  const auto& impl = t.impl();
  return impl.use_count() == 1 && impl->storage.use_count() == 1 && t.is_contiguous() &&
         t.storage_offset() == 0 &&
         impl->storage->nbytes == static_cast<std::size_t>(t.numel()) * itemsize(t.dtype());
}

// slot += g, copying only when neither slot nor g is ours to modify. When only g is (a
// residual add hands its dout to both branches; the branch's gradient comes back fresh), g
// takes the sum in place: g + slot has the bits of slot + g, and no new buffer is touched.
void accumulate(Tensor& slot, bool& owned, Tensor g) {
  if (!slot.defined()) {
    owned = exclusively_owned(g);
    slot = std::move(g);
  } else if (owned) {
    NoGradGuard guard;
    slot.add_(g);
  } else if (exclusively_owned(g)) {
    NoGradGuard guard;
    g.add_(slot);
    slot = std::move(g);
    owned = true;
  } else {
    NoGradGuard guard;
    slot = add(slot, g);
    owned = true;
  }
}

void accumulate_leaf(TensorImpl& leaf, Tensor g) {
  NoGradGuard guard;
  if (!leaf.grad) {
    if (!exclusively_owned(g)) g = g.clone();  // .grad must never alias another buffer
    leaf.grad = g.impl();
  } else {
    Tensor(leaf.grad).add_(g);
  }
}
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

// ---------------------------------------------------------------- saved tensors
SavedTensor::SavedTensor(const Tensor& t) {
  if (t.defined()) {
    tensor_ = t.detach();
    version_ = t.version();
  }
}

const Tensor& SavedTensor::get() const {
  if (tensor_.defined() && tensor_.version() != version_)
    fail("backward",
         "one of the tensors needed for gradient computation has been modified by an in-place "
         "operation: a tensor of shape ",
         tensor_.shape(), " was saved at version ", version_, " and is now at version ", tensor_.version(),
         ". Use the out-of-place op (e.g. masked_fill instead of masked_fill_), or clone() "
         "the tensor before modifying it");
  return tensor_;
}

// ---------------------------------------------------------------- recording
bool any_requires_grad(std::initializer_list<Tensor> inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}
bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace detail {
Node::Edge edge_to(const Tensor& t) {
  Node::Edge e;
  if (!t.defined()) return e;
  e.shape = t.shape();
  e.dtype = t.dtype();
  refresh_grad_fn(t.impl());
  if (t.impl()->grad_fn) {
    e.fn = t.impl()->grad_fn;
  } else if (t.impl()->requires_grad) {
    e.leaf = t.impl();
  }
  return e;
}

std::shared_ptr<Node> new_node(const char* name) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->sequence_nr = next_sequence_nr++;
  return node;
}

Tensor attach(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn) {
  if (out.impl()->requires_grad) fail(name, "internal error: the op's output is a leaf that requires grad");
  std::vector<Node::Edge> next;  // before numbering the node: see attach_inplace
  next.reserve(inputs.size());
  for (const Tensor& t : inputs) next.push_back(edge_to(t));
  auto node = new_node(name);
  node->next = std::move(next);
  node->backward = std::move(fn);
  TensorImpl& o = *out.impl();
  o.grad_fn = std::move(node);
  if (o.view_base) {
    // An output made with make_view over the op's own buffer (matmul of a 1-D operand, sdpa) is
    // no view of anything in the graph: a later in-place op must not rebase that buffer. A view
    // of an input made under the op's own NoGradGuard is an ordinary view once recorded.
    if (!o.view_base->requires_grad && !o.view_base->grad_fn) o.view_base.reset();
    o.view_made_without_grad = false;
  }
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------- Grads
bool Grads::wants(std::size_t i) const { return i < node_.next.size() && node_.next[i].wants(); }

void Grads::add(std::size_t i, Tensor g) {
  if (i >= node_.next.size())
    fail(node_.name.c_str(), "backward handed a gradient for input ", i, " but the op has ",
         node_.next.size(), " inputs");
  Node::Edge& e = node_.next[i];
  if (!e.wants()) return;
  if (!g.defined()) return;
  if (g.shape() != e.shape || g.dtype() != e.dtype)
    fail(node_.name.c_str(), "backward produced a gradient of shape ", g.shape(), " (", dtype_name(g.dtype()),
         ") for input ", i, " of shape ", e.shape, " (", dtype_name(e.dtype), ")");
  if (e.fn) {
    accumulate(e.fn->pending, e.fn->pending_owned, std::move(g));
  } else {
    accumulate_leaf(*e.leaf, std::move(g));
  }
}

// ---------------------------------------------------------------- backward
void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  if (!root.defined()) throw Error("backward: called on an undefined tensor");
  if (!root.requires_grad())
    fail("backward", "the tensor (shape ", root.shape(),
         ") does not require grad and has no grad_fn: nothing to differentiate");
  Tensor grad = grad_in;
  if (!grad.defined()) {
    if (root.numel() != 1)
      fail("backward", "grad can be implicitly created only for one-element outputs; got shape ",
           root.shape(), ". Pass a gradient: t.backward(grad)");
    grad = ones(root.shape(), root.dtype());
  } else if (grad.shape() != root.shape() || grad.dtype() != root.dtype()) {
    fail("backward", "gradient of shape ", grad.shape(), " (", dtype_name(grad.dtype()),
         ") does not match the output's shape ", root.shape(), " (", dtype_name(root.dtype()), ")");
  }

  NoGradGuard no_grad;
  if (!root.impl()->grad_fn) {  // a leaf: its gradient is `grad` itself
    accumulate_leaf(*root.impl(), grad.clone());
    return;
  }

  // collect the reachable nodes
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack{root.grad_fn().get()};
  seen.insert(stack.back());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Node::Edge& e : n->next)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  std::sort(order.begin(), order.end(),
            [](const Node* a, const Node* b) { return a->sequence_nr > b->sequence_nr; });

  Node& top = *root.impl()->grad_fn;
  accumulate(top.pending, top.pending_owned, grad);

  for (Node* n : order) {
    if (!n->pending.defined()) continue;  // no gradient flowed into this node
    Tensor dout = std::move(n->pending);
    n->pending = Tensor();
    n->pending_owned = false;
    if (auto kept = n->retained.lock()) {
      Tensor g = dout.clone();
      kept->grad = g.impl();
    }
    if (n->released || !n->backward)
      fail("backward", "trying to backward through the graph a second time (", n->name,
           "'s saved tensors were freed after the first backward). Pass retain_graph=true "
           "to the first backward if you need to call it twice");
    Grads grads(*n);
    {
      profiler::RecordFunction rec(n->name.c_str(), /*backward=*/true);
      n->backward(dout, grads);
    }
    if (!retain_graph) {
      n->backward = nullptr;  // frees the saved tensors
      n->released = true;
    }
  }
}

}  // namespace xgrad
