// examples/train_lm/tokenizer.cpp: see tokenizer.h.
#include "tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace train_lm {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- tokenizers
std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source) {
  using namespace xgrad::text;
  if (spec.kind == "char") return std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  if (spec.kind == "gpt2") {
    const fs::path dir = spec.gpt2_vocab_dir;
    for (const char* f : {"vocab.bpe", "encoder.json"})
      if (!fs::exists(dir / f))
        xgrad::fail("tokenizer", (dir / f).string(),
                    " not found; run scripts/get_gpt2_vocab.sh "
                    "to fetch GPT-2's vocabulary into data/gpt2/, or pass --gpt2-vocab DIR");
    return std::make_shared<GPT2Tokenizer>(
        GPT2Tokenizer::from_files((dir / "vocab.bpe").string(), (dir / "encoder.json").string()));
  }
  if (spec.kind == "bpe") {
    if (!spec.bpe_file.empty()) return std::make_shared<BPETokenizer>(BPETokenizer::load(spec.bpe_file));
    return std::make_shared<BPETokenizer>(BPETokenizer::train(text, spec.bpe_merges));
  }
  xgrad::fail("tokenizer", "unknown tokenizer '", spec.kind, "' (expected char, gpt2 or bpe)");
}

// ---------------------------------------------------------------- data
TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction < 1.0))
    xgrad::fail("split_tokens", "train_fraction must be in (0, 1), got ", train_fraction);
  auto n = static_cast<std::size_t>(static_cast<double>(ids.size()) * train_fraction);
  TokenSplit s;
  s.train.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  s.val.assign(ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end());
  return s;
}

BatchSampler::BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size, int64_t context_length,
                           uint64_t seed, std::string split)
    : tokens_(tokens), batch_size_(batch_size), context_length_(context_length), gen_(seed) {
  if (batch_size <= 0) xgrad::fail("BatchSampler", "batch_size must be positive, got ", batch_size);
  if (context_length <= 0)
    xgrad::fail("BatchSampler", "context_length must be positive, got ", context_length);
  if (static_cast<int64_t>(tokens->size()) < context_length + 1)
    xgrad::fail("BatchSampler", "the ", split, " split has ", tokens->size(),
                " tokens, fewer than one window of context_length + 1 = ", context_length + 1);
}

Batch BatchSampler::next() {
  const int64_t B = batch_size_, T = context_length_;
  const int64_t n = static_cast<int64_t>(tokens_->size());
  // reference: nanoGPT train.py get_batch: ix = torch.randint(len(data) - block_size, (B,))
  std::vector<int64_t> starts(static_cast<std::size_t>(B));
  gen_.random_int(starts.data(), B, 0, n - T);
  Batch b{xgrad::empty({B, T}, xgrad::kInt64), xgrad::empty({B, T}, xgrad::kInt64)};
  int64_t* x = b.x.data_ptr<int64_t>();  // (B, T)
  int64_t* y = b.y.data_ptr<int64_t>();  // (B, T)
  const int64_t* src = tokens_->data();
  for (int64_t i = 0; i < B; ++i) {
    const int64_t* w = src + starts[static_cast<std::size_t>(i)];  // window of T + 1 tokens
    std::copy(w, w + T, x + i * T);
    std::copy(w + 1, w + T + 1, y + i * T);
  }
  return b;
}

}  // namespace train_lm
