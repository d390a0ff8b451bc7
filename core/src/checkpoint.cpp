// core/src/checkpoint.cpp: utils::checkpoint (xgrad/checkpoint.h explains the design).
//
// The nodes recorded while fn runs are told apart from the rest of the tape by their sequence
// numbers: a node numbered just before fn and one just after bracket them. A crossing is an
// edge from such an inner node to a node outside the bracket or to a leaf; crossings are
// listed in the order the backward pass hands gradients along them (newest inner node first,
// then by input position), so the k-th crossing of the forward and of the rerun correspond.
#include "xgrad/checkpoint.h"

#include <algorithm>
#include <memory>
#include <unordered_set>
#include <utility>

#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::utils {

namespace {
const char* kOp = "utils::checkpoint";

// fn(inputs), with every output checked to be defined.
std::vector<Tensor> call(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outputs = fn(inputs);
  for (std::size_t j = 0; j < outputs.size(); ++j)
    if (!outputs[j].defined()) fail(kOp, "fn returned an undefined tensor as output ", j);
  return outputs;
}

// The nodes fn records are numbered in (begin, end).
struct Bracket {
  uint64_t begin = 0, end = 0;
  bool inside(const Node* n) const { return n->sequence_nr > begin && n->sequence_nr < end; }
  bool inside(const Tensor& t) const { return t.grad_fn() && inside(t.grad_fn().get()); }
};

// fn(inputs) with grad mode on, recorded; *bracket is set to the numbers of its nodes.
std::vector<Tensor> record_fn(const CheckpointFn& fn, const std::vector<Tensor>& inputs, Bracket* bracket) {
  AutoGradMode grad_mode(true);
  bracket->begin = detail::new_node("CheckpointBegin")->sequence_nr;
  std::vector<Tensor> outputs = call(fn, inputs);
  bracket->end = detail::new_node("CheckpointEnd")->sequence_nr;
  return outputs;
}

// An edge from an inner node (`from`, input `index`) out of fn's graph.
struct Crossing {
  Node* from;
  std::size_t index;
  const Node::Edge& edge() const { return from->next[index]; }
};

// The crossings of fn's graph; *nodes is set to the number of its nodes reached from the outputs.
std::vector<Crossing> crossings(const std::vector<Tensor>& outputs, const Bracket& bracket,
                                std::size_t* nodes) {
  std::vector<Node*> inner;
  std::unordered_set<Node*> seen;
  for (const Tensor& out : outputs)
    if (bracket.inside(out) && seen.insert(out.grad_fn().get()).second) inner.push_back(out.grad_fn().get());
  for (std::size_t i = 0; i < inner.size(); ++i)
    for (const Node::Edge& e : inner[i]->next)
      if (e.fn && bracket.inside(e.fn.get()) && seen.insert(e.fn.get()).second) inner.push_back(e.fn.get());
  std::sort(inner.begin(), inner.end(),
            [](const Node* a, const Node* b) { return a->sequence_nr > b->sequence_nr; });
  *nodes = inner.size();
  std::vector<Crossing> out;
  for (Node* n : inner)
    for (std::size_t i = 0; i < n->next.size(); ++i) {
      const Node::Edge& e = n->next[i];
      if (e.leaf || (e.fn && !bracket.inside(e.fn.get()))) out.push_back({n, i});
    }
  return out;
}

// What a crossing leads to, to check that the rerun crosses to the same tensors.
struct Target {
  const Node* fn;
  const TensorImpl* leaf;
  bool operator==(const Target&) const = default;
};
Target target_of(const Node::Edge& e) { return {e.fn.get(), e.leaf.get()}; }

// The random states fn started with, and the rerun's fork of them: the saved states are set on
// construction, and the states the generators had before are put back on destruction.
struct RngStates {
  std::vector<Generator*> generators;
  std::vector<std::vector<uint8_t>> states;
};
RngStates save_rng(const CheckpointOptions& options) {
  RngStates s;
  if (!options.preserve_rng_state) return s;
  s.generators.push_back(&default_generator());
  for (Generator* g : options.generators)
    if (g == nullptr) fail(kOp, "options.generators holds a null Generator");
  s.generators.insert(s.generators.end(), options.generators.begin(), options.generators.end());
  for (Generator* g : s.generators) s.states.push_back(g->get_state());
  return s;
}
class RngFork {
 public:
  explicit RngFork(const RngStates& saved) : generators_(saved.generators) {
    for (std::size_t i = 0; i < generators_.size(); ++i) {
      now_.push_back(generators_[i]->get_state());
      generators_[i]->set_state(saved.states[i]);
    }
  }
  ~RngFork() {
    for (std::size_t i = 0; i < generators_.size(); ++i) generators_[i]->set_state(now_[i]);
  }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  std::vector<Generator*> generators_;
  std::vector<std::vector<uint8_t>> now_;
};

// The autocast state fn ran under in the forward, which the rerun in backward (outside the
// forward's guard) runs under again, so that it records the same casts and ops.
struct AutocastState {
  bool enabled;
  DType dtype;
  bool cache_enabled;
  static AutocastState now() {
    return {autocast::is_enabled(), autocast::get_dtype(), autocast::is_cache_enabled()};
  }
};

// What the output nodes leave for the recomputing node: the gradient of each output (undefined
// for an output the pass did not reach, or one not checkpointed).
struct PendingGrads {
  std::vector<Tensor> douts;
};

// Everything the backward needs: fn, its inputs, the random states, which outputs are
// checkpointed, and the forward's crossing targets.
struct Recompute {
  CheckpointFn fn;
  std::vector<Tensor> inputs;
  RngStates rng;
  AutocastState autocast_state;
  std::vector<bool> checkpointed;
  std::vector<Target> targets;
  std::size_t nodes = 0;  // in fn's graph
  std::shared_ptr<PendingGrads> pending;

