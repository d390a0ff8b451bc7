// text/src/utf8.cpp: see xgrad/text/utf8.h.
#include "xgrad/text/utf8.h"

#include <cstdio>

#include "xgrad/error.h"

namespace xgrad::text {

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
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
      min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
      min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
      min = 0x10000;
    } else if (c >= 0x80 && c <= 0xBF) {
      bad(i, "unexpected continuation byte");
    } else {
      bad(i, "byte never valid in UTF-8");
    }
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

// reference: WHATWG Encoding Standard, 4.1 "UTF-8 decoder" (the error mode "replacement").
std::string decode_utf8_replace(std::string_view bytes) {
  constexpr char32_t kReplacement = 0xFFFD;
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = bytes.size(), i = 0;
  char32_t cp = 0;
  int needed = 0, seen = 0;
  unsigned char lower = 0x80, upper = 0xBF;
  while (i < n) {
    const unsigned char b = s[i];
    if (needed == 0) {
      ++i;
      if (b < 0x80) {
        out += static_cast<char>(b);
      } else if (b >= 0xC2 && b <= 0xDF) {
        needed = 1;
        cp = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower = 0xA0;
        if (b == 0xED) upper = 0x9F;
        needed = 2;
        cp = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower = 0x90;
        if (b == 0xF4) upper = 0x8F;
        needed = 3;
        cp = b & 0x07;
      } else {
        append_utf8(out, kReplacement);
      }
      continue;
    }
    if (b < lower || b > upper) {  // the sequence ends before this byte, which is read again
      needed = seen = 0;
      cp = 0;
      lower = 0x80;
      upper = 0xBF;
      append_utf8(out, kReplacement);
      continue;
    }
    ++i;
    lower = 0x80;
    upper = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
    if (++seen == needed) {
      append_utf8(out, cp);
      needed = seen = 0;
      cp = 0;
    }
  }
  if (needed != 0) append_utf8(out, kReplacement);
  return out;
}

}  // namespace xgrad::text
