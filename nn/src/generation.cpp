// nn/src/generation.cpp: the token loop of GPTModel::generate and LlamaModel::generate.
// reference: rasbt/LLMs-from-scratch ch05 generate() and ch04/03_kv-cache
// generate_text_simple_cached()
#include "generation.h"

#include <algorithm>
#include <vector>

#include "xgrad/autograd.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

Tensor generate_tokens(Module& model, const LanguageModelForwards& lm, const Tensor& idx,
                       int64_t max_new_tokens, const GenerateOptions& opts, Generator& gen,
                       const std::function<void(const Tensor&)>& on_logits) {
  const SamplingOptions sampling{opts.temperature, opts.top_k, opts.top_p};
  validate_sampling(sampling);
  if (max_new_tokens < 0) fail("generate", "max_new_tokens must be >= 0, got ", max_new_tokens);
  if (idx.dtype() != kInt64 || idx.dim() != 2 || idx.size(1) == 0)
    fail("generate",
         "expected a prompt of token ids as an int64 tensor of shape (batch, "
         "num_tokens) with num_tokens >= 1, got ",
         dtype_name(idx.dtype()), " of shape ", idx.shape());
  const int64_t b = idx.size(0), ctx = lm.context_length;
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
  } restore{model, model.is_training()};
  model.eval();
  NoGradGuard no_grad;
  KVCache cache;
  std::vector<double> row_logits;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int64_t len = static_cast<int64_t>(rows.front().size());
    Tensor logits;  // (b, T, vocab)
    if (opts.use_kv_cache && cache.size() > 0 && cache.size() < ctx) {
      logits = lm.forward_cached(last_tokens(1), cache);  // only the newest token
    } else {
      // the first step, the recompute, or a full cache: the whole window (at most ctx tokens)
      const int64_t window = std::min(len, ctx);
      cache.reset();
      logits =
          opts.use_kv_cache ? lm.forward_cached(last_tokens(window), cache) : lm.forward(last_tokens(window));
    }
    Tensor last = logits.select(1, logits.size(1) - 1);  // (b, vocab)
    if (on_logits) on_logits(last);
    const std::vector<double> all = last.contiguous().to_vector<double>();
    const std::size_t V = static_cast<std::size_t>(lm.vocab_size);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      row_logits.assign(all.begin() + static_cast<std::ptrdiff_t>(r * V),
                        all.begin() + static_cast<std::ptrdiff_t>((r + 1) * V));
      rows[r].push_back(sample_token(row_logits, sampling, gen));
    }
  }
  return last_tokens(static_cast<int64_t>(rows.front().size()));
}

}  // namespace xgrad::nn
