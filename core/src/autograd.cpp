// core/src/autograd.cpp: grad mode, saved tensors, recording nodes, and the backward pass
// (backward() and autograd::grad).
//
// The tape: every node gets the next sequence number when recorded, after the nodes of its
// inputs. A pass collects the nodes reachable from the outputs, sorts them by sequence number
// (newest first) and runs each one whose output received a gradient. A node runs only after
// every node recorded later (its consumers), so its gradient is complete when it runs.
//
// A pass (GraphTask) also:
// - runs a non-leaf's hooks on its node's gradient before the node runs (and keeps a
//   retain_grad() copy at its place among them);
// - sums the gradient of a leaf with hooks over the pass, and runs the hooks and accumulates
//   into .grad once the last node with an edge to that leaf has run (torch's AccumulateGrad
//   is ready then), so its hooks see the total;
// - for autograd::grad, captures the gradients of the inputs instead of accumulating into any
//   .grad, and hands gradients only along edges that lead to an input (Grads::wants is false
//   for the others), so only the nodes on such a path run.
// A leaf without hooks in backward() takes its gradients straight into .grad.
#include <algorithm>
#include <atomic>
#include <unordered_map>
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
// In a pass that creates a graph (grad mode on) the sum is out of place and recorded.
void accumulate(Tensor& slot, bool& owned, Tensor g) {
  if (GradMode::is_enabled()) {
    slot = slot.defined() ? add(slot, g) : std::move(g);
    owned = false;
  } else if (!slot.defined()) {
    owned = exclusively_owned(g);
    slot = std::move(g);
  } else if (owned) {
    slot.add_(g);
  } else if (exclusively_owned(g)) {
    g.add_(slot);
    slot = std::move(g);
    owned = true;
  } else {
    slot = add(slot, g);
    owned = true;
  }
}

// leaf.grad += g. In a pass that creates a graph, torch's AccumulateGrad with grad mode on:
// .grad becomes a recorded copy of g (CopyBackwards), then .grad + g (AddBackward0).
void accumulate_leaf(TensorImpl& leaf, Tensor g) {
  if (GradMode::is_enabled()) {
    if (!leaf.grad) {
      Tensor copy = empty(g.shape(), g.dtype());
      copy.copy_(g);
      leaf.grad = copy.impl();
    } else {
      leaf.grad = add(Tensor(leaf.grad), g).impl();
    }
    return;
  }
  if (!leaf.grad) {
    if (!exclusively_owned(g)) g = g.clone();  // .grad must never alias another buffer
    leaf.grad = g.impl();
  } else {
    Tensor(leaf.grad).add_(g);
  }
}

// The node whose backward is running on this thread (SavedTensor re-attaches its output).
thread_local Node* running_node = nullptr;

class RunningNode {
 public:
  explicit RunningNode(Node* n) : prev_(running_node) { running_node = n; }
  ~RunningNode() { running_node = prev_; }
  RunningNode(const RunningNode&) = delete;
  RunningNode& operator=(const RunningNode&) = delete;

 private:
  Node* prev_;
};
}  // namespace

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

// ---------------------------------------------------------------- saved tensors
SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  tensor_ = t.detach();
  version_ = t.version();
  origin_ = t.unsafe_impl();
  if (const std::shared_ptr<Node>& fn = t.grad_fn()) {
    fn_ = fn;
  } else if (t.impl()->requires_grad) {
    leaf_ = t.impl();
  }
}

Tensor SavedTensor::get() const {
  if (tensor_.defined() && tensor_.version() != version_)
    fail("backward",
         "one of the tensors needed for gradient computation has been modified by an in-place "
         "operation: a tensor of shape ",
         tensor_.shape(), " was saved at version ", version_, " and is now at version ", tensor_.version(),
         ". Use the out-of-place op (e.g. masked_fill instead of masked_fill_), or clone() "
         "the tensor before modifying it");
  if (!GradMode::is_enabled() || !tensor_.defined()) return tensor_;
  return with_history();
}

