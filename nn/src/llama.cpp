// nn/src/llama.cpp: LlamaConfig (presets, validation, parameter count), GroupedQueryAttention,
// LlamaTransformerBlock and LlamaModel. Each forward mirrors the book's code (comments give the
// shapes); the Hugging Face name map is in llama_hf.cpp.
// reference: rasbt/LLMs-from-scratch, ch05/07_gpt_to_llama/standalone-llama32.ipynb and
// pkg/llms_from_scratch/kv_cache/llama3.py
#include "xgrad/nn/llama.h"

#include <sstream>

#include "generation.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

// ---------------------------------------------------------------- LlamaConfig
LlamaConfig LlamaConfig::llama2_7b() {
  return {.vocab_size = 32'000,
          .context_length = 4096,
          .emb_dim = 4096,
          .n_heads = 32,
          .n_layers = 32,
          .hidden_dim = 11'008,
          .n_kv_groups = 32,
          .rope_base = 10'000.0,
          .rope_freq = false,
          .tie_weights = false};
}

LlamaConfig LlamaConfig::llama3_8b() {
  return {.vocab_size = 128'256,
          .context_length = 8192,
          .emb_dim = 4096,
          .n_heads = 32,
          .n_layers = 32,
          .hidden_dim = 14'336,
          .n_kv_groups = 8,
          .rope_base = 500'000.0,
          .rope_freq = false,
          .tie_weights = false};
}

LlamaConfig LlamaConfig::llama31_8b() {
  LlamaConfig cfg = llama3_8b();
  cfg.context_length = 131'072;
  cfg.rope_freq = true;
  cfg.rope_factor = 8.0;
  return cfg;
}

LlamaConfig LlamaConfig::llama32_1b() { return LlamaConfig{}; }

LlamaConfig LlamaConfig::llama32_3b() {
  LlamaConfig cfg;
  cfg.emb_dim = 3072;
  cfg.n_heads = 24;
  cfg.n_layers = 28;
  return cfg;
}

std::optional<RoPEFreqConfig> LlamaConfig::rope_freq_config() const {
  if (!rope_freq) return std::nullopt;
  return RoPEFreqConfig{rope_factor, rope_low_freq_factor, rope_high_freq_factor,
                        rope_original_context_length};
}

std::string config_problem(const LlamaConfig& cfg, const std::function<std::string(const char*)>& name) {
  auto spell = [&](const char* field) { return name ? name(field) : std::string(field); };
  std::ostringstream os;
  os.precision(17);
  LlamaConfig::for_each_field([&](const auto& f) {
    const double v = static_cast<double>(cfg.*f.member);
    if (os.tellp() == 0 && !(v >= f.min && v <= f.max))
      os << spell(f.name) << " must be in [" << f.min << ", " << f.max << "], got " << cfg.*f.member;
  });
  if (os.tellp() != 0) return os.str();
  if (cfg.emb_dim % cfg.n_heads != 0)
    os << spell("emb_dim") << " " << cfg.emb_dim << " is not divisible by " << spell("n_heads") << " "
       << cfg.n_heads << " (each head gets emb_dim / n_heads features)";
  else if (cfg.head_dim() % 2 != 0)
    os << "the head size " << spell("emb_dim") << " / " << spell("n_heads") << " = " << cfg.head_dim()
       << " is odd (rotary embeddings rotate pairs of features)";
  else if (cfg.n_heads % cfg.n_kv_groups != 0)
    os << spell("n_heads") << " " << cfg.n_heads << " is not divisible by " << spell("n_kv_groups") << " "
       << cfg.n_kv_groups << " (each key/value head serves n_heads / n_kv_groups query heads)";
  else if (cfg.rope_freq &&
           !(cfg.rope_low_freq_factor > 0 && cfg.rope_low_freq_factor < cfg.rope_high_freq_factor))
    os << "with " << spell("rope_freq") << ", " << spell("rope_low_freq_factor")
       << " must be positive and below " << spell("rope_high_freq_factor") << ", got "
       << cfg.rope_low_freq_factor << " and " << cfg.rope_high_freq_factor;
  return os.str();
}

void validate(const LlamaConfig& cfg, const char* who) {
  const std::string problem = config_problem(cfg);
  if (!problem.empty()) fail(who, problem);
}

int64_t num_parameters(const LlamaConfig& cfg) {
  validate(cfg, "num_parameters");
  const int64_t emb = cfg.emb_dim, kv_dim = cfg.n_kv_groups * cfg.head_dim();
  const int64_t att = emb * emb + 2 * emb * kv_dim + emb * emb;  // W_query, W_key + W_value, out_proj
  const int64_t ff = 3 * emb * cfg.hidden_dim;                   // fc1, fc2, fc3
  const int64_t block = att + ff + 2 * emb;                      // + norm1, norm2
  const int64_t head = cfg.tie_weights ? 0 : cfg.vocab_size * emb;
  return cfg.vocab_size * emb + cfg.n_layers * block + emb + head;  // tok_emb, blocks, final_norm, out_head
}

