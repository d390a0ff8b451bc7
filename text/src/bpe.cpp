// text/src/bpe.cpp: byte-level BPE, GPT-2's and a trainable one (see xgrad/text/tokenizer.h).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <tuple>

#include "xgrad/error.h"
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

std::string read_text_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  if (!in) xgrad::fail(op, "cannot open ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) xgrad::fail(op, "cannot read ", path);
  return ss.str();
}

// A temporary file beside `path`, fsync, rename: a reader sees the old file or the new one.
void write_file_atomically(const std::string& path, const std::string& data, const char* op) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) xgrad::fail(op, "cannot create ", tmp, ": ", std::strerror(errno));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      xgrad::fail(op, "cannot write ", tmp, ": ", std::strerror(err));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    xgrad::fail(op, "cannot write ", tmp, ": ", std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    xgrad::fail(op, "cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
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

GPT2Tokenizer GPT2Tokenizer::from_strings(std::string_view vocab_bpe, std::string_view encoder_json) {
  GPT2Tokenizer t;
  // encoder.json: {token: id}
  nlohmann::json enc = nlohmann::json::parse(encoder_json, nullptr, false);
  if (enc.is_discarded() || !enc.is_object())
    xgrad::fail("GPT2Tokenizer", "encoder.json is not a JSON object {token: id}");
  std::unordered_map<std::string, int32_t> id_of;
  int64_t max_id = -1;
  for (auto& [token, value] : enc.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= std::numeric_limits<int32_t>::max())
      xgrad::fail("GPT2Tokenizer", "encoder.json: the id of token '", token,
                  "' is not an integer in [0, 2^31 - 1)");
    const int64_t id = value.get<int64_t>();
    id_of.emplace(token, static_cast<int32_t>(id));
    t.encoder_.emplace_back(token, id);
    max_id = std::max(max_id, id);
  }
  if (max_id < 0) xgrad::fail("GPT2Tokenizer", "encoder.json is empty");
  t.id_bytes_.assign(static_cast<std::size_t>(max_id + 1), std::string());
  std::vector<bool> id_used(static_cast<std::size_t>(max_id + 1), false);
  for (const auto& [token, id] : t.encoder_) {
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
    t.id_bytes_[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  auto utf8_of = [](char32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
  };
  for (int b = 0; b < 256; ++b) {
    auto it = id_of.find(utf8_of(kByteChars.of_byte[b]));
    if (it == id_of.end())
      xgrad::fail("GPT2Tokenizer", "encoder.json has no token for byte ", b, " ('",
                  utf8_of(kByteChars.of_byte[b]), "')");
    t.byte_id_[b] = it->second;
  }

  // vocab.bpe. Encoder.js takes the lines of split('\n') but the first and the last (so a
  // file must end with a newline for its last merge to count), and splits each on whitespace.
  std::vector<std::string_view> lines;
  for (std::size_t start = 0;;) {
    std::size_t nl = vocab_bpe.find('\n', start);
    lines.push_back(vocab_bpe.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  std::unordered_map<std::string, int64_t> rank_of_key;  // see below
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
    t.merges_.emplace_back(parts[0], parts[1]);
    // Encoder.js keys its ranks by the string "left,right", so two merges whose parts join
    // to the same string share the later one's rank (GPT-2's own file has no such pair).
    rank_of_key[parts[0] + "," + parts[1]] = static_cast<int64_t>(t.merges_.size() - 1);
  }
  for (std::size_t r = 0; r < t.merges_.size(); ++r) {
    const auto& [left, right] = t.merges_[r];
    auto l = id_of.find(left), rt = id_of.find(right), res = id_of.find(left + right);
    if (l == id_of.end() || rt == id_of.end() || res == id_of.end())
      xgrad::fail("GPT2Tokenizer", "vocab.bpe merge ", r, " ('", left, " ", right, "'): '",
                  l == id_of.end()    ? left
                  : rt == id_of.end() ? right
                                      : left + right,
                  "' is not in encoder.json");
    t.table_.add(l->second, rt->second, rank_of_key.at(left + "," + right), res->second);
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

BPETokenizer BPETokenizer::train(std::string_view corpus, int64_t num_merges) {
  if (num_merges < 0) xgrad::fail("BPETokenizer.train", "num_merges must be >= 0, got ", num_merges);
  // 1. the distinct pieces and how often each occurs
  std::unordered_map<std::string_view, int64_t> freq;
  for (std::string_view piece : gpt2_split(corpus)) ++freq[piece];
  std::vector<std::pair<std::string_view, int64_t>> distinct(freq.begin(), freq.end());
  std::sort(distinct.begin(), distinct.end());
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> count;
  for (const auto& [piece, n] : distinct) {
    words.emplace_back(piece.begin(), piece.end());
    for (int32_t& b : words.back()) b = static_cast<unsigned char>(b);
    count.push_back(n);
  }

  // 2. pair counts, the words each pair occurs in, and a max-heap of (count, pair) entries
  // (an entry whose count is no longer the pair's is stale and skipped when popped)
  auto key = [](int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  };
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (std::size_t w = 0; w < words.size(); ++w)
    for (std::size_t p = 0; p + 1 < words[w].size(); ++p) {
      const uint64_t k = key(words[w][p], words[w][p + 1]);
      pair_count[k] += count[w];
      auto& ws = where[k];
      if (ws.empty() || ws.back() != static_cast<int32_t>(w)) ws.push_back(static_cast<int32_t>(w));
    }
  // most frequent first; on a tie the smaller pair (its key orders by left id, then right id)
  using Entry = std::pair<int64_t, uint64_t>;
  auto later = [](const Entry& x, const Entry& y) {
    return x.first != y.first ? x.first < y.first : x.second > y.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  for (const auto& [k, n] : pair_count) heap.emplace(n, k);

  // 3. merge the best pair everywhere, num_merges times
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<int64_t> seen(words.size(), -1);  // the merge that last visited each word
  std::vector<uint64_t> changed;
  std::vector<int32_t> merged;
  while (static_cast<int64_t>(merges.size()) < num_merges && !heap.empty()) {
    auto [n, k] = heap.top();
    heap.pop();
    auto pc = pair_count.find(k);
    if (pc == pair_count.end() || pc->second != n) continue;  // stale
    if (n < 2) break;                                         // no pair occurs twice
    const auto a = static_cast<int32_t>(k >> 32), b = static_cast<int32_t>(k & 0xFFFFFFFFu);
    const auto id = static_cast<int32_t>(256 + merges.size());
    merges.emplace_back(a, b);
    changed.clear();
    const std::vector<int32_t> ws = std::move(where[k]);
    where.erase(k);
    for (int32_t w : ws) {
      if (seen[static_cast<std::size_t>(w)] == id) continue;
      seen[static_cast<std::size_t>(w)] = id;
      std::vector<int32_t>& word = words[static_cast<std::size_t>(w)];
      const int64_t c = count[static_cast<std::size_t>(w)];
      for (std::size_t p = 0; p + 1 < word.size(); ++p) {
        const uint64_t pk = key(word[p], word[p + 1]);
        pair_count[pk] -= c;
        changed.push_back(pk);
      }
      merged.clear();
      for (std::size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
          merged.push_back(id);
          i += 2;
        } else {
          merged.push_back(word[i++]);
        }
      }
      word.swap(merged);
      for (std::size_t p = 0; p + 1 < word.size(); ++p) {
        const uint64_t pk = key(word[p], word[p + 1]);
        pair_count[pk] += c;
        changed.push_back(pk);
        auto& wl = where[pk];
        if (wl.empty() || wl.back() != w) wl.push_back(w);
      }
    }
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    for (uint64_t ck : changed) {
      auto it = pair_count.find(ck);
      if (it->second <= 0) pair_count.erase(it);
      else heap.emplace(it->second, ck);
    }
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
