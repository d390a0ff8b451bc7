// examples/common/text_data.cpp: see text_data.h.
#include "text_data.h"

#include <algorithm>
#include <filesystem>

#include "xgrad/error.h"
#include "xgrad/io/file.h"
#include "xgrad/text/utf8.h"

namespace xgrad_examples {

namespace fs = std::filesystem;
using xgrad::text::CharTokenizer;

const char* token_unit(const Tokenizer& t) { return t.kind() == "char" ? "characters" : "tokens"; }

std::string vocab_diff(const Tokenizer& saved_tok, const Tokenizer& now_tok) {
  const auto* saved = dynamic_cast<const CharTokenizer*>(&saved_tok);
  const auto* now = dynamic_cast<const CharTokenizer*>(&now_tok);
  if (!saved || !now)
    return saved_tok.kind() == now_tok.kind()
               ? "the " + saved_tok.kind() + " vocabularies (merges) differ"
               : "the checkpoint's tokenizer is " + saved_tok.kind() + ", this run's is " + now_tok.kind();
  auto only_in = [](const CharTokenizer& a, const CharTokenizer& b) {
    std::vector<char32_t> v;
    std::set_difference(a.vocab().begin(), a.vocab().end(), b.vocab().begin(), b.vocab().end(),
                        std::back_inserter(v));
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 10; ++i) {
      s += i ? " '" : "'";
      xgrad::text::append_utf8(s, v[i]);
      s += "'";
    }
    if (v.size() > 10) s += " ...";
    return s.empty() ? std::string("none") : s;
  };
  return "only in the checkpoint: " + only_in(*saved, *now) +
         "; only in the corpus: " + only_in(*now, *saved);
}

std::string read_corpus(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    xgrad::fail("corpus", path,
                " not found; run scripts/get_corpus.sh to fetch Moby-Dick into data/moby_dick.txt, or pass "
                "--data FILE");
  if (!fs::is_regular_file(path, ec)) xgrad::fail("corpus", path, " is not a regular file");
  std::string text = xgrad::io::read_file(path);
  if (text.empty()) xgrad::fail("corpus", path, " is empty");
  xgrad::text::decode_utf8(text, path);  // throws with the byte offset of the first invalid sequence
  return text;
}

std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source) {
  using namespace xgrad::text;
  if (spec.kind == "char") return std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  if (spec.kind == "gpt2") {
    const fs::path dir = spec.gpt2_vocab_dir;
    for (const char* f : {"vocab.bpe", "encoder.json"})
      if (!fs::exists(dir / f))
        xgrad::fail(
            "tokenizer", (dir / f).string(),
            " not found; run scripts/get_gpt2_vocab.sh to fetch GPT-2's vocabulary into data/gpt2/, or "
            "pass --gpt2-vocab DIR");
    return std::make_shared<GPT2Tokenizer>(
        GPT2Tokenizer::from_files((dir / "vocab.bpe").string(), (dir / "encoder.json").string()));
  }
  if (spec.kind == "bpe")
    return std::make_shared<BPETokenizer>(spec.bpe_file.empty() ? BPETokenizer::train(text, spec.bpe_merges)
                                                                : BPETokenizer::load(spec.bpe_file));
  xgrad::fail("tokenizer", "unknown tokenizer '", spec.kind, "' (expected char, gpt2 or bpe)");
}

TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction < 1.0))
    xgrad::fail("split_tokens", "train_fraction must be in (0, 1), got ", train_fraction);
  const auto n = static_cast<std::ptrdiff_t>(static_cast<double>(ids.size()) * train_fraction);
  return {{ids.begin(), ids.begin() + n}, {ids.begin() + n, ids.end()}};
}

Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer) {
  Corpus c;
  c.tokenizer = tokenizer ? std::move(tokenizer)
                          : std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  const std::vector<int64_t> ids = c.tokenizer->encode(text);
  c.split = split_tokens(ids, 0.9);
  const char* units = token_unit(*c.tokenizer);
  const int64_t window = context_length + 1;
  const auto n_train = static_cast<int64_t>(c.split.train.size()),
             n_val = static_cast<int64_t>(c.split.val.size());
  if (n_train < window || n_val < window)
    xgrad::fail("corpus", source, " has ", ids.size(), " ", units, ": the ",
                n_val < window ? "validation" : "training", " split (", n_val < window ? n_val : n_train, " ",
                units, ") is shorter than one window of context_length + 1 = ", window,
                "; use a longer corpus (about 10 x ", window, " = ", 10 * window, " ", units,
                " at least) or a smaller --context-length");
  return c;
}

}  // namespace xgrad_examples
