// text/src/bpe.cpp: byte-level BPE, GPT-2's and a trainable one (see xgrad/text/tokenizer.h).
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>

#include "xgrad/error.h"
#include "xgrad/io/file.h"
#include "xgrad/text/pretokenize.h"
#include "xgrad/text/tokenizer.h"
#include "xgrad/text/utf8.h"

namespace xgrad::text {

// ---------------------------------------------------------------- the merge table
namespace detail {

void MergeTable::add(int32_t left, int32_t right, int64_t rank, int32_t result) {
  table_[key(left, right)] = Entry{rank, result};
}

// reference: gpt-3-encoder Encoder.js bpe() (from openai/gpt-2 src/encoder.py): find the
// lowest-ranked pair, merge every occurrence left to right, repeat until no pair has a rank.
void MergeTable::apply(std::vector<int32_t>& word) const {
  std::vector<int32_t> merged;
  while (word.size() >= 2) {
    const Entry* best = nullptr;
    std::size_t at = 0;
    for (std::size_t p = 0; p + 1 < word.size(); ++p) {
      auto it = table_.find(key(word[p], word[p + 1]));
      // `<=`: on equal ranks the rightmost pair wins, as in Encoder.js's minPairs object
      if (it != table_.end() && (!best || it->second.rank <= best->rank)) {
        best = &it->second;
        at = p;
      }
    }
    if (!best) break;
    const int32_t first = word[at], second = word[at + 1];
    merged.clear();
    for (std::size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        merged.push_back(best->result);
        i += 2;
      } else {
        merged.push_back(word[i]);
        i += 1;
      }
    }
    word.swap(merged);
  }
}

}  // namespace detail