// The saved tensor as an input of the ops a recording backward runs.
Tensor SavedTensor::with_history() const {
  auto alias = [this](std::shared_ptr<Node> fn) {
    Tensor t = tensor_.detach();
    t.impl()->grad_fn = std::move(fn);
    return t;
  };
  // the running node's own output: saved before the node existed, so re-attached to it now
  if (running_node != nullptr && running_node->output == origin_)
    return alias(running_node->shared_from_this());
  if (leaf_) return Tensor(leaf_);
  if (fn_) return alias(fn_);
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
  if (autograd::AnomalyMode::is_enabled()) record_anomaly_metadata(*node);
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
  node->output = &o;
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

// ---------------------------------------------------------------- the pass
namespace detail {
struct GraphTask {
  bool retain_graph = false;
  bool create_graph = false;  // the closures run with grad mode on (and are recorded)
  // autograd::grad: input positions by the non-leaf's grad_fn or by the leaf; what they got
  bool capture = false;
  std::unordered_map<const Node*, std::vector<std::size_t>> node_inputs;
  std::unordered_map<const TensorImpl*, std::vector<std::size_t>> leaf_inputs;
  std::vector<Tensor> captured;
  std::unordered_set<const Node*> skipped;  // capture: collected nodes that receive nothing
  std::unordered_set<const Node*> running;  // capture: the nodes on a path to an input

  // A leaf whose gradient is summed over the pass (it has hooks, or it is a captured input),
  // and the number of edges into it from nodes that have not run yet.
  struct LeafBuffer {
    Tensor grad;
    bool owned = false;
    int64_t edges = 0;
  };
  std::unordered_map<TensorImpl*, LeafBuffer> buffers;

  bool wants(const Node::Edge& e) const {
    if (!capture) return true;
    if (e.fn) return skipped.count(e.fn.get()) == 0;  // (a node outside the pass, CopySlices' sink: yes)
    return leaf_inputs.count(e.leaf.get()) > 0;
  }
  LeafBuffer* buffer_for(TensorImpl* leaf) {
    if (buffers.empty()) return nullptr;
    auto it = buffers.find(leaf);
    return it == buffers.end() ? nullptr : &it->second;
  }
};

namespace {
thread_local GraphTask* current_task = nullptr;

// The running pass for Grads; restores the outer one (a hook may run a pass of its own).
class TaskScope {
 public:
  explicit TaskScope(GraphTask& task) : prev_(current_task) { current_task = &task; }
  ~TaskScope() { current_task = prev_; }
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;

 private:
  GraphTask* prev_;
};
}  // namespace
}  // namespace detail

// ---------------------------------------------------------------- Grads
Grads::Grads(Node& node) : node_(node), task_(detail::current_task) {}

bool Grads::wants(std::size_t i) const {
  return i < node_.next.size() && node_.next[i].wants() && (task_ == nullptr || task_->wants(node_.next[i]));
}

Tensor Grads::reuse_saved(const SavedTensor& saved) const {
  const Tensor& t = saved.tensor_;
  if (task_ == nullptr || task_->retain_graph || GradMode::is_enabled() || !t.defined() ||
      t.version() != saved.version_ || !exclusively_owned(t))
    return Tensor();
  return t;
}

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
  if (autograd::AnomalyMode::is_enabled()) detail::check_anomaly(node_, i, g);
  if (task_ != nullptr && !task_->wants(e)) return;
  if (e.fn) {
    accumulate(e.fn->pending, e.fn->pending_owned, std::move(g));
  } else if (auto* buffer = task_ != nullptr ? task_->buffer_for(e.leaf.get()) : nullptr) {
    accumulate(buffer->grad, buffer->owned, std::move(g));
  } else {
    accumulate_leaf(*e.leaf, std::move(g));
  }
}

