// text/src/char_tokenizer.cpp: CharTokenizer and tokenizer_from_json (see xgrad/text/tokenizer.h).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "xgrad/error.h"
#include "xgrad/text/tokenizer.h"
#include "xgrad/text/utf8.h"

namespace xgrad::text {

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

std::unique_ptr<Tokenizer> tokenizer_from_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) xgrad::fail("tokenizer_from_json", "the text is not valid JSON");
  if (j.is_array()) return std::make_unique<CharTokenizer>(CharTokenizer::from_json(json));
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    xgrad::fail("tokenizer_from_json",
                "expected a JSON list (a character vocabulary) or an "
                "object with a \"type\" (\"gpt2\" or \"bpe\")");
  const std::string type = j["type"].get<std::string>();
  if (type == "gpt2") return std::make_unique<GPT2Tokenizer>(GPT2Tokenizer::from_json(json));
  if (type == "bpe") return std::make_unique<BPETokenizer>(BPETokenizer::from_json(json));
  xgrad::fail("tokenizer_from_json", "unknown tokenizer type '", type, "' (expected \"gpt2\" or \"bpe\")");
}

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
                  " are not in strictly increasing order (", describe(vocab[i - 1]), ", ", describe(vocab[i]),
                  ")");
  }
  CharTokenizer tok;
  tok.vocab_ = std::move(vocab);
  tok.build_index();
  return tok;
}

CharTokenizer CharTokenizer::from_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) xgrad::fail("tokenizer", "the saved vocabulary is not valid JSON");
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

std::string CharTokenizer::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (char32_t cp : vocab_) {
    std::string s;
    append_utf8(s, cp);
    j.push_back(s);
  }
  return j.dump();
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
      xgrad::fail("tokenizer", "token id ", ids[i], " at position ", i, " is outside [0, ", vocab_size(),
                  ")");
    append_utf8(out, vocab_[static_cast<std::size_t>(ids[i])]);
  }
  return out;
}

}  // namespace xgrad::text
