// nn/src/gpt.cpp: GPTModel.
// reference: rasbt/LLMs-from-scratch, ch04/01_main-chapter-code/gpt.py
#include "xgrad/nn/gpt.h"

#include "generation.h"
#include "xgrad/checkpoint.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

GPTModel::GPTModel(const GPTConfig& config) : cfg(config) {
  validate(cfg, "GPTModel");  // before any random draw
  tok_emb = register_module("tok_emb", std::make_shared<Embedding>(cfg.vocab_size, cfg.emb_dim));
  pos_emb = register_module("pos_emb", std::make_shared<Embedding>(cfg.context_length, cfg.emb_dim));
  drop_emb = register_module("drop_emb", std::make_shared<Dropout>(cfg.drop_rate));
  auto blocks = std::make_shared<Sequential>();
  for (int64_t i = 0; i < cfg.n_layers; ++i) blocks->push_back(std::make_shared<TransformerBlock>(cfg));
  trf_blocks = register_module("trf_blocks", blocks);
  final_norm = register_module("final_norm", std::make_shared<LayerNorm>(cfg.emb_dim));
  out_head = register_module("out_head", std::make_shared<Linear>(cfg.emb_dim, cfg.vocab_size, false));
  // GPT-2's weight tying, as the book does it after construction (the head's own init is
  // drawn first, so the other weights match an untied model's): model.out_head.weight =
  // model.tok_emb.weight
  if (cfg.tie_weights) out_head->weight = out_head->set_parameter("weight", tok_emb->weight);
}

namespace {
// in_idx must be int64 (b, T) ids that fit in the context after `past`.
void check_ids(const GPTConfig& cfg, const Tensor& in_idx, int64_t past) {
  if (in_idx.dtype() != kInt64 || in_idx.dim() != 2)
    fail("GPTModel", "expected token ids as an int64 tensor of shape (batch, num_tokens), got ",
         dtype_name(in_idx.dtype()), " of shape ", in_idx.shape());
  const int64_t seq_len = in_idx.size(1);
  if (past + seq_len > cfg.context_length) {
    if (past == 0)
      fail("GPTModel", "input has ", seq_len, " tokens (shape ", in_idx.shape(), ") but context_length is ",
           cfg.context_length, "; truncate it to the last ", cfg.context_length, " tokens");
    fail("GPTModel", "input has ", seq_len, " tokens (shape ", in_idx.shape(), ") after ", past,
         " cached ones but context_length is ", cfg.context_length, "; reset the cache");
  }
  // the ids' range is checked once, by tok_emb (embedding names the bad index)
}
}  // namespace

Tensor GPTModel::forward(const Tensor& in_idx) {
  check_ids(cfg, in_idx, 0);
  auto [batch_size, seq_len] = in_idx.shape2();

  Tensor tok_embeds = tok_emb(in_idx);           // (b, T, emb); embedding range-checks every id
  Tensor pos_embeds = pos_emb(arange(seq_len));  // (T, emb)
  Tensor x = tok_embeds + pos_embeds;            // (b, T, emb)
  x = drop_emb(x);
  if (cfg.activation_checkpointing && is_training()) {
    // each block keeps only its input between forward and backward (xgrad/checkpoint.h)
    for (const std::shared_ptr<Module>& block : *trf_blocks)
      x = xgrad::utils::checkpoint([block](const Tensor& t) { return (*block)(t); }, x);
  } else {
    x = trf_blocks(x);
  }
  x = final_norm(x);
  return out_head(x);  // (b, T, vocab)
}

Tensor GPTModel::forward(const Tensor& in_idx, KVCache& cache) {
  const int64_t past = cache.size();
  check_ids(cfg, in_idx, past);
  auto [batch_size, seq_len] = in_idx.shape2();
  cache.layers.resize(static_cast<std::size_t>(cfg.n_layers));

  Tensor tok_embeds = tok_emb(in_idx);                        // (b, T, emb)
  Tensor pos_embeds = pos_emb(arange(past, past + seq_len));  // (T, emb): after the cache
  Tensor x = tok_embeds + pos_embeds;                         // (b, T, emb)
  x = drop_emb(x);
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    x = trf_blocks->at<TransformerBlock>(i)->forward(x, cache.layers[static_cast<std::size_t>(i)]);
  x = final_norm(x);
  return out_head(x);  // (b, T, vocab)
}

Tensor GPTModel::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts) {
  return generate_with(*this, idx, max_new_tokens, opts, nullptr);
}

Tensor GPTModel::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts,
                          Generator& gen, const std::function<void(const Tensor&)>& on_logits) {
  return generate_with(*this, idx, max_new_tokens, opts, &gen, on_logits);
}

}  // namespace xgrad::nn
