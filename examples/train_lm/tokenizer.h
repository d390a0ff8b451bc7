// examples/train_lm/tokenizer.h: the character-level tokenizer and the token batches.
//
// The vocabulary is the sorted set of Unicode code points in the corpus (decoded as strict
// UTF-8), one token per code point: "Call me Ishmael." -> 16 ids. It is saved in checkpoints
// as a JSON list of one-character strings, so the ids mean the same after a reload.
//
// Batches are nanoGPT's get_batch: B random windows of T + 1 consecutive tokens, x the first
// T, y the last T, drawn with `torch.randint(len(data) - T, (B,))` from the sampler's own
// xgrad::Generator. Its state is saved in checkpoints, so a resumed run draws the same
// batches as an uninterrupted one.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "xgrad/random.h"
#include "xgrad/tensor.h"

namespace train_lm {

// Strict UTF-8 decoding: overlong forms, surrogates, code points above U+10FFFF, stray
// continuation bytes and truncated sequences throw xgrad::Error with the byte offset.
std::vector<char32_t> decode_utf8(std::string_view text, const std::string& source);
void append_utf8(std::string& out, char32_t cp);

class CharTokenizer {
 public:
  CharTokenizer() = default;
  // The vocabulary of `text` (UTF-8); throws for invalid UTF-8 or empty text.
  static CharTokenizer from_text(std::string_view text, const std::string& source = "text");
  // From a vocabulary list: strictly increasing code points (what to_json() writes).
  static CharTokenizer from_vocab(std::vector<char32_t> vocab);
  static CharTokenizer from_json(const nlohmann::json& j);  // ["\n", " ", "!", ...]
  nlohmann::json to_json() const;

  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const std::vector<char32_t>& vocab() const { return vocab_; }
  // Throws for invalid UTF-8 or a character outside the vocabulary (naming it and its offset).
  std::vector<int64_t> encode(std::string_view text) const;
  // Throws for an id outside [0, vocab_size).
  std::string decode(const std::vector<int64_t>& ids) const;
  std::string decode(int64_t id) const { return decode(std::vector<int64_t>{id}); }

  bool operator==(const CharTokenizer& other) const { return vocab_ == other.vocab_; }

 private:
  void build_index();
  std::vector<char32_t> vocab_;
  std::vector<int64_t> ascii_;  // id of code points < 128, or -1
  std::unordered_map<char32_t, int64_t> index_;
};

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
  BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size, int64_t context_length,
               uint64_t seed, std::string split = "train");
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