// ---------------------------------------------------------------- GroupedQueryAttention
namespace {

// The one grouped-query attention call: queries (b, H, T, D) at positions past .. past+T-1,
// keys and values (b, G, past+T, D) at positions 0 .. past+T-1, H = G * group_size; query
// head h reads key/value head h / group_size (the book's repeat_interleave of the keys and
// values, which enable_gqa never forms); causal: query i sees keys 0 .. past+i. -> (b, H, T, D)
Tensor grouped_query_attention(const Tensor& queries, const Tensor& keys, const Tensor& values,
                               int64_t past) {
  const int64_t num_tokens = queries.size(2);
  if (past == 0 || num_tokens == 1)  // plain causal; one new token sees every key
    return scaled_dot_product_attention(queries, keys, values, {.is_causal = past == 0, .enable_gqa = true});
  // the causal mask's rows past .. past+T (true: attend), as the book's
  // torch.triu(ones(past+T, past+T), diagonal=1)[past:, :] marks the rest
  Tensor mask = tril(ones({num_tokens, past + num_tokens}), past).to(kBool);
  return scaled_dot_product_attention(queries, keys, values, {.attn_mask = mask, .enable_gqa = true});
}

}  // namespace

GroupedQueryAttention::GroupedQueryAttention(int64_t d_in, int64_t d_out_, int64_t num_heads_,
                                             int64_t num_kv_groups_)
    : d_out(d_out_), num_heads(num_heads_), num_kv_groups(num_kv_groups_) {
  if (d_in <= 0 || d_out <= 0 || num_heads <= 0 || num_kv_groups <= 0)
    fail("GroupedQueryAttention", "d_in, d_out, num_heads and num_kv_groups must be positive, got ", d_in,
         ", ", d_out, ", ", num_heads, " and ", num_kv_groups);
  if (d_out % num_heads != 0)
    fail("GroupedQueryAttention", "d_out (", d_out, ") must be divisible by num_heads (", num_heads, ")");
  if (num_heads % num_kv_groups != 0)
    fail("GroupedQueryAttention", "num_heads (", num_heads, ") must be divisible by num_kv_groups (",
         num_kv_groups, ")");
  head_dim = d_out / num_heads;
  group_size = num_heads / num_kv_groups;
  W_key = register_module("W_key", std::make_shared<Linear>(d_in, num_kv_groups * head_dim, false));
  W_value = register_module("W_value", std::make_shared<Linear>(d_in, num_kv_groups * head_dim, false));
  W_query = register_module("W_query", std::make_shared<Linear>(d_in, d_out, false));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d_out, d_out, false));
}

Tensor GroupedQueryAttention::forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                                      LayerKVCache* cache) {
  if (x.dim() != 3 || x.size(2) != W_query->in_features)
    fail("GroupedQueryAttention", "expected input of shape (batch, num_tokens, ", W_query->in_features,
         "), got ", x.shape());
  auto [b, num_tokens, d_in] = x.shape3();
  const int64_t past = cache ? cache->size() : 0;
  if (past > 0 && cache->keys.size(0) != b)
    fail("GroupedQueryAttention", "a KV cache of ", past, " tokens (keys ", cache->keys.shape(),
         ") cannot take input of shape ", x.shape());

  Tensor queries = W_query(x)
                       .view({b, num_tokens, num_heads, head_dim})                        // (b, T, H, D)
                       .transpose(1, 2);                                                  // (b, H, T, D)
  Tensor keys = W_key(x).view({b, num_tokens, num_kv_groups, head_dim}).transpose(1, 2);  // (b, G, T, D)
  Tensor values = W_value(x).view({b, num_tokens, num_kv_groups, head_dim}).transpose(1, 2);

  // rotary embeddings at the tokens' positions, past onwards
  queries = apply_rope(queries, cos, sin, past);
  keys = apply_rope(keys, cos, sin, past);

  if (cache) {  // the cache keeps rotated keys: a key's rotation depends on its position only
    if (past > 0) {
      keys = cat({cache->keys, keys}, 2);  // (b, G, past + T, D)
      values = cat({cache->values, values}, 2);
    }
    cache->keys = keys;
    cache->values = values;
  }

  Tensor context_vec = grouped_query_attention(queries, keys, values, past);  // (b, H, T, D)
  context_vec = context_vec
                    .transpose(1, 2)  // (b, T, H, D)
                    .contiguous()
                    .view({b, num_tokens, d_out});  // (b, T, d_out)
  return out_proj(context_vec);                     // (b, T, d_out)
}

