// xgrad/autograd.h: the tape.
//
// Every differentiable op, after computing its result, calls record(): if grad mode is on and
// an input requires grad, a Node is attached to the result. Nodes are numbered in execution
// order (the tape); backward() collects the nodes reachable from the loss and replays them in
// reverse order of that number, so each node runs after every op that consumed its output.
// The graph is owned by the tensors that hold it: a result dropped without backward frees
// its nodes at once.
//
// Writing an op (see core/src/ops/elementwise.cpp for many):
//
//   Tensor mul(const Tensor& a, const Tensor& b) {
//     Tensor out = ...forward...;
//     return record("MulBackward0", out, {a, b},
//                   [a = save(a), b = save(b)](const Tensor& dout, Grads& grads) {
//       // in the forward pass out = a * b, so da = dout * b and db = dout * a
//       if (grads.wants(0)) grads.add(0, sum_to(dout * b.get(), a.get().shape()));
//       if (grads.wants(1)) grads.add(1, sum_to(dout * a.get(), b.get().shape()));
//     });
//   }
//
// Backward closures run with grad mode off, may use any op, and must hand each input a
// gradient of exactly that input's shape and dtype (Grads::add checks it).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad {

// ---- grad mode
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// RAII: no recording inside its scope (like `with torch.no_grad():`).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// A tensor kept for backward. Holds a detached handle (so saving an op's own output makes no
// reference cycle) and the storage version at save time; get() throws if the tensor was
// modified in place since.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  const Tensor& get() const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
};
inline SavedTensor save(const Tensor& t) { return SavedTensor(t); }

// What a backward closure hands gradients to.
class Grads {
 public:
  bool wants(std::size_t input) const;       // does input i need a gradient?
  void add(std::size_t input, Tensor grad);  // accumulate d(loss)/d(input i)

  // internals
  explicit Grads(Node& node) : node_(node) {}

 private:
  Node& node_;
};

using BackwardFn = std::function<void(const Tensor& dout, Grads& grads)>;

// One recorded op.
struct Node {
  struct Edge {
    std::shared_ptr<Node> fn;          // producer of the input (non-leaf), or
    std::shared_ptr<TensorImpl> leaf;  // the leaf whose .grad receives the gradient
    Shape shape;                       // the input's shape and dtype, for checks
    DType dtype = DType::Float32;
    bool wants() const { return fn != nullptr || leaf != nullptr; }
  };

  std::string name;                    // "MulBackward0"
  uint64_t sequence_nr = 0;            // position on the tape
  std::vector<Edge> next;              // one per input
  BackwardFn backward;                 // empty once released
  bool released = false;               // ran without retain_graph
  std::weak_ptr<TensorImpl> retained;  // output that asked retain_grad()

  // filled during backward: the gradient of this node's output
  Tensor pending;
  bool pending_owned = false;
};

bool any_requires_grad(std::initializer_list<Tensor> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);

namespace detail {
Tensor attach(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn);
Tensor& attach_inplace(const char* name, Tensor& self, const std::vector<Tensor>& others, BackwardFn fn);
Node::Edge edge_to(const Tensor& t);               // the edge into t's history (none: empty)
std::shared_ptr<Node> new_node(const char* name);  // named and numbered on the tape
// A view whose storage was written since its grad_fn was made gets a new one from its base's
// history (core/src/inplace.cpp explains); everything that reads a grad_fn calls this first.
void regenerate_view_grad_fn(const std::shared_ptr<TensorImpl>& view);
inline void refresh_grad_fn(const std::shared_ptr<TensorImpl>& t) {
  if (t->view_base && t->view_version != t->storage->version) regenerate_view_grad_fn(t);
}
}  // namespace detail

// Attach a node to `out` when grad mode is on and some input requires grad; return `out`.
// The closure is only converted (and its captures kept) when a node is made.
template <class F>
Tensor record(const char* name, Tensor out, std::initializer_list<Tensor> inputs, F&& fn) {
  if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return out;
  return detail::attach(name, out, std::vector<Tensor>(inputs), BackwardFn(std::forward<F>(fn)));
}
template <class F>
Tensor record(const char* name, Tensor out, const std::vector<Tensor>& inputs, F&& fn) {
  if (!GradMode::is_enabled() || !any_requires_grad(inputs)) return out;
  return detail::attach(name, out, inputs, BackwardFn(std::forward<F>(fn)));
}

// For in-place ops: `self` was just modified in place (and its version bumped). The node's
// input 0 is self's previous values, inputs 1.. are `others`. When self is a view, its base's
// history is rebased (CopySlices) and self's grad_fn regenerated (core/src/inplace.cpp).
template <class F>
Tensor& record_inplace(const char* name, Tensor& self, std::initializer_list<Tensor> others, F&& fn) {
  if (!GradMode::is_enabled() || !(self.requires_grad() || any_requires_grad(others))) return self;
  return detail::attach_inplace(name, self, std::vector<Tensor>(others), BackwardFn(std::forward<F>(fn)));
}

// For in-place ops recorded with record_inplace: call it before writing, with the op's other
// tensor inputs. With grad mode on, throws (as torch does) for a leaf that requires grad or a
// view of one, and for a view made under NoGradGuard of a tensor that requires grad.
void check_recorded_inplace(const char* op, const Tensor& self, std::initializer_list<Tensor> others = {});

// For in-place ops that record nothing: with grad mode on, throws a clear error if `self`
// requires grad (a tensor in the graph whose history the op would silently falsify).
void check_inplace(const char* op, const Tensor& self);

// For ops that write different values to different elements: throws if `self` is an expanded
// view (a stride-0 dim of size > 1), as torch does (fill_ and zero_ do not need it).
void check_no_internal_overlap(const char* op, const Tensor& self);

// Runs backward from `root` with the given output gradient.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace xgrad
