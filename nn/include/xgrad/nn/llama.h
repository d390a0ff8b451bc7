// xgrad/nn/llama.h: LlamaConfig and LlamaModel, the book's GPT turned into Llama 2 / Llama 3
// (Raschka, "Build a Large Language Model (From Scratch)", ch05/07_gpt_to_llama:
// converting-gpt-to-llama2, converting-llama2-to-llama3, standalone-llama32), with the same
// attribute names and construction order, so manual_seed(123) initialises it like torch.
//
//   manual_seed(123);
//   nn::LlamaModel model(nn::LlamaConfig::llama32_1b());  // 1,235,814,400 parameters (tied)
//   Tensor logits = model(ids);                            // int64 (b, T) -> (b, T, vocab_size)
//   Tensor out = model.generate(ids, 50);                  // greedy, with a KV cache
//
// What changes from GPTModel (gpt.h): no position embedding (rotary embeddings, rope.h, turn
// the queries and keys of every layer instead), RMSNorm instead of LayerNorm, the SwiGLU
// LlamaFeedForward (llama_layers.h), no biases, no dropout, and grouped-query attention:
// n_heads query heads share n_kv_groups key/value heads (n_kv_groups == n_heads is Llama 2's
// plain multi-head attention). Everything is float32 (the book's cfg["dtype"] is bfloat16 to
// save memory; model.to(kFloat64) converts).
//
// State dict keys are the book's: "tok_emb.weight", "trf_blocks.0.att.W_key.weight",
// "trf_blocks.0.att.W_value.weight", "trf_blocks.0.att.W_query.weight",
// "trf_blocks.0.att.out_proj.weight", "trf_blocks.0.ff.fc1.weight" (fc2, fc3),
// "trf_blocks.0.norm1.weight", "trf_blocks.0.norm2.weight", ..., "final_norm.weight",
// "out_head.weight". The RoPE tables are buffers "cos" and "sin" that are not saved
// (persistent=False, as in the book). With tie_weights (Llama 3.2) out_head.weight is
// tok_emb.weight, as for GPTModel: listed once by parameters(), saved under both names.
//
// Llama 2 is this model with n_kv_groups = n_heads and no frequency scaling
// (LlamaConfig::llama2_7b()), i.e. the Llama 3 code path. The book's Llama 2 notebook builds its
// attention as GPT's (W_query, W_key, W_value, so manual_seed draws in another order) and saves
// per-layer mask/cos/sin buffers: its state dict loads with strict = false, the buffers being
// unexpected keys.
//
// Hugging Face checkpoints (model.safetensors, "model.layers.0.self_attn.q_proj.weight", ...)
// load with load_hf_llama; hf_llama_name() is the name map.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/io/safetensors.h"
#include "xgrad/nn/containers.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/nn/layers.h"
#include "xgrad/nn/linear.h"
#include "xgrad/nn/llama_layers.h"
#include "xgrad/nn/module.h"
#include "xgrad/nn/rope.h"

namespace xgrad::nn {

// The book's Llama config dictionary. The defaults are Llama 3.2 1B (LLAMA32_CONFIG); the
// other shapes of the book come from the named presets below. rope_freq and the four rope_*
// numbers after it are the book's cfg["rope_freq"] dictionary (None when rope_freq is false).
struct LlamaConfig {
  int64_t vocab_size = 128'256;        // tokens in the vocabulary
  int64_t context_length = 131'072;    // longest input (the RoPE tables' length)
  int64_t emb_dim = 2048;              // embedding width
  int64_t n_heads = 32;                // query heads
  int64_t n_layers = 16;               // transformer blocks
  int64_t hidden_dim = 8192;           // the feed-forward's inner width
  int64_t n_kv_groups = 8;             // key/value heads, shared by n_heads / n_kv_groups queries each
  double rope_base = 500'000.0;        // RoPE's theta
  bool rope_freq = true;               // Llama 3's RoPE frequency scaling (RoPEFreqConfig, rope.h)
  double rope_factor = 32.0;           // ... its "factor"
  double rope_low_freq_factor = 1.0;   // ... "low_freq_factor"
  double rope_high_freq_factor = 4.0;  // ... "high_freq_factor"
  int64_t rope_original_context_length = 8192;  // ... "original_context_length"
  bool tie_weights = true;                      // out_head.weight is tok_emb.weight (Llama 3.2)

  // The book's configurations (float32 here), with their parameter counts (num_parameters):
  static LlamaConfig llama2_7b();   // LLAMA2_CONFIG_7B: 6,738,415,616; n_kv_groups = n_heads
  static LlamaConfig llama3_8b();   // LLAMA3_CONFIG_8B: 8,030,261,248
  static LlamaConfig llama31_8b();  // LLAMA31_CONFIG_8B: the same, 131,072 tokens, rope scaling 8
  static LlamaConfig llama32_1b();  // LLAMA32_CONFIG (1B): 1,235,814,400 (tied)
  static LlamaConfig llama32_3b();  // LLAMA32_CONFIG (3B): 3,212,749,824 (tied)

