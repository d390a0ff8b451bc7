// examples/common/gpt_checkpoint.h: what a GPT checkpoint says besides its tensors, as
// train_lm writes it (and tests/fixtures/gen_safetensors.py, from PyTorch): the metadata of a
// safetensors file read with the file named in every problem, the GPTConfig as JSON (walking
// nn's table of its fields, xgrad/nn/transformer.h) and the model file's config and tokenizer.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flag_range.h"  // ConfigError
#include "xgrad/io/safetensors.h"
#include "xgrad/nn/transformer.h"
#include "xgrad/text/tokenizer.h"

namespace xgrad_examples {

using xgrad::nn::GPTConfig;

// The metadata of one file of a checkpoint; a missing key, bad JSON or bad count throws
// xgrad::Error naming `file` (`hint` follows a missing key).
struct CheckpointMeta {
  const xgrad::io::SafetensorsFile& f;
  std::string file;

  static constexpr const char* kHint = " (not a train_lm checkpoint?)";
  const std::string& str(const std::string& key, const char* hint = kHint) const;
  nlohmann::json json(const std::string& key, const char* hint = kHint) const;
  int64_t count(const std::string& key) const;   // a non-negative integer
  double seconds(const std::string& key) const;  // a finite number >= 0
  // A Generator's get_state() in base64 (xgrad::io::base64_encode), of the right size.
  std::vector<uint8_t> rng_state(const std::string& key) const;
};

nlohmann::json to_json(const GPTConfig& c);
// Throws ConfigError for a missing, mistyped or invalid field (nn::config_problem).
GPTConfig gpt_config_from_json(const nlohmann::json& j);
// "emb_dim 32 in the checkpoint vs 64 now, ...": the fields that differ.
std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now);

// The model file's "config" and "vocab" (the tokenizer's to_json()), checked against each
// other; throws xgrad::Error naming the file.
struct SavedModel {
  GPTConfig config;
  std::shared_ptr<const xgrad::text::Tokenizer> tokenizer;
};
SavedModel read_saved_model(const CheckpointMeta& model_file, const char* hint = CheckpointMeta::kHint);

}  // namespace xgrad_examples
