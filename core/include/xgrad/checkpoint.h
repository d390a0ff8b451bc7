// xgrad/checkpoint.h: activation checkpointing, utils::checkpoint (torch.utils.checkpoint with
// use_reentrant=False, as a user sees it): the forward runs fn without keeping the tensors its
// ops save for backward; the backward runs fn again and backpropagates through that rerun.
// Memory held between forward and backward drops from everything fn saves to fn's inputs and
// outputs, for one more forward of fn in backward.
//
//   // each transformer block keeps only its input (b, T, emb) between forward and backward
//   for (auto& block : blocks)
//     x = utils::checkpoint([&](const Tensor& t) { return block(t); }, x);
//
// How it works on the tape. The forward runs fn once with grad mode on, which records fn's
// graph; the edges from the nodes recorded inside fn to the tensors made before it (the
// inputs, a Module's weights fn uses without receiving them, any outside tensor) are its
// boundary. That inner graph is then dropped (and with it every tensor it saved), and fn's
// outputs get one node, CheckpointBackward, whose edges are the boundary, one per crossing
// edge. Its backward restores the random state fn started with (the default generator's and
// each of options.generators'), runs fn again with grad mode on and under the autocast state
// fn ran under (xgrad/autocast.h), cuts the rerun's crossing edges onto stand-in leaves, and
// runs a nested pass (autograd::grad) from the rerun's outputs (their nodes only: their
// values, the forward's, are released first) to them; it then hands each crossing its
// gradient, in the order the inner nodes would have, so a gradient is summed in the same
// order as without the checkpoint and comes out with the same bits (dropout draws the same
// masks, every op runs on the same values). The one order it cannot see is inside a node: an
// op whose backward hands two of its inputs that are the same tensor (x * x) their gradients
// in reverse input order may round differently.
//
// Contract:
// - fn is called twice (forward and backward) and must compute the same graph from the same
//   inputs and random state both times; a rerun that records a different graph throws. Side
//   effects (a counter, a running statistic) happen twice. The random state is restored only
//   for the rerun: after backward the generators continue where they were.
// - Every output of fn must be a defined tensor. An output not computed inside fn (an input
//   returned as is) and one that does not require grad are returned unchanged.
// - With grad mode off, or when no output depends on a tensor that requires grad, fn simply
//   runs: there is nothing to checkpoint.
// - Hooks: a hook on a checkpoint output or on a boundary tensor (a weight, an input) runs
//   once per backward with the total gradient, as without the checkpoint; a hook registered
//   inside fn is registered again by the rerun and runs there.
// - Gradients reach boundary tensors in backward() and autograd::grad; a pass that creates a
//   graph (create_graph, double backward) through a checkpoint throws.
// - fn must not modify its inputs or other outside tensors in place.
// - fn is kept (copied) until the backward runs it again: what it captures by reference must
//   outlive that backward; capture tensors by value.
#pragma once
#include <functional>
#include <vector>

#include "xgrad/random.h"
#include "xgrad/tensor.h"

namespace xgrad::utils {

struct CheckpointOptions {
  // Restore the default generator's state (and each of `generators'`) for the rerun, so random
  // ops (dropout) draw what they drew in the forward. torch's preserve_rng_state.
  bool preserve_rng_state = true;
  // Generators fn draws from besides the default one; they must outlive the backward.
  std::vector<Generator*> generators;
};

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// outputs = fn(inputs), checkpointed.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});
// One tensor in, one out: a Module's forward.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  const CheckpointOptions& options = {});

}  // namespace xgrad::utils