  int64_t head_dim() const { return emb_dim / n_heads; }
  // The rope_* fields as compute_rope_params' freq_config; nullopt without rope_freq.
  std::optional<RoPEFreqConfig> rope_freq_config() const;

  // Calls f(LlamaConfigField<T>{...}) for every field, in declaration order, as
  // GPTConfig::for_each_field does (transformer.h): what validates, saves, loads, compares or
  // prints a config walks this table.
  template <class F>
  static void for_each_field(F&& f);
  bool operator==(const LlamaConfig&) const = default;
};

// One row of LlamaConfig's table: the field's name, the member, the closed range [min, max] a
// valid value lies in (numbers only) and what the field means.
template <class T>
struct LlamaConfigField {
  const char* name;
  T LlamaConfig::*member;
  double min, max;
  const char* help;
};

template <class F>
void LlamaConfig::for_each_field(F&& f) {
  using I = LlamaConfigField<int64_t>;
  using D = LlamaConfigField<double>;
  using B = LlamaConfigField<bool>;
  f(I{"vocab_size", &LlamaConfig::vocab_size, 1, 1LL << 31, "tokens in the vocabulary"});
  f(I{"context_length", &LlamaConfig::context_length, 1, 1 << 20, "tokens per window"});
  f(I{"emb_dim", &LlamaConfig::emb_dim, 1, 1 << 20, "embedding width"});
  f(I{"n_heads", &LlamaConfig::n_heads, 1, 1 << 16, "query heads"});
  f(I{"n_layers", &LlamaConfig::n_layers, 1, 1 << 16, "transformer blocks"});
  f(I{"hidden_dim", &LlamaConfig::hidden_dim, 1, 1 << 22, "feed-forward inner width"});
  f(I{"n_kv_groups", &LlamaConfig::n_kv_groups, 1, 1 << 16, "key/value heads (grouped-query attention)"});
  f(D{"rope_base", &LlamaConfig::rope_base, 1, 1e12, "RoPE theta"});
  f(B{"rope_freq", &LlamaConfig::rope_freq, 0, 1, "Llama 3's RoPE frequency scaling"});
  f(D{"rope_factor", &LlamaConfig::rope_factor, 1, 1e6, "RoPE scaling: slow-down of the low frequencies"});
  f(D{"rope_low_freq_factor", &LlamaConfig::rope_low_freq_factor, 0, 1e6, "RoPE scaling: low_freq_factor"});
  f(D{"rope_high_freq_factor", &LlamaConfig::rope_high_freq_factor, 0, 1e6,
      "RoPE scaling: high_freq_factor"});
  f(I{"rope_original_context_length", &LlamaConfig::rope_original_context_length, 1, 1 << 24,
      "RoPE scaling: the pre-training context length"});
  f(B{"tie_weights", &LlamaConfig::tie_weights, 0, 1, "share tok_emb.weight with out_head.weight"});
}

// What is wrong with `cfg` ("" when nothing): the first field outside its range, emb_dim not
// divisible by n_heads, an odd head_dim (RoPE rotates pairs), n_heads not divisible by
// n_kv_groups, or, with rope_freq, rope_low_freq_factor not in (0, rope_high_freq_factor).
// `name` spells a field in the message (its own name by default).
std::string config_problem(const LlamaConfig& cfg, const std::function<std::string(const char*)>& name = {});
// Throws xgrad::Error("<who>: <config_problem>") when there is a problem.
void validate(const LlamaConfig& cfg, const char* who = "LlamaConfig");
// sum(p.numel() for p in LlamaModel(cfg).parameters()) without building the model (the tied
// weight counted once).
int64_t num_parameters(const LlamaConfig& cfg);

// The book's GroupedQueryAttention, (b, T, d_in) -> (b, T, d_out), no biases:
//   queries (b, num_heads, T, head_dim), keys and values (b, num_kv_groups, T, head_dim),
//   queries and keys rotated (apply_rope at their positions), then causal softmax attention in
//   which query head h reads key/value head h / group_size (the book's repeat_interleave).
// Construction order (and state dict order) as the book's: W_key, W_value, W_query, out_proj.
class GroupedQueryAttention : public Module {
 public:
  GroupedQueryAttention(int64_t d_in, int64_t d_out, int64_t num_heads, int64_t num_kv_groups);
  // cos and sin: the model's RoPE tables (compute_rope_params). Without a cache the tokens sit
  // at positions 0 .. T-1. With one, they follow the cache->size() cached tokens: their keys
  // are rotated at positions cache->size() onwards and appended (rotated) with their values,
  // and their queries attend to every cached key and causally among themselves.
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, LayerKVCache* cache = nullptr);
  using Module::forward;  // the one-tensor forward stays visible: it throws, naming this one
  std::string name() const override { return "GroupedQueryAttention"; }

  int64_t d_out;
  int64_t num_heads;
  int64_t head_dim;
  int64_t num_kv_groups;
  int64_t group_size;  // num_heads / num_kv_groups
  ModuleHolder<Linear> W_key, W_value, W_query, out_proj;
};

