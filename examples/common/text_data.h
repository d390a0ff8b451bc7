// examples/common/text_data.h: the data of a language model trained on a text file, as
// nanoGPT's prepare.py: the corpus, its tokenizer (xgrad::text's char, GPT-2 BPE or a BPE
// learnt from the corpus) and the 90/10 split. Batches come from a data::DataLoader over a
// text::GPTDataset of a split (xgrad/text/gpt_dataset.h).
//
//   Corpus c = make_corpus(read_corpus("data/moby_dick.txt"), 64, "data/moby_dick.txt");
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xgrad/text/tokenizer.h"

namespace xgrad_examples {

using xgrad::text::Tokenizer;

// A tokenizer by name: char (the characters of the corpus), gpt2 (GPT-2's BPE from gpt2_vocab_dir) or
// bpe (bpe_merges merges learnt from the corpus, or those saved in bpe_file).
struct TokenizerSpec {
  std::string kind = "char";
  std::string gpt2_vocab_dir = "data/gpt2";
  int64_t bpe_merges = 1000;
  std::string bpe_file;
};

// The corpus as UTF-8 text: throws xgrad::Error for a missing, unreadable or empty file or
// invalid UTF-8 (with the byte offset); the message says how to fetch the default corpus.
std::string read_corpus(const std::string& path);

// The tokenizer `spec` names for `text` (named `source` in messages): xgrad::text's char,
// GPT-2 BPE (files from scripts/get_gpt2_vocab.sh) or a BPE learnt from the text.
std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source);

struct TokenSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> val;
};
// The first train_fraction of the tokens train, the rest validate (nanoGPT's 90/10).
TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction = 0.9);

struct Corpus {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit split;
};
// Tokenizes and splits `text`; throws when a split is shorter than one window of
// context_length + 1 tokens. Without a tokenizer, the CharTokenizer of `text`.
Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer = nullptr);

// "characters" for the char tokenizer, "tokens" for the others (in messages).
const char* token_unit(const Tokenizer& t);
// What differs between a checkpoint's vocabulary and this corpus's: the characters only one
// has (char tokenizers), or the kinds.
std::string vocab_diff(const Tokenizer& saved, const Tokenizer& now);

}  // namespace xgrad_examples
