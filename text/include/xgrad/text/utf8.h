// xgrad/text/utf8.h: strict UTF-8 decoding and encoding, shared by the tokenizers.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::text {

// Strict UTF-8 decoding (RFC 3629): overlong forms, surrogates, code points above U+10FFFF,
// stray continuation bytes and truncated sequences throw xgrad::Error naming `source` and the
// byte offset, e.g. "utf8: corpus.txt: invalid UTF-8 at byte offset 2 (byte 0x80): ...".
std::vector<char32_t> decode_utf8(std::string_view text, const std::string& source);
// Appends the UTF-8 form of one code point.
void append_utf8(std::string& out, char32_t cp);

// Decodes bytes as the WHATWG Encoding Standard's UTF-8 decoder does (JavaScript's
// `new TextDecoder("utf-8").decode(bytes)`, what gpt-3-encoder's decode uses): each maximal
// invalid subsequence becomes one U+FFFD. Never throws. (TextDecoder also drops one leading
// byte order mark; GPT2Tokenizer::decode does that itself, this function keeps it.)
std::string decode_utf8_replace(std::string_view bytes);

}  // namespace xgrad::text
