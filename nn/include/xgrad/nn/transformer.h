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
#include <functional>
#include <memory>
#include <string>

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
  // In training, each block runs through utils::checkpoint: its activations are recomputed in
  // backward instead of kept (same gradients, less memory, one more forward of the blocks).
  bool activation_checkpointing = false;

  // Calls f(GPTConfigField<T>{...}) for every field, in declaration order (below). What
  // validates, saves, loads, compares or prints a config, or makes a command-line flag of a
  // field, walks this table, so a new field is one member above and one row there.
  template <class F>
  static void for_each_field(F&& f);
  bool operator==(const GPTConfig&) const = default;
};

// One row of GPTConfig's table: the field's name (its key in a saved config), the member, the
// closed range [min, max] a valid value lies in (numbers only: a bool takes both values) and
// what the field means.
template <class T>
struct GPTConfigField {
  const char* name;
  T GPTConfig::*member;
  double min, max;
  const char* help;
};

template <class F>
void GPTConfig::for_each_field(F&& f) {
  using I = GPTConfigField<int64_t>;
  f(I{"vocab_size", &GPTConfig::vocab_size, 1, 1LL << 31, "tokens in the vocabulary"});
  f(I{"context_length", &GPTConfig::context_length, 1, 1 << 20, "tokens per window"});
  f(I{"emb_dim", &GPTConfig::emb_dim, 1, 1 << 20, "embedding width"});
  f(I{"n_heads", &GPTConfig::n_heads, 1, 1 << 16, "attention heads"});
  f(I{"n_layers", &GPTConfig::n_layers, 1, 1 << 16, "transformer blocks"});
  // torch's nn.Dropout range
  f(GPTConfigField<double>{"drop_rate", &GPTConfig::drop_rate, 0, 1, "dropout probability"});
  f(GPTConfigField<bool>{"qkv_bias", &GPTConfig::qkv_bias, 0, 1, "bias in the query/key/value projections"});
  f(GPTConfigField<bool>{"tie_weights", &GPTConfig::tie_weights, 0, 1,
                         "share tok_emb.weight with out_head.weight, as GPT-2 does"});
  f(GPTConfigField<bool>{"activation_checkpointing", &GPTConfig::activation_checkpointing, 0, 1,
                         "in training, recompute each transformer block's activations in backward "
                         "instead of keeping them (less memory, same gradients)"});
}

// What is wrong with `cfg` ("" when nothing): the first field outside its range ("n_heads
// must be in [1, 65536], got 0"), or emb_dim not divisible by n_heads. `name` spells a field
// in the message (the field's own name by default; train_lm says "--n-heads").
std::string config_problem(const GPTConfig& cfg, const std::function<std::string(const char*)>& name = {});
// Throws xgrad::Error("<who>: <config_problem>") when there is a problem.
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
