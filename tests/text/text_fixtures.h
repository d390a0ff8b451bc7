// tests/text/text_fixtures.h: tests/fixtures/gpt2_tokenizer.json (made by
// tests/fixtures/gen_gpt2_tokenizer.js with gpt-3-encoder's Encoder.js) and the tokenizers
// the tests build from the fixtures.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "xgrad/text/tokenizer.h"

namespace text_test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline const nlohmann::json& gpt2_fixture() {
  static const nlohmann::json j = nlohmann::json::parse(read_file(XGRAD_FIXTURES_DIR "/gpt2_tokenizer.json"));
  return j;
}

// The part of GPT-2's vocabulary the fixture texts use (tests/fixtures/gpt2_mini/).
inline const xgrad::text::GPT2Tokenizer& gpt2_mini() {
  static const auto tok = xgrad::text::GPT2Tokenizer::from_files(
      XGRAD_FIXTURES_DIR "/gpt2_mini/vocab.bpe", XGRAD_FIXTURES_DIR "/gpt2_mini/encoder.json");
  return tok;
}

// <repo>/data, where scripts/get_gpt2_vocab.sh and scripts/get_corpus.sh put their files.
inline std::filesystem::path data_dir() {
  if (const char* d = std::getenv("XGRAD_DATA_DIR")) return d;
  return std::filesystem::path(XGRAD_FIXTURES_DIR) / ".." / ".." / "data";
}

}  // namespace text_test
