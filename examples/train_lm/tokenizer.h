// examples/train_lm/tokenizer.h: the tokenizer choice (--tokenizer char|gpt2|bpe) and the
// token batches.
//
// The tokenizers are the library's (xgrad/text/tokenizer.h): char, one token per code point
// of the corpus; gpt2, GPT-2's byte-level BPE from data/gpt2/ (scripts/get_gpt2_vocab.sh);
// bpe, a byte-level BPE with --bpe-merges merges learnt from the corpus. The tokenizer's
// to_json() is saved in every checkpoint (metadata "vocab"), so the ids mean the same after a
// reload; for char that is the JSON list of one-character strings it has always been.
//
// Batches are nanoGPT's get_batch: B random windows of T + 1 consecutive tokens, x the first
// T, y the last T, drawn with `torch.randint(len(data) - T, (B,))` from the sampler's own
// xgrad::Generator. Its state is saved in checkpoints, so a resumed run draws the same
// batches as an uninterrupted one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"  // TokenizerSpec
#include "xgrad/random.h"
#include "xgrad/tensor.h"
#include "xgrad/text/tokenizer.h"
#include "xgrad/text/utf8.h"

namespace train_lm {

using xgrad::text::append_utf8;
using xgrad::text::CharTokenizer;
using xgrad::text::decode_utf8;
using xgrad::text::Tokenizer;

// Builds the tokenizer for `text` (the corpus, named `source` in messages); throws
// xgrad::Error (unknown kind, missing GPT-2 files with the command that fetches them).
std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source);

// The first `train_fraction` of the tokens train, the rest validate (nanoGPT's 90/10).
struct TokenSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> val;
};
TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction = 0.9);

struct Batch {
  xgrad::Tensor x;  // (B, T) int64
  xgrad::Tensor y;  // (B, T) int64, x shifted left by one
};

class BatchSampler {
 public:
  // Needs tokens.size() >= context_length + 1 (throws naming `split` otherwise).
  BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size, int64_t context_length, uint64_t seed,
               std::string split = "train");
  Batch next();
  xgrad::Generator& generator() { return gen_; }
  std::vector<uint8_t> get_state() const { return gen_.get_state(); }
  void set_state(const std::vector<uint8_t>& state) { gen_.set_state(state); }

 private:
  const std::vector<int64_t>* tokens_;
  int64_t batch_size_;
  int64_t context_length_;
  xgrad::Generator gen_;
};

}  // namespace train_lm
