// xgrad/text/pretokenize.h: GPT-2's pre-tokenizer, the regular expression
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// applied left to right as JavaScript's `text.matchAll(pat)` with the `gu` flags does (the way
// gpt-3-encoder's Encoder.js runs it), written out by hand: std::regex has no \p{L}. Byte-level
// BPE runs on each piece separately, so no token spans two pieces.
//
// The character classes are Node's (text/src/unicode_table.inc, generated from the machine's
// Node.js by text/tools/gen_unicode_table.js): \p{L} letters, \p{N} numbers, and JavaScript's
// \s (tab, LF, VT, FF, CR, space, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
// U+205F, U+3000, U+FEFF), which differs from Python's \s (no U+001C-U+001F, no U+0085).
#pragma once
#include <string_view>
#include <vector>

namespace xgrad::text {

// The pieces of `text` (UTF-8), as views into it; concatenated they give `text` back.
// Invalid UTF-8 throws xgrad::Error with the byte offset (see decode_utf8).
//   gpt2_split("Hello world's  2024!") -> "Hello" " world" "'s" " " " 2024" "!"
std::vector<std::string_view> gpt2_split(std::string_view text);

// The class of a code point as the pattern sees it.
enum class CharClass : unsigned char { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };
CharClass char_class(char32_t cp);
// The Unicode version of the class table ("17.0").
const char* unicode_version();

}  // namespace xgrad::text