namespace {

// Encodes every piece of gpt2_split(text): its bytes as ids (byte_id), merged by the table.
// Pieces repeat a lot (" the"), so each distinct piece is merged once per call.
std::vector<int64_t> encode_pieces(std::string_view text, const int32_t* byte_id,
                                   const detail::MergeTable& table) {
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int32_t> word;
  for (std::string_view piece : gpt2_split(text)) {
    auto [it, fresh] = cache.try_emplace(piece);
    if (fresh) {
      word.clear();
      for (char c : piece) word.push_back(byte_id[static_cast<unsigned char>(c)]);
      table.apply(word);
      it->second = word;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

// The bytes of the tokens; an id outside [0, id_bytes.size()) throws. (A gap in a GPT-2
// vocabulary has no bytes: it decodes to nothing, as an unknown id does in Encoder.js.)
std::string join_bytes(const std::vector<int64_t>& ids, const std::vector<std::string>& id_bytes,
                       const char* op) {
  std::string out;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= static_cast<int64_t>(id_bytes.size()))
      xgrad::fail(op, "token id ", id, " at position ", i, " is outside the vocabulary [0, ", id_bytes.size(),
                  ")");
    out += id_bytes[static_cast<std::size_t>(id)];
  }
  return out;
}

// The file's bytes (io::read_file); an error names `op`, then the file and the failing call.
std::string read_text_file(const std::string& path, const char* op) {
  try {
    return io::read_file(path);
  } catch (const xgrad::Error& e) {
    xgrad::fail(op, e.what());
  }
}

// Replaces `path` crash-safely (io::write_file_atomic: a reader sees the old file or the new
// one, even after a power loss); an error names `op`, then the file and the failing call.
void write_file_atomically(const std::string& path, const std::string& data, const char* op) {
  try {
    io::write_file_atomic(path, data);
  } catch (const xgrad::Error& e) {
    xgrad::fail(op, e.what());
  }
}

// ---------------------------------------------------------------- GPT-2's byte characters
// reference: openai/gpt-2 src/encoder.py bytes_to_unicode (Encoder.js's copy): the printable
// bytes stand for themselves, the other 68 for U+0100, U+0101, ... in byte order.
struct ByteChars {
  char32_t of_byte[256];
  int byte_of[324];  // -1 where a code point is not a byte character
  ByteChars() {
    std::fill(std::begin(byte_of), std::end(byte_of), -1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      of_byte[b] = printable ? static_cast<char32_t>(b) : next++;
      byte_of[of_byte[b]] = b;
    }
  }
};
const ByteChars kByteChars;

}  // namespace

// ---------------------------------------------------------------- GPT2Tokenizer
GPT2Tokenizer GPT2Tokenizer::from_files(const std::string& vocab_bpe_path,
                                        const std::string& encoder_json_path) {
  const std::string bpe = read_text_file(vocab_bpe_path, "GPT2Tokenizer");
  const std::string enc = read_text_file(encoder_json_path, "GPT2Tokenizer");
  try {
    return from_strings(bpe, enc);
  } catch (const xgrad::Error& e) {
    xgrad::fail("GPT2Tokenizer", "loading ", vocab_bpe_path, " and ", encoder_json_path, ": ", e.what());
  }
}

namespace {

// encoder.json: {token: id}, in the file's order, and the id of each token.
struct EncoderJson {
  std::vector<std::pair<std::string, int64_t>> tokens;
  std::unordered_map<std::string, int32_t> id_of;
  int64_t max_id = -1;
};

EncoderJson parse_encoder_json(std::string_view encoder_json) {
  nlohmann::json enc = nlohmann::json::parse(encoder_json, nullptr, false);
  if (enc.is_discarded() || !enc.is_object())
    xgrad::fail("GPT2Tokenizer", "encoder.json is not a JSON object {token: id}");
  EncoderJson out;
  for (auto& [token, value] : enc.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= std::numeric_limits<int32_t>::max())
      xgrad::fail("GPT2Tokenizer", "encoder.json: the id of token '", token,
                  "' is not an integer in [0, 2^31 - 1)");
    const int64_t id = value.get<int64_t>();
    out.id_of.emplace(token, static_cast<int32_t>(id));
    out.tokens.emplace_back(token, id);
    out.max_id = std::max(out.max_id, id);
  }
  if (out.max_id < 0) xgrad::fail("GPT2Tokenizer", "encoder.json is empty");
  return out;
}

// The bytes each id stands for: a token's characters are GPT-2's byte characters.
std::vector<std::string> id_bytes_of(const EncoderJson& enc) {
  std::vector<std::string> id_bytes(static_cast<std::size_t>(enc.max_id + 1), std::string());
  std::vector<bool> id_used(static_cast<std::size_t>(enc.max_id + 1), false);
  for (const auto& [token, id] : enc.tokens) {
    auto used = id_used[static_cast<std::size_t>(id)];
    if (used) xgrad::fail("GPT2Tokenizer", "encoder.json: id ", id, " is given to two tokens");
    used = true;
    std::string bytes;
    for (char32_t cp : decode_utf8(token, "encoder.json token")) {
      if (cp >= 324 || kByteChars.byte_of[cp] < 0)
        xgrad::fail("GPT2Tokenizer", "encoder.json: token '", token,
                    "' holds a character that is not one of GPT-2's 256 byte characters");
      bytes += static_cast<char>(kByteChars.byte_of[cp]);
    }
    id_bytes[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  return id_bytes;
}

// byte_id[b]: the id of the token for byte b alone; every byte must have one.
void byte_ids_of(const EncoderJson& enc, int32_t (&byte_id)[256]) {
  auto utf8_of = [](char32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
  };
  for (int b = 0; b < 256; ++b) {
    auto it = enc.id_of.find(utf8_of(kByteChars.of_byte[b]));
    if (it == enc.id_of.end())
      xgrad::fail("GPT2Tokenizer", "encoder.json has no token for byte ", b, " ('",
                  utf8_of(kByteChars.of_byte[b]), "')");
    byte_id[b] = it->second;
  }
}

// vocab.bpe: the merges in rank order, and the rank Encoder.js gives each "left,right" key.
struct VocabBpe {
  std::vector<std::pair<std::string, std::string>> merges;
  std::unordered_map<std::string, int64_t> rank_of_key;
};

// Encoder.js takes the lines of split('\n') but the first and the last (so a file must end
// with a newline for its last merge to count), and splits each on whitespace.
VocabBpe parse_vocab_bpe(std::string_view vocab_bpe) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0;;) {
    std::size_t nl = vocab_bpe.find('\n', start);
    lines.push_back(vocab_bpe.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  VocabBpe out;
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) {
    std::vector<std::string> parts(1);
    for (char32_t cp : decode_utf8(lines[i], "vocab.bpe line " + std::to_string(i + 1))) {
      if (char_class(cp) == CharClass::kSpace) {
        if (!parts.back().empty()) parts.emplace_back();
      } else {
        append_utf8(parts.back(), cp);
      }
    }
    if (parts.back().empty()) parts.pop_back();
    if (parts.empty()) continue;  // a blank line merges nothing
    if (parts.size() != 2)
      xgrad::fail("GPT2Tokenizer", "vocab.bpe line ", i + 1, " has ", parts.size(),
                  " fields; expected two tokens separated by a space");
    out.merges.emplace_back(parts[0], parts[1]);
    // Encoder.js keys its ranks by the string "left,right", so two merges whose parts join
    // to the same string share the later one's rank (GPT-2's own file has no such pair).
    out.rank_of_key[parts[0] + "," + parts[1]] = static_cast<int64_t>(out.merges.size() - 1);
  }
  return out;
}

}  // namespace

GPT2Tokenizer GPT2Tokenizer::from_strings(std::string_view vocab_bpe, std::string_view encoder_json) {
  GPT2Tokenizer t;
  EncoderJson enc = parse_encoder_json(encoder_json);
  t.encoder_ = enc.tokens;
  t.id_bytes_ = id_bytes_of(enc);
  byte_ids_of(enc, t.byte_id_);
  VocabBpe bpe = parse_vocab_bpe(vocab_bpe);
  t.merges_ = std::move(bpe.merges);
  const auto& id_of = enc.id_of;
  for (std::size_t r = 0; r < t.merges_.size(); ++r) {
    const auto& [left, right] = t.merges_[r];
    auto l = id_of.find(left), rt = id_of.find(right), res = id_of.find(left + right);
    if (l == id_of.end() || rt == id_of.end() || res == id_of.end())
      xgrad::fail("GPT2Tokenizer", "vocab.bpe merge ", r, " ('", left, " ", right, "'): '",
                  l == id_of.end()    ? left
                  : rt == id_of.end() ? right
                                      : left + right,
                  "' is not in encoder.json");
    t.table_.add(l->second, rt->second, bpe.rank_of_key.at(left + "," + right), res->second);
  }
  return t;
}

GPT2Tokenizer GPT2Tokenizer::from_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("type", "") != "gpt2" || !j.contains("merges") ||
      !j["merges"].is_array() || !j.contains("encoder") || !j["encoder"].is_object())
    xgrad::fail("GPT2Tokenizer", "expected {\"type\": \"gpt2\", \"merges\": [...], \"encoder\": {...}}");
  std::string bpe = "#version: 0.2\n";
  for (const auto& m : j["merges"]) {
    if (!m.is_string()) xgrad::fail("GPT2Tokenizer", "a merge is not a string");
    bpe += m.get<std::string>();
    bpe += '\n';
  }
  return from_strings(bpe, j["encoder"].dump());
}