// ---------------------------------------------------------------- running a pass
namespace {
using detail::GraphTask;

bool has_hooks(const std::shared_ptr<detail::TensorHooks>& hooks) { return hooks && !hooks->fns.empty(); }

// torch's retain_grad: the first pass stores a copy, later ones add to it.
void retain(TensorImpl& t, const Tensor& g) {
  if (!t.grad) {
    t.grad = g.clone().impl();
  } else {
    t.grad = add(Tensor(t.grad), g).impl();
  }
}

// A node's gradient before the node runs: the output's hooks, with the retain_grad() copy
// before or after them (torch 1.13 keeps it where the retain_grad hook sits in the node's
// pre-hooks: first, unless a tensor hook was registered before retain_grad()). autograd::grad
// leaves retained gradients alone.
Tensor node_pre_hooks(const GraphTask& task, Node& n, Tensor dout) {
  std::shared_ptr<TensorImpl> kept = task.capture ? nullptr : n.retained.lock();
  if (kept && n.retain_first) retain(*kept, dout);
  if (has_hooks(n.hooks)) dout = detail::run_hooks(*n.hooks, std::move(dout));
  if (kept && !n.retain_first) retain(*kept, dout);
  return dout;
}

// A buffered leaf whose last edge has run: its hooks see the total, then it is accumulated
// into .grad (backward) or captured (autograd::grad).
void flush_leaf(GraphTask& task, TensorImpl* leaf, GraphTask::LeafBuffer& buffer) {
  Tensor g = std::move(buffer.grad);
  buffer.grad = Tensor();
  if (!g.defined()) return;
  if (has_hooks(leaf->hooks)) g = detail::run_hooks(*leaf->hooks, std::move(g));
  if (!task.capture) {
    accumulate_leaf(*leaf, std::move(g));
    return;
  }
  for (std::size_t pos : task.leaf_inputs.at(leaf)) task.captured[pos] = g;
}

// The nodes reachable from the outputs, newest first; counts the edges into buffered leaves.
std::vector<Node*> collect(GraphTask& task, const std::vector<Tensor>& outputs) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Tensor& out : outputs)
    if (Node* fn = out.grad_fn().get(); fn && seen.insert(fn).second) stack.push_back(fn);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Node::Edge& e : n->next) {
      if (e.fn) {
        if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
      } else if (e.leaf &&
                 (task.capture ? task.leaf_inputs.count(e.leaf.get()) > 0 : has_hooks(e.leaf->hooks))) {
        ++task.buffers[e.leaf.get()].edges;
      }
    }
  }
  std::sort(order.begin(), order.end(),
            [](const Node* a, const Node* b) { return a->sequence_nr > b->sequence_nr; });
  return order;
}

// autograd::grad: finds the nodes that run (an input is reached through their edges) and
// those that receive nothing (they do not run and are no input's grad_fn), oldest first so a
// node's inputs are decided before it; fails for an input the outputs do not reach.
void plan_capture(GraphTask& task, const std::vector<Node*>& order, const std::vector<Tensor>& outputs,
                  const std::vector<Tensor>& inputs, bool allow_unused) {
  std::unordered_set<const Node*> reached_fns;
  std::unordered_set<const TensorImpl*> reached_leaves;
  for (const Tensor& out : outputs)
    if (!out.grad_fn()) reached_leaves.insert(out.impl().get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node* n = *it;
    reached_fns.insert(n);
    bool runs = false;
    for (const Node::Edge& e : n->next) {
      if (e.leaf) reached_leaves.insert(e.leaf.get());
      if (e.fn ? task.skipped.count(e.fn.get()) == 0 : (e.leaf && task.leaf_inputs.count(e.leaf.get()) > 0))
        runs = true;
    }
    if (runs) {
      task.running.insert(n);
    } else if (task.node_inputs.count(n) == 0) {
      task.skipped.insert(n);
    }
  }
  if (allow_unused) return;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const bool reached =
        x.grad_fn() ? reached_fns.count(x.grad_fn().get()) > 0 : reached_leaves.count(x.impl().get()) > 0;
    if (!reached)
      fail("autograd::grad", "input ", i, " (shape ", x.shape(),
           ") is not reached from the outputs: they do not depend on it. Pass allow_unused=true "
           "to get an undefined Tensor for it");
  }
}

