// examples/train_lm/tokenizer.cpp: see tokenizer.h.
#include "tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace train_lm {

// ---------------------------------------------------------------- UTF-8
// reference: RFC 3629 section 4 (the well-formed byte sequences table).
std::vector<char32_t> decode_utf8(std::string_view text, const std::string& source) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  auto bad = [&](std::size_t at, const char* what) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(s[at]));
    xgrad::fail("utf8", source, ": invalid UTF-8 at byte offset ", at, " (byte ", byte, "): ", what);
  };
  std::size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
    else if (c >= 0x80 && c <= 0xBF) { bad(i, "unexpected continuation byte"); }
    else { bad(i, "byte never valid in UTF-8"); }
    if (i + len > n) bad(i, "sequence truncated at the end of the text");
    for (int k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) bad(i + k, "expected a continuation byte");
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min) bad(i, "overlong encoding");
    if (cp >= 0xD800 && cp <= 0xDFFF) bad(i, "UTF-16 surrogate code point");
    if (cp > 0x10FFFF) bad(i, "code point above U+10FFFF");
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {
std::string describe(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
  std::string s = buf;
  if (cp >= 0x20 && cp != 0x7F) {
    s += " '";
    append_utf8(s, cp);
    s += "'";
  }
  return s;
}
}  // namespace

// ---------------------------------------------------------------- CharTokenizer
CharTokenizer CharTokenizer::from_text(std::string_view text, const std::string& source) {
  std::vector<char32_t> cps = decode_utf8(text, source);
  if (cps.empty()) xgrad::fail("tokenizer", source, " is empty: no characters to build a vocabulary");
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  return from_vocab(std::move(cps));
}

CharTokenizer CharTokenizer::from_vocab(std::vector<char32_t> vocab) {
  if (vocab.empty()) xgrad::fail("tokenizer", "the vocabulary is empty");
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i] > 0x10FFFF || (vocab[i] >= 0xD800 && vocab[i] <= 0xDFFF))
      xgrad::fail("tokenizer", "vocabulary entry ", i, " is not a valid code point");
    if (i > 0 && vocab[i] <= vocab[i - 1])
      xgrad::fail("tokenizer", "vocabulary entries ", i - 1, " and ", i,
                  " are not in strictly increasing order (", describe(vocab[i - 1]), ", ",
                  describe(vocab[i]), ")");
  }
  CharTokenizer tok;
  tok.vocab_ = std::move(vocab);
  tok.build_index();
  return tok;
}

CharTokenizer CharTokenizer::from_json(const nlohmann::json& j) {
  if (!j.is_array()) xgrad::fail("tokenizer", "the saved vocabulary is not a JSON list");
  std::vector<char32_t> vocab;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_string()) xgrad::fail("tokenizer", "vocabulary entry ", i, " is not a string");
    auto cps = decode_utf8(j[i].get<std::string>(), "vocabulary entry " + std::to_string(i));
    if (cps.size() != 1)
      xgrad::fail("tokenizer", "vocabulary entry ", i, " holds ", cps.size(),
                  " characters; expected exactly one");
    vocab.push_back(cps[0]);
  }
  return from_vocab(std::move(vocab));
}

nlohmann::json CharTokenizer::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (char32_t cp : vocab_) {
    std::string s;
    append_utf8(s, cp);
    j.push_back(s);
  }
  return j;
}

void CharTokenizer::build_index() {
  ascii_.assign(128, -1);
  index_.clear();
  for (std::size_t i = 0; i < vocab_.size(); ++i) {
    if (vocab_[i] < 128) ascii_[vocab_[i]] = static_cast<int64_t>(i);
    else index_.emplace(vocab_[i], static_cast<int64_t>(i));
  }
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<char32_t> cps = decode_utf8(text, "text to encode");
  std::vector<int64_t> ids(cps.size());
  for (std::size_t i = 0; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    int64_t id = -1;
    if (cp < 128 && !ascii_.empty()) {
      id = ascii_[cp];
    } else {
      auto it = index_.find(cp);
      if (it != index_.end()) id = it->second;
    }
    if (id < 0)
      xgrad::fail("tokenizer", "character ", describe(cp), " (character ", i,
                  " of the text) is not in the vocabulary of ", vocab_.size(), " characters");
    ids[i] = id;
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size())
      xgrad::fail("tokenizer", "token id ", ids[i], " at position ", i, " is outside [0, ",
                  vocab_size(), ")");
    append_utf8(out, vocab_[static_cast<std::size_t>(ids[i])]);
  }
  return out;
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

BatchSampler::BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size,
                           int64_t context_length, uint64_t seed, std::string split)
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