std::string GPT2Tokenizer::to_json() const {
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [l, r] : merges_) merges.push_back(l + " " + r);
  nlohmann::json enc = nlohmann::json::object();
  for (const auto& [token, id] : encoder_) enc[token] = id;
  return nlohmann::json{{"type", "gpt2"}, {"merges", merges}, {"encoder", enc}}.dump();
}

std::vector<int64_t> GPT2Tokenizer::encode(std::string_view text) const {
  return encode_pieces(text, byte_id_, table_);
}

std::string GPT2Tokenizer::decode_bytes(const std::vector<int64_t>& ids) const {
  return join_bytes(ids, id_bytes_, "GPT2Tokenizer.decode");
}

std::string GPT2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes = decode_bytes(ids);
  // TextDecoder("utf-8") drops one leading byte order mark
  if (bytes.size() >= 3 && bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) bytes.erase(0, 3);
  return decode_utf8_replace(bytes);
}

int64_t GPT2Tokenizer::eot_token() const {
  for (const auto& [token, id] : encoder_)
    if (token == "<|endoftext|>") return id;
  xgrad::fail("GPT2Tokenizer", "the vocabulary has no <|endoftext|> token");
}

// ---------------------------------------------------------------- BPETokenizer
void BPETokenizer::rebuild() {
  id_bytes_.assign(256 + merges_.size(), std::string());
  for (int b = 0; b < 256; ++b) id_bytes_[static_cast<std::size_t>(b)] = std::string(1, static_cast<char>(b));
  table_ = detail::MergeTable();
  for (std::size_t i = 0; i < merges_.size(); ++i) {
    const auto [l, r] = merges_[i];
    const auto id = static_cast<int32_t>(256 + i);
    id_bytes_[static_cast<std::size_t>(id)] =
        id_bytes_[static_cast<std::size_t>(l)] + id_bytes_[static_cast<std::size_t>(r)];
    table_.add(l, r, static_cast<int64_t>(i), id);
  }
}

