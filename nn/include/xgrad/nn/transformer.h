// xgrad/nn/transformer.h: GPTConfig, FeedForward and TransformerBlock, as in Raschka's
// "Build a Large Language Model (From Scratch)", ch04 gpt.py (same attribute names, same
// construction order, so manual_seed(123) initialises them like torch).
//
// Differences from the book, kept small on purpose: LayerNorm is torch's nn.LayerNorm
// (parameters "weight"/"bias" where the book's hand-written class says "scale"/"shift"; the
// math, eps = 1e-5 and the biased variance are the same) and GELU is nn.GELU("tanh") (the
// book's formula). To load a checkpoint saved from the book's classes, rename the keys
// ".scale" -> ".weight" and ".shift" -> ".bias".
#pragma once
#include <cstdint>
#include <memory>

#include "xgrad/nn/attention.h"
#include "xgrad/nn/containers.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/module.h"

namespace xgrad::nn {

// GPT_CONFIG_124M by default.
struct GPTConfig {
  int64_t vocab_size = 50257;     // tokens in the BPE vocabulary
  int64_t context_length = 1024;  // longest input
  int64_t emb_dim = 768;
  int64_t n_heads = 12;
  int64_t n_layers = 12;
  double drop_rate = 0.1;
  bool qkv_bias = false;
  bool tie_weights = false;  // out_head.weight is tok_emb.weight (GPT-2), see gpt.h

  // Every field once, by name, in declaration order: f("vocab_size", &GPTConfig::vocab_size),
  // ... What saves, loads, compares or prints a config walks this list, so a new field is
  // one line here (and one above).
  template <class F>
  static void for_each_field(F&& f) {
    f("vocab_size", &GPTConfig::vocab_size);
    f("context_length", &GPTConfig::context_length);
    f("emb_dim", &GPTConfig::emb_dim);
    f("n_heads", &GPTConfig::n_heads);
    f("n_layers", &GPTConfig::n_layers);
    f("drop_rate", &GPTConfig::drop_rate);
    f("qkv_bias", &GPTConfig::qkv_bias);
    f("tie_weights", &GPTConfig::tie_weights);
  }
  bool operator==(const GPTConfig&) const = default;
};

// Throws xgrad::Error naming `who` and the bad field (non-positive sizes, emb_dim not
// divisible by n_heads, drop_rate outside [0, 1]).
void validate(const GPTConfig& cfg, const char* who = "GPTConfig");

// (b, T, emb) -> (b, T, emb): Linear(emb, 4 emb), GELU(tanh), Linear(4 emb, emb).
class FeedForward : public Module {
 public:
  explicit FeedForward(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) override;
  ModuleHolder<Sequential> layers;
};

// Pre-LayerNorm block: x + drop(att(norm1(x))), then x + drop(ff(norm2(x))).
class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) override;  // (b, T, emb) -> (b, T, emb)
  // The same with att's keys and values cached (MultiHeadAttention::forward(x, cache)).
  Tensor forward(const Tensor& x, LayerKVCache& cache);
  ModuleHolder<MultiHeadAttention> att;
  ModuleHolder<FeedForward> ff;
  ModuleHolder<LayerNorm> norm1;
  ModuleHolder<LayerNorm> norm2;
  ModuleHolder<Dropout> drop_shortcut;
};

}  // namespace xgrad::nn
