// xgrad/nn/sampling.h: drawing the next token from a row of logits, as the book's generate()
// (ch05: temperature, top-k) plus nucleus (top-p) sampling, with torch's checks.
//
//   SamplingOptions s{.temperature = 0.8, .top_k = 40};
//   validate_sampling(s);                            // throws for bad values
//   int64_t next = sample_token(logits_row, s, gen); // logits_row: one position's vocab scores
//
// GPTModel::generate (gpt.h) and examples/train_lm use these.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/random.h"

namespace xgrad::nn {

struct SamplingOptions {
  double temperature = 0.0;  // 0 = greedy (argmax); else softmax(logits / temperature)
  int64_t top_k = 0;         // keep the top_k largest logits (ties included); 0 = all
  double top_p = 1.0;        // then the smallest set whose probabilities reach top_p; 1 = all
};

// What is wrong with `s`, as torch's samplers check it (HF TemperatureLogitsWarper, TopK,
// TopP), naming the field ("temperature -1 must be 0 (greedy) or positive"); "" when valid:
// temperature 0 or a finite normal number > 0 (a subnormal one overflows logits / temperature
// to inf, which torch.multinomial refuses), top_k >= 0, 0 < top_p <= 1.
std::string sampling_problem(const SamplingOptions& s);
// Throws xgrad::Error("generate: <sampling_problem>") when there is one.
void validate_sampling(const SamplingOptions& s);

// One token id from `logits` (one position, vocab entries): argmax at temperature 0 (the
// first maximum), else top-k, then softmax(logits / temperature) computed as
// exp((l - max) / temperature), then top-p (HF TopPLogitsWarper: at least the most likely id
// is kept), then one uniform draw from `gen` inverted through the cumulative sum (never a
// masked id). NaN or +inf logits throw xgrad::Error (a diverged model). `logits` is scratch.
int64_t sample_token(std::vector<double>& logits, const SamplingOptions& s, Generator& gen);

}  // namespace xgrad::nn
