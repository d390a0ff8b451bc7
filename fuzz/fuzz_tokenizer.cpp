// fuzz/fuzz_tokenizer.cpp: strict UTF-8 decoding, the character tokenizer, GPT-2's split
// pattern and the trainable BPE (xgrad/text/).
// Properties: decode_utf8 either throws xgrad::Error or returns code points that append_utf8
// turns back into exactly the input; a tokenizer built from valid text encodes and decodes it
// back unchanged, and its JSON vocabulary rebuilds the same tokenizer; gpt2_split's pieces are
// non-empty and give the text back; a BPE learnt from the text round-trips it. The first byte
// picks the mode: text (even) or a JSON vocabulary list (odd).
#include <cstddef>
#include <cstdint>
#include <string>

#include "one_thread.h"
#include "xgrad/error.h"
#include "xgrad/text/pretokenize.h"
#include "xgrad/text/tokenizer.h"
#include "xgrad/text/utf8.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {  // a saved vocabulary, as in a checkpoint's metadata
    try {
      auto tok = xgrad::text::CharTokenizer::from_json(text);
      if (!(xgrad::text::CharTokenizer::from_json(tok.to_json()) == tok)) __builtin_trap();
      std::string all;
      for (char32_t cp : tok.vocab()) xgrad::text::append_utf8(all, cp);
      if (tok.decode(tok.encode(all)) != all) __builtin_trap();
    } catch (const xgrad::Error&) {
    }
    return 0;
  }
  std::vector<char32_t> cps;
  try {
    cps = xgrad::text::decode_utf8(text, "fuzz");
  } catch (const xgrad::Error&) {
    return 0;  // invalid UTF-8 is refused with a message; that is all we ask
  }
  std::string back;
  for (char32_t cp : cps) xgrad::text::append_utf8(back, cp);
  if (back != text) __builtin_trap();  // decoding lost or changed bytes
  if (cps.empty()) return 0;
  auto tok = xgrad::text::CharTokenizer::from_text(text, "fuzz");
  std::vector<int64_t> ids = tok.encode(text);
  if (ids.size() != cps.size()) __builtin_trap();
  for (int64_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  if (tok.decode(ids) != text) __builtin_trap();
  if (!(xgrad::text::CharTokenizer::from_json(tok.to_json()) == tok)) __builtin_trap();
  std::string joined;
  for (std::string_view piece : xgrad::text::gpt2_split(text)) {
    if (piece.empty()) __builtin_trap();
    joined += piece;
  }
  if (joined != text) __builtin_trap();
  auto bpe = xgrad::text::BPETokenizer::train(text, 16);
  if (bpe.decode(bpe.encode(text)) != text) __builtin_trap();
  return 0;
}
