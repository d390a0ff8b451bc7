// nn/src/gpt.cpp: GPTModel.
// reference: rasbt/LLMs-from-scratch, ch04/01_main-chapter-code/gpt.py
#include "xgrad/nn/gpt.h"

#include <algorithm>

#include "xgrad/autograd.h"
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
  x = trf_blocks(x);
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
  if (opts.seed) {
    Generator gen(*opts.seed);
    return generate(idx, max_new_tokens, opts, gen);
  }
  return generate(idx, max_new_tokens, opts, default_generator());
}

// reference: rasbt/LLMs-from-scratch ch05 generate() and ch04/03_kv-cache
// generate_text_simple_cached()
Tensor GPTModel::generate(const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts,
                          Generator& gen, const std::function<void(const Tensor&)>& on_logits) {
  const SamplingOptions sampling{opts.temperature, opts.top_k, opts.top_p};
  validate_sampling(sampling);
  if (max_new_tokens < 0) fail("generate", "max_new_tokens must be >= 0, got ", max_new_tokens);
  if (idx.dtype() != kInt64 || idx.dim() != 2 || idx.size(1) == 0)
    fail("generate",
         "expected a prompt of token ids as an int64 tensor of shape (batch, "
         "num_tokens) with num_tokens >= 1, got ",
         dtype_name(idx.dtype()), " of shape ", idx.shape());
  const int64_t b = idx.size(0), ctx = cfg.context_length;
  std::vector<std::vector<int64_t>> rows(static_cast<std::size_t>(b));
  {
    const std::vector<int64_t> flat = idx.contiguous().to_vector<int64_t>();
    const int64_t t = idx.size(1);
    for (int64_t r = 0; r < b; ++r)
      rows[static_cast<std::size_t>(r)].assign(flat.begin() + r * t, flat.begin() + (r + 1) * t);
  }
  // the last n tokens of every row, (b, n)
  auto last_tokens = [&](int64_t n) {
    std::vector<int64_t> flat;
    for (const auto& row : rows) flat.insert(flat.end(), row.end() - n, row.end());
    return from_vector(flat, {b, n});
  };

  struct RestoreMode {  // train() / eval() as it was, also when sampling throws
    Module& m;
    bool was_training;
    ~RestoreMode() { m.train(was_training); }
  } restore{*this, is_training()};
  eval();
  NoGradGuard no_grad;
  KVCache cache;
  std::vector<double> row_logits;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t len = static_cast<int64_t>(rows.front().size());
    Tensor logits;  // (b, T, vocab)
    if (opts.use_kv_cache && cache.size() > 0 && cache.size() < ctx) {
      logits = forward(last_tokens(1), cache);  // only the newest token
    } else {
      // the first step, the recompute, or a full cache: the whole window (at most ctx tokens)
      const int64_t window = std::min(len, ctx);
      cache.reset();
      logits = opts.use_kv_cache ? forward(last_tokens(window), cache) : forward(last_tokens(window));
    }
    Tensor last = logits.select(1, logits.size(1) - 1);  // (b, vocab)
    if (on_logits) on_logits(last);
    const std::vector<double> all = last.contiguous().to_vector<double>();
    const std::size_t V = static_cast<std::size_t>(cfg.vocab_size);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      row_logits.assign(all.begin() + static_cast<std::ptrdiff_t>(r * V),
                        all.begin() + static_cast<std::ptrdiff_t>((r + 1) * V));
      rows[r].push_back(sample_token(row_logits, sampling, gen));
    }
  }
  return last_tokens(static_cast<int64_t>(rows.front().size()));
}

}  // namespace xgrad::nn
