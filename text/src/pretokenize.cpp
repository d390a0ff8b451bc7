// text/src/pretokenize.cpp: see xgrad/text/pretokenize.h.
#include "xgrad/text/pretokenize.h"

#include <algorithm>
#include <array>

#include "xgrad/text/utf8.h"

namespace xgrad::text {
namespace {

struct CodePointRange {
  char32_t lo, hi;
  CharClass cls;
};
constexpr CharClass kLetter = CharClass::kLetter, kNumber = CharClass::kNumber, kSpace = CharClass::kSpace;
#include "unicode_table.inc"

std::array<CharClass, 128> ascii_classes() {
  std::array<CharClass, 128> t{};
  for (const CodePointRange& r : kCodePointRanges)
    for (char32_t c = r.lo; c <= r.hi && c < 128; ++c) t[c] = r.cls;
  return t;
}
const std::array<CharClass, 128> kAscii = ascii_classes();

// The bytes of a UTF-8 sequence, from its (valid) lead byte.
inline std::size_t sequence_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 128) return kAscii[cp];
  const CodePointRange* end = std::end(kCodePointRanges);
  const CodePointRange* r =
      std::upper_bound(std::begin(kCodePointRanges), end, cp,
                       [](char32_t c, const CodePointRange& range) { return c < range.lo; });
  if (r == std::begin(kCodePointRanges)) return CharClass::kOther;
  --r;  // the last range starting at or before cp
  return cp <= r->hi ? r->cls : CharClass::kOther;
}

const char* unicode_version() { return kUnicodeVersion; }

std::vector<std::string_view> gpt2_split(std::string_view text) {
  const std::vector<char32_t> cps = decode_utf8(text, "text to tokenize");  // throws if invalid
  const std::size_t n = cps.size();
  std::vector<std::size_t> offset(n + 1);  // byte offset of each code point
  std::vector<CharClass> cls(n);
  for (std::size_t i = 0, at = 0; i < n; ++i) {
    offset[i] = at;
    at += sequence_length(static_cast<unsigned char>(text[at]));
    cls[i] = char_class(cps[i]);
  }
  offset[n] = text.size();
  auto run_end = [&](std::size_t j, CharClass c) {  // the end of the run of class c from j
    while (j < n && cls[j] == c) ++j;
    return j;
  };
  auto is = [&](std::size_t j, char c) { return j < n && cps[j] == static_cast<char32_t>(c); };

  std::vector<std::string_view> pieces;
  std::size_t i = 0;
  while (i < n) {
    std::size_t end = 0;
    // 's|'t|'re|'ve|'m|'ll|'d   (ASCII apostrophe, lower case only)
    if (cps[i] == '\'') {
      if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) end = i + 2;
      else if ((is(i + 1, 'r') && is(i + 2, 'e')) || (is(i + 1, 'v') && is(i + 2, 'e')) ||
               (is(i + 1, 'l') && is(i + 2, 'l')))
        end = i + 3;
    }
    if (end == 0) {
      if (cps[i] == ' ' && i + 1 < n && cls[i + 1] != kSpace) {
        //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+   with the optional space
        end = run_end(i + 1, cls[i + 1]);
      } else if (cls[i] != kSpace) {
        // the same three without the space
        end = run_end(i, cls[i]);
      } else {
        // \s+(?!\S) | \s+ : a run of spaces, less its last one when a non-space follows
        // (that one then starts the next piece, " ?\p{L}+" and the like), unless it is alone
        const std::size_t k = run_end(i, kSpace);
        end = (k == n || k - i == 1) ? k : k - 1;
      }
    }
    pieces.push_back(text.substr(offset[i], offset[end] - offset[i]));
    i = end;
  }
  return pieces;
}

}  // namespace xgrad::text