// Runs the pass: the outputs' gradients in, every reached node once, newest first.
void execute(GraphTask& task, const std::vector<Tensor>& outputs, const std::vector<Tensor>& grads,
             const std::vector<Node*>& order) {
  // Backward closures run with grad mode off, so the gradients they hand on carry no history,
  // unless the pass creates a graph: then every op they call (and every sum of gradients) is
  // recorded, and the gradients can be differentiated again.
  AutoGradMode grad_mode(task.create_graph);
  detail::TaskScope scope(task);
  try {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const Node::Edge e = detail::edge_to(outputs[i]);
      if (!task.wants(e)) continue;
      if (e.fn) {
        accumulate(e.fn->pending, e.fn->pending_owned, grads[i]);
      } else if (auto* buffer = task.buffer_for(e.leaf.get())) {
        accumulate(buffer->grad, buffer->owned, grads[i]);
      } else {
        accumulate_leaf(*e.leaf, grads[i]);
      }
    }
    for (auto& [leaf, buffer] : task.buffers)  // leaves among the outputs that no node reaches
      if (buffer.edges == 0) flush_leaf(task, leaf, buffer);

    for (Node* n : order) {
      if (n->pending.defined()) {
        Tensor dout = std::move(n->pending);
        n->pending = Tensor();
        n->pending_owned = false;
        if (has_hooks(n->hooks) || !n->retained.expired()) dout = node_pre_hooks(task, *n, std::move(dout));
        if (task.capture)
          if (auto it = task.node_inputs.find(n); it != task.node_inputs.end())
            for (std::size_t pos : it->second) task.captured[pos] = dout;
        if (!task.capture || task.running.count(n) > 0) {
          if (n->released || !n->backward)
            fail("backward", "trying to backward through the graph a second time (", n->name,
                 "'s saved tensors were freed after the first backward). Pass retain_graph=true "
                 "to the first backward if you need to call it twice");
          Grads grads(*n);
          {
            RunningNode running(n);
            profiler::RecordFunction rec(n->name.c_str(), /*backward=*/true);
            n->backward(dout, grads);
          }
          if (!task.retain_graph) {
            n->backward = nullptr;  // frees the saved tensors
            n->released = true;
          }
        }
      }
      if (!task.buffers.empty())
        for (const Node::Edge& e : n->next)
          if (auto* buffer = e.leaf ? task.buffer_for(e.leaf.get()) : nullptr)
            if (--buffer->edges == 0) flush_leaf(task, e.leaf.get(), *buffer);
    }
  } catch (...) {
    // a failed pass leaves no gradient behind for the next one to add to
    for (Node* n : order) {
      n->pending = Tensor();
      n->pending_owned = false;
    }
    throw;
  }
}

// The gradient of output i: the given one (checked), or ones for a one-element output.
Tensor output_grad(const char* op, std::size_t i, const Tensor& out, const Tensor& given) {
  if (!out.defined()) fail(op, "output ", i, " is an undefined tensor");
  if (!out.requires_grad())
    fail(op, "output ", i, " (shape ", out.shape(),
         ") does not require grad and has no grad_fn: nothing to differentiate");
  if (!given.defined()) {
    if (out.numel() != 1)
      fail(op, "grad can be implicitly created only for one-element outputs; output ", i, " has shape ",
           out.shape(), ". Pass its gradient (grad_outputs)");
    return ones(out.shape(), out.dtype());
  }
  if (given.shape() != out.shape() || given.dtype() != out.dtype())
    fail(op, "gradient ", i, " of shape ", given.shape(), " (", dtype_name(given.dtype()),
         ") does not match output ", i, "'s shape ", out.shape(), " (", dtype_name(out.dtype()), ")");
  return given;
}
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph, bool create_graph) {
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
  GraphTask task;
  task.retain_graph = retain_graph;
  task.create_graph = create_graph;
  const std::vector<Tensor> outputs{root};
  if (!root.grad_fn() && has_hooks(root.impl()->hooks)) task.buffers[root.impl().get()];  // a leaf root
  const std::vector<Node*> order = collect(task, outputs);
  execute(task, outputs, {grad}, order);
}

namespace autograd {
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions options) {
  const char* op = "autograd::grad";
  if (outputs.empty()) fail(op, "no outputs to differentiate");
  if (inputs.empty()) fail(op, "no inputs to differentiate with respect to");
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    fail(op, "got ", grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Tensor> grads;
  grads.reserve(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i)
    grads.push_back(output_grad(op, i, outputs[i], grad_outputs.empty() ? Tensor() : grad_outputs[i]));

  GraphTask task;
  task.retain_graph = options.retain_graph.value_or(options.create_graph);
  task.create_graph = options.create_graph;
  task.capture = true;
  task.captured.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined()) fail(op, "input ", i, " is an undefined tensor");
    if (!x.requires_grad()) fail(op, "input ", i, " (shape ", x.shape(), ") does not require grad");
    if (const auto& fn = x.grad_fn()) {
      task.node_inputs[fn.get()].push_back(i);
    } else {
      task.leaf_inputs[x.impl().get()].push_back(i);
      task.buffers[x.impl().get()];
    }
  }
  const std::vector<Node*> order = collect(task, outputs);
  plan_capture(task, order, outputs, inputs, options.allow_unused);
  execute(task, outputs, grads, order);
  if (!options.allow_unused)
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (!task.captured[i].defined())
        fail(op, "input ", i, " (shape ", inputs[i].shape(),
             ") received no gradient: the outputs reach it, but no backward on the way produced "
             "one. Pass allow_unused=true to get an undefined Tensor for it");
  return std::move(task.captured);
}
}  // namespace autograd

}  // namespace xgrad