  // The backward of CheckpointBackward: its edge k is crossing k.
  void operator()(Grads& grads) const {
    if (GradMode::is_enabled())
      fail(kOp,
           "a pass that creates a graph (create_graph=true) cannot go through a checkpoint: "
           "run the model without checkpointing for double backward");
    std::vector<Tensor> douts = std::move(pending->douts);
    pending->douts.assign(checkpointed.size(), Tensor());
    std::vector<std::size_t> wanted;
    for (std::size_t k = 0; k < targets.size(); ++k)
      if (grads.wants(k)) wanted.push_back(k);
    if (wanted.empty()) return;

    Bracket bracket;
    std::vector<Tensor> outputs;
    {
      RngFork fork(rng);
      autocast guard(autocast_state.dtype, autocast_state.enabled, autocast_state.cache_enabled);
      outputs = record_fn(fn, inputs, &bracket);
    }
    if (outputs.size() != checkpointed.size())
      fail(kOp, "fn returned ", outputs.size(), " outputs when recomputed in backward, ", checkpointed.size(),
           " in the forward: fn must compute the same thing both times");
    std::size_t rerun_nodes = 0;
    const std::vector<Crossing> cut = crossings(outputs, bracket, &rerun_nodes);
    bool same = rerun_nodes == nodes && cut.size() == targets.size();
    for (std::size_t k = 0; same && k < cut.size(); ++k) same = target_of(cut[k].edge()) == targets[k];
    if (!same)
      fail(kOp, "fn recorded a different graph when recomputed in backward (", rerun_nodes, " nodes and ",
           cut.size(), " edges to outside tensors, against ", nodes, " and ", targets.size(),
           " in the forward): fn must compute the same thing from the same inputs both times");

    // Cut the rerun's graph off the tape: each wanted crossing now ends at a stand-in leaf (only
    // its identity matters; the edge keeps the real shape for the checks), the others at
    // nothing, so the nested pass stays inside fn's graph and the outer pass's nodes are
    // untouched.
    std::vector<Tensor> stand_ins;
    std::size_t w = 0;
    for (std::size_t k = 0; k < cut.size(); ++k) {
      Node::Edge& e = cut[k].from->next[cut[k].index];
      e.fn = nullptr;
      e.leaf = nullptr;
      if (w < wanted.size() && wanted[w] == k) {
        stand_ins.push_back(zeros({}, e.dtype).requires_grad_());
        e.leaf = stand_ins.back().impl();
        ++w;
      }
    }
    // The pass reads a root's graph, shape and dtype, never its values (the forward's outputs
    // hold those): each root is a stand-in over a single zero that carries the rerun output's
    // node, so the rerun's outputs are released before the pass (unless a node of fn's graph
    // saved one), as fn's output is once its consumers have run without the checkpoint.
    std::vector<Tensor> roots, root_grads;
    for (std::size_t j = 0; j < outputs.size(); ++j)
      if (checkpointed[j] && douts[j].defined() && bracket.inside(outputs[j])) {
        Tensor root = zeros({}, outputs[j].dtype()).expand(outputs[j].shape()).detach();
        root.impl()->grad_fn = outputs[j].grad_fn();
        roots.push_back(std::move(root));
        root_grads.push_back(std::move(douts[j]));
      }
    outputs.clear();
    douts.clear();
    if (roots.empty()) return;
    std::vector<Tensor> g = autograd::grad(roots, stand_ins, root_grads, {.allow_unused = true});
    // moved: a gradient held only here becomes a leaf's .grad without a copy
    for (std::size_t i = 0; i < wanted.size(); ++i) grads.add(wanted[i], std::move(g[i]));
  }
};
}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options) {
  if (!fn) fail(kOp, "fn is empty");
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) fail(kOp, "input ", i, " is an undefined tensor");
  if (!GradMode::is_enabled()) return call(fn, inputs);

  RngStates rng = save_rng(options);
  Bracket bracket;
  std::vector<Tensor> outputs = record_fn(fn, inputs, &bracket);
  std::vector<bool> checkpointed(outputs.size());
  bool any = false;
  for (std::size_t j = 0; j < outputs.size(); ++j) any |= checkpointed[j] = bracket.inside(outputs[j]);
  if (!any) return outputs;

  // One node for the boundary, numbered after fn's: its edges are the crossings.
  auto recompute = detail::new_node("CheckpointBackward");
  auto pending = std::make_shared<PendingGrads>();
  pending->douts.resize(outputs.size());
  Recompute r{fn, inputs, std::move(rng), AutocastState::now(), checkpointed, {}, 0, pending};
  for (const Crossing& c : crossings(outputs, bracket, &r.nodes)) {
    recompute->next.push_back(c.edge());
    r.targets.push_back(target_of(c.edge()));
  }
  recompute->backward = [r = std::move(r)](const Tensor&, Grads& grads) { r(grads); };

  // Each checkpointed output becomes a fresh tensor over the same values whose node keeps its
  // gradient for CheckpointBackward and hands that node a scalar, so it runs after all of them.
  // The outputs of the first run, and with them fn's graph, are released on return.
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (!checkpointed[j]) continue;
    Tensor out = outputs[j].detach();
    auto node = detail::new_node("CheckpointOutputBackward");
    node->next.push_back(Node::Edge{recompute, nullptr, Shape{}, DType::Float32});
    node->backward = [pending, j](const Tensor& dout, Grads& grads) {
      pending->douts[j] = dout;
      grads.add(0, zeros({}));
    };
    node->output = out.unsafe_impl();
    out.impl()->grad_fn = std::move(node);
    outputs[j] = std::move(out);
  }
  return outputs;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options) {
  if (!fn) fail(kOp, "fn is empty");
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input},
                    options)[0];
}

}  // namespace xgrad::utils
