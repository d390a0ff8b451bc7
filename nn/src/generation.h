// nn/src/generation.h: the token loop behind GPTModel::generate and LlamaModel::generate (the
// contract is GPTModel::generate's, gpt.h). A model hands over its two forwards; the loop
// keeps the rows, the window of the last context_length tokens, the KV cache and the sampling.
#pragma once
#include <cstdint>
#include <functional>

#include "xgrad/nn/gpt.h"
#include "xgrad/nn/module.h"
#include "xgrad/random.h"

namespace xgrad::nn {

struct LanguageModelForwards {
  int64_t context_length;
  int64_t vocab_size;
  std::function<Tensor(const Tensor&)> forward;                   // ids (b, T) -> logits (b, T, vocab)
  std::function<Tensor(const Tensor&, KVCache&)> forward_cached;  // the same after cache.size() tokens
};

// Generates under no-grad with `model` in eval mode (its mode is restored, also on a throw).
Tensor generate_tokens(Module& model, const LanguageModelForwards& lm, const Tensor& idx,
                       int64_t max_new_tokens, const GenerateOptions& opts, Generator& gen,
                       const std::function<void(const Tensor&)>& on_logits);

// Model::generate for a model with cfg.context_length, cfg.vocab_size and both forwards. With
// no generator: a Generator seeded with opts.seed when given, else the default one.
template <class Model>
Tensor generate_with(Model& model, const Tensor& idx, int64_t max_new_tokens, const GenerateOptions& opts,
                     Generator* gen, const std::function<void(const Tensor&)>& on_logits = {}) {
  if (gen == nullptr && opts.seed) {
    Generator seeded(*opts.seed);
    return generate_with(model, idx, max_new_tokens, opts, &seeded, on_logits);
  }
  const LanguageModelForwards lm{
      model.cfg.context_length, model.cfg.vocab_size,
      [&model](const Tensor& ids) { return model.forward(ids); },
      [&model](const Tensor& ids, KVCache& cache) { return model.forward(ids, cache); }};
  return generate_tokens(model, lm, idx, max_new_tokens, opts, gen ? *gen : default_generator(), on_logits);
}

}  // namespace xgrad::nn
