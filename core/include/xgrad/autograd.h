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
// Backward closures may use any op, and must hand each input a gradient of exactly that
// input's shape and dtype (Grads::add checks it). They run with grad mode off, unless the pass
// was asked to create a graph (backward(..., create_graph=true), GradOptions::create_graph):
// then grad mode is on and every op they call is recorded, so the gradients they hand on can
// be differentiated again. A closure may keep a fused kernel for the grad-mode-off path, but
// with grad mode on it must compute with recorded ops (or record a node of its own).
//
// Also here: autograd::grad (torch.autograd.grad), the gradient hooks' storage
// (Tensor::register_hook, core/src/hooks.cpp) and anomaly mode (autograd::DetectAnomalyGuard,
// core/src/anomaly.cpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
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

// RAII: grad mode set to `enabled` inside its scope, the previous state restored after
// (libtorch's AutoGradMode; `with torch.set_grad_enabled(enabled):`).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
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

// A tensor kept for backward, and the storage version at save time: get() throws if the
// tensor was modified in place since. It holds a detached handle, so saving an op's own output
// makes no reference cycle (output -> grad_fn -> saved output), and with grad mode off get()
// returns that handle. With grad mode on (a pass that creates a graph) get() returns the
// tensor with its history, as torch's SavedVariable unpacks it: a leaf that requires grad is
// itself, an input with a grad_fn is an alias carrying that grad_fn, and the output of the
// node whose backward is running is an alias carrying that node.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor get() const;
  bool defined() const { return tensor_.defined(); }

 private:
  Tensor with_history() const;
  friend class Grads;  // reuse_saved

  Tensor tensor_;
  uint64_t version_ = 0;
  const TensorImpl* origin_ = nullptr;  // identity of the saved tensor, to recognise an op's output
  std::shared_ptr<Node> fn_;            // its grad_fn at save time, if any
  std::shared_ptr<TensorImpl> leaf_;    // the tensor itself when it is a leaf that requires grad
};
inline SavedTensor save(const Tensor& t) { return SavedTensor(t); }

namespace detail {
struct GraphTask;  // one run of the backward pass (core/src/autograd.cpp)

// The gradient hooks of one tensor, in registration order: a leaf's on its TensorImpl, a
// non-leaf's on its grad_fn. Handles remove by id.
struct TensorHooks {
  std::vector<std::pair<uint64_t, std::function<Tensor(const Tensor&)>>> fns;
  uint64_t next_id = 0;
};

// Where a node was recorded, kept while anomaly mode is on: the module whose forward was
// running (its dotted path from the outermost module called, and its class), if any.
struct AnomalyMetadata {
  bool in_module = false;
  std::string module_path;  // "trf_blocks.1.att"; "" for the outermost module itself
  std::string module_type;  // "MultiHeadAttention"
};
}  // namespace detail

// What a backward closure hands gradients to.
class Grads {
 public:
  bool wants(std::size_t input) const;       // does input i need a gradient?
  void add(std::size_t input, Tensor grad);  // accumulate d(loss)/d(input i)
  // The tensor `saved` holds, for the backward to write its result over (a gradient of the
  // same shape and dtype, each element read before it is written), when nothing can read it
  // again: this pass frees the node's saved tensors once it has run (no retain_graph, grad
  // mode off), and the saved tensor is the only handle on a contiguous buffer it covers
  // exactly (the caller kept no tensor or view of it). Else undefined: allocate as usual.
  Tensor reuse_saved(const SavedTensor& saved) const;

  // internals
  explicit Grads(Node& node);

 private:
  Node& node_;
  detail::GraphTask* task_;  // the running pass (null outside one)
};

using BackwardFn = std::function<void(const Tensor& dout, Grads& grads)>;

// One recorded op.
struct Node : std::enable_shared_from_this<Node> {
  struct Edge {
    std::shared_ptr<Node> fn;          // producer of the input (non-leaf), or
    std::shared_ptr<TensorImpl> leaf;  // the leaf whose .grad receives the gradient
    Shape shape;                       // the input's shape and dtype, for checks
    DType dtype = DType::Float32;
    bool wants() const { return fn != nullptr || leaf != nullptr; }
  };

