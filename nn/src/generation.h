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

}  // namespace xgrad::nn