BPETokenizer BPETokenizer::from_merges(std::vector<std::pair<int32_t, int32_t>> merges) {
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const int64_t limit = 256 + static_cast<int64_t>(i);
    const auto [l, r] = merges[i];
    if (l < 0 || r < 0 || l >= limit || r >= limit)
      xgrad::fail("BPETokenizer", "merge ", i, " (", l, ", ", r, ") must join two ids in [0, ", limit,
                  "): the bytes and the earlier merges");
  }
  if (merges.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max() - 256))
    xgrad::fail("BPETokenizer", "too many merges (", merges.size(), ")");
  BPETokenizer t;
  t.merges_ = std::move(merges);
  t.rebuild();
  return t;
}

namespace {

// The distinct pieces of a corpus (GPT-2's pre-tokenizer) as byte ids, sorted, with how often
// each occurs.
struct Words {
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> count;
};

Words distinct_pieces(std::string_view corpus) {
  std::unordered_map<std::string_view, int64_t> freq;
  for (std::string_view piece : gpt2_split(corpus)) ++freq[piece];
  std::vector<std::pair<std::string_view, int64_t>> distinct(freq.begin(), freq.end());
  std::sort(distinct.begin(), distinct.end());
  Words words;
  for (const auto& [piece, n] : distinct) {
    words.ids.emplace_back(piece.begin(), piece.end());
    for (int32_t& b : words.ids.back()) b = static_cast<unsigned char>(b);
    words.count.push_back(n);
  }
  return words;
}

// A pair (a, b) as one key; keys order by a, then b.
uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Pair counts over the words, the words each pair occurs in, and a max-heap of (count, pair)
// entries (an entry whose count is no longer the pair's is stale and skipped when popped).
class PairCounts {
 public:
  explicit PairCounts(const Words& words) {
    for (std::size_t w = 0; w < words.ids.size(); ++w)
      for (std::size_t p = 0; p + 1 < words.ids[w].size(); ++p) {
        const uint64_t k = pair_key(words.ids[w][p], words.ids[w][p + 1]);
        count_[k] += words.count[w];
        auto& ws = where_[k];
        if (ws.empty() || ws.back() != static_cast<int32_t>(w)) ws.push_back(static_cast<int32_t>(w));
      }
    for (const auto& [k, n] : count_) heap_.emplace(n, k);
    seen_.assign(words.ids.size(), -1);
  }

  // The most frequent pair (on a tie the smaller one), if one occurs at least twice.
  bool pop_best(uint64_t& key) {
    while (!heap_.empty()) {
      auto [n, k] = heap_.top();
      heap_.pop();
      auto pc = count_.find(k);
      if (pc == count_.end() || pc->second != n) continue;  // stale
      if (n < 2) return false;                              // no pair occurs twice
      key = k;
      return true;
    }
    return false;
  }

  // Replaces pair k by the new token `id` in every word it occurs in, updating the counts.
  void merge(uint64_t k, int32_t id, Words& words) {
    const auto a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xFFFFFFFFu);
    changed_.clear();
    const std::vector<int32_t> ws = std::move(where_[k]);
    where_.erase(k);
    for (int32_t w : ws) {
      if (seen_[static_cast<std::size_t>(w)] == id) continue;
      seen_[static_cast<std::size_t>(w)] = id;
      std::vector<int32_t>& word = words.ids[static_cast<std::size_t>(w)];
      const int64_t c = words.count[static_cast<std::size_t>(w)];
      add_pairs(word, w, -c, false);  // its old pairs keep their lists of words
      merged_.clear();
      for (std::size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
          merged_.push_back(id);
          i += 2;
        } else {
          merged_.push_back(word[i++]);
        }
      }
      word.swap(merged_);
      add_pairs(word, w, c, true);
    }
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
    for (uint64_t ck : changed_) {
      auto it = count_.find(ck);
      if (it->second <= 0) count_.erase(it);
      else heap_.emplace(it->second, ck);
    }
  }

 private:
  // Adds c to the count of every pair of word w, and lists w among each pair's words.
  void add_pairs(const std::vector<int32_t>& word, int32_t w, int64_t c, bool list_word) {
    for (std::size_t p = 0; p + 1 < word.size(); ++p) {
      const uint64_t pk = pair_key(word[p], word[p + 1]);
      count_[pk] += c;
      changed_.push_back(pk);
      if (!list_word) continue;
      auto& wl = where_[pk];
      if (wl.empty() || wl.back() != w) wl.push_back(w);
    }
  }

  using Entry = std::pair<int64_t, uint64_t>;
  // most frequent first; on a tie the smaller pair
  struct Later {
    bool operator()(const Entry& x, const Entry& y) const {
      return x.first != y.first ? x.first < y.first : x.second > y.second;
    }
  };
  std::unordered_map<uint64_t, int64_t> count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
  std::vector<int64_t> seen_;  // the merge that last visited each word
  std::vector<uint64_t> changed_;
  std::vector<int32_t> merged_;
};

}  // namespace

