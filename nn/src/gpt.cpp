// nn/src/gpt.cpp: GPTModel.
// reference: rasbt/LLMs-from-scratch, ch04/01_main-chapter-code/gpt.py
#include "xgrad/nn/gpt.h"

#include <algorithm>

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

Tensor GPTModel::forward(const Tensor& in_idx) {
  if (in_idx.dtype() != kInt64 || in_idx.dim() != 2)
    fail("GPTModel", "expected token ids as an int64 tensor of shape (batch, num_tokens), got ",
         dtype_name(in_idx.dtype()), " of shape ", in_idx.shape());
  auto [batch_size, seq_len] = in_idx.shape2();
  if (seq_len > cfg.context_length)
    fail("GPTModel", "input has ", seq_len, " tokens (shape ", in_idx.shape(),
         ") but context_length is ", cfg.context_length, "; truncate it to the last ",
         cfg.context_length, " tokens");
  const std::vector<int64_t> ids = in_idx.to_vector<int64_t>();
  auto [lo, hi] = std::minmax_element(ids.begin(), ids.end());
  if (!ids.empty() && (*lo < 0 || *hi >= cfg.vocab_size))
    fail("GPTModel", "token id ", (*lo < 0 ? *lo : *hi), " is out of range for vocab_size ",
         cfg.vocab_size, " (input shape ", in_idx.shape(), ")");

  Tensor tok_embeds = tok_emb(in_idx);                  // (b, T, emb)
  Tensor pos_embeds = pos_emb(arange(seq_len));                   // (T, emb)
  Tensor x = tok_embeds + pos_embeds;                             // (b, T, emb)
  x = drop_emb(x);
  x = trf_blocks(x);
  x = final_norm(x);
  return out_head(x);                                    // (b, T, vocab)
}

}  // namespace xgrad::nn