// The book's Llama TransformerBlock (named apart from GPT's, transformer.h):
//   x + att(norm1(x)), then x + ff(norm2(x)); norms RMSNorm(emb_dim, eps=1e-5).
class LlamaTransformerBlock : public Module {
 public:
  explicit LlamaTransformerBlock(const LlamaConfig& cfg);
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin, LayerKVCache* cache = nullptr);
  using Module::forward;  // the one-tensor forward stays visible: it throws, naming this one
  ModuleHolder<GroupedQueryAttention> att;
  ModuleHolder<LlamaFeedForward> ff;
  ModuleHolder<RMSNorm> norm1;
  ModuleHolder<RMSNorm> norm2;
};

class LlamaModel : public Module {
 public:
  explicit LlamaModel(const LlamaConfig& cfg = LlamaConfig{});
  // in_idx int64 (b, T), T <= context_length, ids in [0, vocab_size) -> logits (b, T, vocab).
  Tensor forward(const Tensor& in_idx) override;
  // The tokens following the cache.size() tokens already in `cache` (positions cache.size()
  // onwards): their rotated keys and their values are added to the cache.
  // cache.size() + T <= context_length.
  Tensor forward(const Tensor& in_idx, KVCache& cache);

  // GPTModel::generate's contract (gpt.h): no-grad, eval mode (restored), the window of the
  // last context_length tokens, sampling by sample_token, `on_logits` sees each step's
  // (b, vocab) logits. With opts.use_kv_cache each step feeds only the new token; once the
  // window slides past context_length every token's position changes, so a full cache is
  // refilled from the window (as the recompute does).
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts = {});
  Tensor generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts, Generator& gen,
                  const std::function<void(const Tensor&)>& on_logits = {});

  const LlamaConfig& config() const { return cfg; }

  LlamaConfig cfg;
  ModuleHolder<Embedding> tok_emb;
  ModuleHolder<ModuleList> trf_blocks;  // of LlamaTransformerBlock
  ModuleHolder<RMSNorm> final_norm;
  ModuleHolder<Linear> out_head;
  Tensor cos, sin;  // (context_length, head_dim) RoPE tables, buffers not saved in state_dict()
};

// ---- Hugging Face checkpoints (transformers' LlamaForCausalLM layout)
//
// The name map, book <- Hugging Face (N = layer):
//   tok_emb.weight                      model.embed_tokens.weight
//   trf_blocks.N.att.W_query.weight     model.layers.N.self_attn.q_proj.weight
//   trf_blocks.N.att.W_key.weight       model.layers.N.self_attn.k_proj.weight
//   trf_blocks.N.att.W_value.weight     model.layers.N.self_attn.v_proj.weight
//   trf_blocks.N.att.out_proj.weight    model.layers.N.self_attn.o_proj.weight
//   trf_blocks.N.ff.fc1.weight          model.layers.N.mlp.gate_proj.weight
//   trf_blocks.N.ff.fc2.weight          model.layers.N.mlp.up_proj.weight
//   trf_blocks.N.ff.fc3.weight          model.layers.N.mlp.down_proj.weight
//   trf_blocks.N.norm1.weight           model.layers.N.input_layernorm.weight
//   trf_blocks.N.norm2.weight           model.layers.N.post_attention_layernorm.weight
//   final_norm.weight                   model.norm.weight
//   out_head.weight                     lm_head.weight (absent when the embeddings are tied)
// Every weight is copied as it is, without a permutation: Hugging Face's q_proj and k_proj
// rows are already in the rotate-half order apply_rope uses (transformers'
// convert_llama_weights_to_hf.py permutes them once, from Meta's interleaved-pair layout, when
// it writes the checkpoint), and the book's Llama 3.2 loader (load_weights_into_llama) copies
// them as they are too. Meta's own consolidated.*.pth layout is not read here.

// The book's name for a Hugging Face tensor name; "" for the rotary tables some checkpoints
// store (".rotary_emb.inv_freq": recomputed here); throws xgrad::Error for any other name.
std::string hf_llama_name(const std::string& hf_name);

// The tensors of a Hugging Face Llama checkpoint renamed to LlamaModel's state dict. Without
// lm_head.weight (tied embeddings) an untied model's out_head.weight is a copy of the
// embeddings, as the book's load_weights_into_llama does; a tied model (cfg.tie_weights)
// refuses an lm_head.weight that differs from the embeddings.
StateDict llama_state_dict_from_hf(const io::NamedTensors& tensors, const LlamaConfig& cfg);

// model.load_state_dict(llama_state_dict_from_hf(load(path).tensors, model.cfg)) (strict):
// reads a Hugging Face model.safetensors into `model`. xgrad's safetensors reader takes F32 and
// F64 tensors (io/safetensors.h): a bfloat16 checkpoint is converted first, e.g. in torch with
// save_file({k: v.float() for k, v in load_file(path).items()}, out).
LoadResult load_hf_llama(LlamaModel& model, const std::filesystem::path& path);
// The same from a checkpoint split into shards (model-00001-of-00002.safetensors, ...): their
// tensors together, as the book combines Llama 3.2 3B's two files.
LoadResult load_hf_llama(LlamaModel& model, const std::vector<std::filesystem::path>& shards);

}  // namespace xgrad::nn
