// xgrad/nn/gpt.h: GPTModel, Raschka's ch04 GPT-2 (tok_emb, pos_emb, drop_emb, trf_blocks,
// final_norm, out_head). With the default GPTConfig it has 163,009,536 parameters (the
// output head is not tied to tok_emb, as in the book).
//
//   manual_seed(123);
//   nn::GPTModel model(nn::GPTConfig{});        // same weights as torch's GPTModel(cfg)
//   Tensor logits = model(ids);                  // ids int64 (b, T) -> (b, T, vocab_size)
//
// GPTConfig{.tie_weights = true} shares tok_emb.weight with out_head.weight as GPT-2 does
// (124M: 124,412,160 parameters): one tensor, which receives the gradients of both uses;
// parameters() lists it once (so optimizers step it once and num_parameters() counts it once,
// like torch's sum(p.numel() for p in model.parameters())); state_dict() has both names, as
// torch's does, and load_state_dict() accepts both names or either one.
//
// State dict keys are torch's for the same structure: "tok_emb.weight",
// "trf_blocks.0.att.W_query.weight", "trf_blocks.0.att.mask", "trf_blocks.0.norm1.weight",
// "trf_blocks.0.ff.layers.0.weight", ..., "final_norm.bias", "out_head.weight" (see
// transformer.h for the LayerNorm naming).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "xgrad/nn/containers.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/module.h"
#include "xgrad/nn/sampling.h"
#include "xgrad/nn/transformer.h"

namespace xgrad::nn {

// Every layer's keys and values for generation: layers[i] belongs to trf_blocks[i].
struct KVCache {
  std::vector<LayerKVCache> layers;
  int64_t size() const { return layers.empty() ? 0 : layers.front().size(); }  // tokens cached
  void reset() { layers.clear(); }
};

struct GenerateOptions {
  double temperature = 0.0;  // SamplingOptions (sampling.h): 0 = greedy, as the book's generate()
  int64_t top_k = 0;
  double top_p = 1.0;
  std::optional<uint64_t> seed;  // a Generator(seed) for the draws; none = the default generator
  bool use_kv_cache = true;      // false: recompute the whole window for every token
};

class GPTModel : public Module {
 public:
  explicit GPTModel(const GPTConfig& cfg = GPTConfig{});
  // in_idx int64 (b, T), T <= context_length, ids in [0, vocab_size) -> logits (b, T, vocab).
  Tensor forward(const Tensor& in_idx) override;
  // The tokens following the cache.size() tokens already in `cache` (positions cache.size()
  // onwards): their keys and values are added to the cache. cache.size() + T <= context_length.
  Tensor forward(const Tensor& in_idx, KVCache& cache);

  // Autoregressive generation under no-grad and in eval mode (the mode is restored):
  // idx int64 (b, T) -> (b, T + max_new_tokens), each new token drawn by sample_token from
  // the logits of the last position of the window (the last context_length tokens), per row.
  // With opts.use_kv_cache (the default) each step feeds only the new token through the
  // blocks, reusing the cached keys/values; its logits equal the full recompute's (up to float
  // rounding). Past context_length the window slides by one token per step, and since GPT-2's
  // position embeddings are absolute every token's position (and so every cached key and
  // value) changes: when the cache is full it is refilled from the window's last
  // context_length tokens (one full forward per token from then on, like the recompute).
  // `on_logits`, when given, sees each step's (b, vocab) logits before sampling.
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts = {});
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts, Generator& gen,
                  const std::function<void(const Tensor&)>& on_logits = {});

  GPTConfig cfg;
  ModuleHolder<Embedding> tok_emb;
  ModuleHolder<Embedding> pos_emb;
  ModuleHolder<Dropout> drop_emb;
  ModuleHolder<Sequential> trf_blocks;  // of TransformerBlock: trf_blocks->at<TransformerBlock>(0)
  ModuleHolder<LayerNorm> final_norm;
  ModuleHolder<Linear> out_head;
};

}  // namespace xgrad::nn