  std::string name;                                  // "MulBackward0"
  uint64_t sequence_nr = 0;                          // position on the tape
  std::vector<Edge> next;                            // one per input
  BackwardFn backward;                               // empty once released
  bool released = false;                             // ran without retain_graph
  std::weak_ptr<TensorImpl> retained;                // output that asked retain_grad()
  bool retain_first = true;                          // retain_grad() came before the first hook (hooks.cpp)
  std::shared_ptr<detail::TensorHooks> hooks;        // the output's register_hook()s
  std::unique_ptr<detail::AnomalyMetadata> anomaly;  // recorded while anomaly mode is on
  const TensorImpl* output = nullptr;                // identity of the tensor it produced (SavedTensor)

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

// Runs backward from `root` with the given output gradient (Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph, bool create_graph = false);

namespace autograd {

struct GradOptions {
  // keep the graph (its saved tensors) for another pass; unset: as create_graph
  std::optional<bool> retain_graph = std::nullopt;
  // record the backward itself, so the gradients returned can be differentiated again
  bool create_graph = false;
  bool allow_unused = false;  // an input the outputs do not depend on gets an undefined Tensor
};

// torch.autograd.grad: the gradients of sum_i <outputs[i], grad_outputs[i]> with respect to
// each of `inputs` (leaves or intermediate tensors), in order, without touching any .grad()
// (of leaves or of retained non-leaves). Only the nodes on a path to an input run. An output
// with one element may omit its grad_output (an empty list, or an undefined Tensor); any
// other needs one of its shape and dtype. The inputs' hooks (Tensor::register_hook) run, and
// so do those of the tensors on the way. Throws xgrad::Error, before anything runs, for an
// input the outputs do not depend on (unless allow_unused), and after the pass for one that
// received no gradient. With create_graph the backward is recorded and the gradients carry
// grad_fns (torch's names), so they can be differentiated again (a gradient penalty, a
// Hessian-vector product); without it they carry no history.
//   std::vector<Tensor> g = autograd::grad({loss}, {w, h});   // g[0] = dloss/dw, g[1] = dloss/dh
//   Tensor gx = autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
//   autograd::grad({gx.pow(2).sum()}, {w});                    // d/dw of a gradient penalty
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, GradOptions options = {});

// Anomaly mode (torch.autograd.set_detect_anomaly; libtorch's AnomalyMode), global like
// torch's. While it is on, every node records where it was made (the module path, when the op
// ran inside an nn::Module's forward), and a backward node that returns a gradient containing
// NaN throws xgrad::Error naming that node, the input, the forward op and that module
// ("DivBackward0 returned nan in its 0th output ... in module trf_blocks.1.att"). Off, it costs
// one relaxed load per recorded node and per gradient handed on.
namespace detail {
inline std::atomic<bool> anomaly_enabled{false};
}
struct AnomalyMode {
  static bool is_enabled() { return detail::anomaly_enabled.load(std::memory_order_relaxed); }
  static void set_enabled(bool enabled) { detail::anomaly_enabled.store(enabled, std::memory_order_relaxed); }
};

// RAII: anomaly mode on inside its scope, the previous state restored after (so guards nest).
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

namespace detail {
// The module whose forward is running, for anomaly metadata: nn::Module's call pushes one
// while anomaly mode is on (the innermost is current), and pops it when forward returns.
struct ModuleFrame {
  const void* module = nullptr;  // the nn::Module
  std::string path;              // dotted, from the outermost module called ("" for it)
  std::string type;              // its class name
};
class ModuleScope {
 public:
  explicit ModuleScope(ModuleFrame frame);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  ModuleFrame frame_;
};
const ModuleFrame* current_module();  // null outside any module's forward (or anomaly mode)
}  // namespace detail

}  // namespace autograd

namespace detail {
// hooks.cpp: runs `hooks` on grad in order, each replacement checked against grad's shape and dtype
Tensor run_hooks(const TensorHooks& hooks, Tensor grad);
// anomaly.cpp: fills node.anomaly (called for every new node while anomaly mode is on), and
// throws when `grad`, node's gradient for its input i, contains NaN
void record_anomaly_metadata(Node& node);
void check_anomaly(const Node& node, std::size_t input, const Tensor& grad);
}  // namespace detail

}  // namespace xgrad