BPETokenizer BPETokenizer::train(std::string_view corpus, int64_t num_merges) {
  if (num_merges < 0) xgrad::fail("BPETokenizer.train", "num_merges must be >= 0, got ", num_merges);
  Words words = distinct_pieces(corpus);
  PairCounts pairs(words);
  // merge the best pair everywhere, num_merges times
  std::vector<std::pair<int32_t, int32_t>> merges;
  uint64_t k = 0;
  while (static_cast<int64_t>(merges.size()) < num_merges && pairs.pop_best(k)) {
    const auto id = static_cast<int32_t>(256 + merges.size());
    merges.emplace_back(static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xFFFFFFFFu));
    pairs.merge(k, id, words);
  }
  return from_merges(std::move(merges));
}

BPETokenizer BPETokenizer::from_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("type", "") != "bpe" || !j.contains("merges") ||
      !j["merges"].is_array())
    xgrad::fail("BPETokenizer", "expected {\"type\": \"bpe\", \"version\": 1, \"merges\": [[a, b], ...]}");
  if (!j.contains("version") || j["version"] != 1)
    xgrad::fail("BPETokenizer", "unsupported version ", j.value("version", nlohmann::json()).dump(),
                " (this build reads version 1)");
  std::vector<std::pair<int32_t, int32_t>> merges;
  for (std::size_t i = 0; i < j["merges"].size(); ++i) {
    const auto& m = j["merges"][i];
    if (!m.is_array() || m.size() != 2 || !m[0].is_number_integer() || !m[1].is_number_integer() ||
        m[0].get<int64_t>() < 0 || m[1].get<int64_t>() < 0 ||
        m[0].get<int64_t>() > std::numeric_limits<int32_t>::max() ||
        m[1].get<int64_t>() > std::numeric_limits<int32_t>::max())
      xgrad::fail("BPETokenizer", "merge ", i, " is not a pair of token ids [a, b]");
    merges.emplace_back(m[0].get<int32_t>(), m[1].get<int32_t>());
  }
  return from_merges(std::move(merges));
}

std::string BPETokenizer::to_json() const {
  // one merge per line, so the file reads (and diffs) as a list
  std::string out = "{\"type\": \"bpe\", \"version\": 1, \"merges\": [";
  for (std::size_t i = 0; i < merges_.size(); ++i) {
    out += i ? ",\n  [" : "\n  [";
    out += std::to_string(merges_[i].first) + ", " + std::to_string(merges_[i].second) + "]";
  }
  out += merges_.empty() ? "]}\n" : "\n]}\n";
  return out;
}

BPETokenizer BPETokenizer::load(const std::string& path) {
  const std::string text = read_text_file(path, "BPETokenizer.load");
  try {
    return from_json(text);
  } catch (const xgrad::Error& e) {
    xgrad::fail("BPETokenizer.load", path, ": ", e.what());
  }
}

void BPETokenizer::save(const std::string& path) const {
  write_file_atomically(path, to_json(), "BPETokenizer.save");
}

std::vector<int64_t> BPETokenizer::encode(std::string_view text) const {
  int32_t byte_id[256];
  for (int b = 0; b < 256; ++b) byte_id[b] = b;
  return encode_pieces(text, byte_id, table_);
}

std::string BPETokenizer::decode_bytes(const std::vector<int64_t>& ids) const {
  return join_bytes(ids, id_bytes_, "BPETokenizer.decode");
}

std::string BPETokenizer::decode(const std::vector<int64_t>& ids) const {
  return decode_utf8_replace(decode_bytes(ids));
}

const std::string& BPETokenizer::token_bytes(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    xgrad::fail("BPETokenizer", "token id ", id, " is outside [0, ", vocab_size(), ")");
  return id_bytes_[static_cast<std::size_t>(id)];
}

}  // namespace xgrad::text