// ---------------------------------------------------------------- LlamaTransformerBlock
LlamaTransformerBlock::LlamaTransformerBlock(const LlamaConfig& cfg) {
  validate(cfg, "LlamaTransformerBlock");
  att = register_module("att", std::make_shared<GroupedQueryAttention>(
                                   /*d_in=*/cfg.emb_dim, /*d_out=*/cfg.emb_dim, /*num_heads=*/cfg.n_heads,
                                   /*num_kv_groups=*/cfg.n_kv_groups));
  ff = register_module("ff", std::make_shared<LlamaFeedForward>(cfg.emb_dim, cfg.hidden_dim));
  norm1 = register_module("norm1", std::make_shared<RMSNorm>(cfg.emb_dim, 1e-5));
  norm2 = register_module("norm2", std::make_shared<RMSNorm>(cfg.emb_dim, 1e-5));
}

Tensor LlamaTransformerBlock::forward(const Tensor& x_in, const Tensor& cos, const Tensor& sin,
                                      LayerKVCache* cache) {
  // shortcut connection around attention: (b, T, emb) throughout
  Tensor shortcut = x_in;
  Tensor x = norm1(x_in);
  x = att->forward(x, cos, sin, cache);
  x = x + shortcut;

  // shortcut connection around the feed-forward network
  shortcut = x;
  x = norm2(x);
  x = ff(x);
  return x + shortcut;
}

// ---------------------------------------------------------------- LlamaModel
LlamaModel::LlamaModel(const LlamaConfig& config) : cfg(config) {
  validate(cfg, "LlamaModel");  // before any random draw
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.emb_dim));
  auto blocks = std::make_shared<ModuleList>();
  for (int64_t i = 0; i < cfg.n_layers; ++i) blocks->push_back(std::make_shared<LlamaTransformerBlock>(cfg));
  trf_blocks = register_module("trf_blocks", blocks);
  final_norm = register_module("final_norm", std::make_shared<RMSNorm>(cfg.emb_dim, 1e-5));
  out_head = register_module("out_head", std::make_shared<Linear>(cfg.emb_dim, cfg.vocab_size, false));
  // Llama 3.2's tied embeddings, after the head's own init (as GPTModel, gpt.h)
  if (cfg.tie_weights) out_head->weight = out_head->set_parameter("weight", tok_emb->weight);

  RoPEParams rope =
      compute_rope_params(cfg.head_dim(), cfg.rope_base, cfg.context_length, cfg.rope_freq_config());
  cos = register_buffer("cos", rope.cos, /*persistent=*/false);
  sin = register_buffer("sin", rope.sin, /*persistent=*/false);
}

namespace {
// in_idx must be int64 (b, T) ids that fit in the context after `past`.
void check_ids(const LlamaConfig& cfg, const Tensor& in_idx, int64_t past) {
  if (in_idx.dtype() != kInt64 || in_idx.dim() != 2)
    fail("LlamaModel", "expected token ids as an int64 tensor of shape (batch, num_tokens), got ",
         dtype_name(in_idx.dtype()), " of shape ", in_idx.shape());
  const int64_t seq_len = in_idx.size(1);
  if (past + seq_len > cfg.context_length) {
    if (past == 0)
      fail("LlamaModel", "input has ", seq_len, " tokens (shape ", in_idx.shape(), ") but context_length is ",
           cfg.context_length, "; truncate it to the last ", cfg.context_length, " tokens");
    fail("LlamaModel", "input has ", seq_len, " tokens (shape ", in_idx.shape(), ") after ", past,
         " cached ones but context_length is ", cfg.context_length, "; reset the cache");
  }
  // the ids' range is checked once, by tok_emb (embedding names the bad index)
}
}  // namespace

Tensor LlamaModel::forward(const Tensor& in_idx) {
  check_ids(cfg, in_idx, 0);
  Tensor x = tok_emb(in_idx);  // (b, T, emb); no position embedding: RoPE turns q and k
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    x = trf_blocks->at<LlamaTransformerBlock>(i)->forward(x, cos, sin);
  x = final_norm(x);
  return out_head(x);  // (b, T, vocab)
}

Tensor LlamaModel::forward(const Tensor& in_idx, KVCache& cache) {
  check_ids(cfg, in_idx, cache.size());
  cache.layers.resize(static_cast<std::size_t>(cfg.n_layers));
  Tensor x = tok_emb(in_idx);  // (b, T, emb)
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    x = trf_blocks->at<LlamaTransformerBlock>(i)->forward(x, cos, sin,
                                                          &cache.layers[static_cast<std::size_t>(i)]);
  x = final_norm(x);
  return out_head(x);  // (b, T, vocab)
}

Tensor LlamaModel::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts) {
  return generate_with(*this, idx, max_new_tokens, opts, nullptr);
}

Tensor LlamaModel::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts,
                            Generator& gen, const std::function<void(const Tensor&)>& on_logits) {
  return generate_with(*this, idx, max_new_tokens, opts, &gen, on_logits);
}

}  // namespace xgrad::nn
