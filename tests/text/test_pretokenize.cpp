// tests/text/test_pretokenize.cpp: GPT-2's split pattern, written by hand, against the pieces
// JavaScript's matchAll gives (the fixture), and the Unicode class table against node's \p{L},
// \p{N} and \s at every range boundary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_message.h"
#include "text_fixtures.h"
#include "xgrad/text/pretokenize.h"

using xgrad::text::char_class;
using xgrad::text::CharClass;
using xgrad::text::gpt2_split;

namespace {
std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view p : gpt2_split(text)) out.emplace_back(p);
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST(Gpt2Split, HandCheckedCases) {
  EXPECT_EQ(split("Hello world's  2024!"), (V{"Hello", " world", "'s", " ", " 2024", "!"}));
  EXPECT_EQ(split(""), V{});
  // a run of spaces gives its last one to the word after it
  EXPECT_EQ(split("a   b"), (V{"a", "  ", " b"}));
  // ... unless the run ends the text, or it is a single character before a non-space
  EXPECT_EQ(split("a   "), (V{"a", "   "}));
  EXPECT_EQ(split("a\nb"), (V{"a", "\n", "b"}));
  EXPECT_EQ(split("a\n\n b"), (V{"a", "\n\n", " b"}));
  EXPECT_EQ(split("a \n\nb"), (V{"a", " \n", "\n", "b"}));
  // contractions are lower case and ASCII only; anything else is punctuation
  EXPECT_EQ(split("I'm you'll DON'T"), (V{"I", "'m", " you", "'ll", " DON", "'", "T"}));
  EXPECT_EQ(split("''s"), (V{"''", "s"}));
  // letters, numbers and the rest do not mix; a space joins the run after it
  EXPECT_EQ(split("abc123def !?x"), (V{"abc", "123", "def", " !?", "x"}));
  EXPECT_EQ(split("caf\xC3\xA9 \xF0\x9F\x90\xB3!"), (V{"caf\xC3\xA9", " \xF0\x9F\x90\xB3!"}));
  // the pieces always give the text back
  std::string all;
  for (const auto& p : split(" x  y\t\tz ")) all += p;
  EXPECT_EQ(all, " x  y\t\tz ");
}

TEST(Gpt2Split, InvalidUtf8IsAnError) {
  xgrad::testing::expect_error([] { gpt2_split("ok \xC3("); },
                               {"text to tokenize", "byte offset 4", "continuation"});
  xgrad::testing::expect_error([] { gpt2_split("\xED\xA0\x80"); }, {"surrogate"});
}

TEST(Gpt2Split, MatchesJavaScriptMatchAll) {
  for (const auto& c : text_test::gpt2_fixture()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(split(c["text"].get<std::string>()), c["pieces"].get<V>());
  }
}

TEST(UnicodeClasses, MatchNodeAtEveryRangeBoundary) {
  const auto& samples = text_test::gpt2_fixture()["class_samples"];
  ASSERT_GT(samples.size(), 1000u);
  int64_t wrong = 0;
  for (const auto& s : samples) {
    const auto cp = s[0].get<char32_t>();
    const int expected = s[1].get<int>();
    if (static_cast<int>(char_class(cp)) != expected && ++wrong <= 10)
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp) << ": class "
                    << static_cast<int>(char_class(cp)) << ", node says " << expected;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(std::string(xgrad::text::unicode_version()),
            text_test::gpt2_fixture()["unicode"].get<std::string>());
}

TEST(UnicodeClasses, JavaScriptWhitespace) {
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u00A0', U'\u1680', U'\u2000', U'\u200A',
                     U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000', U'\uFEFF'})
    EXPECT_EQ(char_class(c), CharClass::kSpace) << static_cast<uint32_t>(c);
  // Python's \s has these, JavaScript's has not
  for (char32_t c : {U'\u001C', U'\u001F', U'\u0085', U'\u200B'})
    EXPECT_EQ(char_class(c), CharClass::kOther) << static_cast<uint32_t>(c);
  EXPECT_EQ(char_class(U'a'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\U0001D518'), CharClass::kLetter);  // MATHEMATICAL FRAKTUR CAPITAL U
  EXPECT_EQ(char_class(U'\u00BD'), CharClass::kNumber);      // VULGAR FRACTION ONE HALF (No)
  EXPECT_EQ(char_class(U'\u0301'), CharClass::kOther);       // combining acute (Mn)
  EXPECT_EQ(char_class(U'\U0010FFFF'), CharClass::kOther);
}
