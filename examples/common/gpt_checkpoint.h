// examples/common/gpt_checkpoint.h: what a GPT's or a Llama's checkpoint says besides its
// tensors, as train_lm writes it (and tests/fixtures/gen_safetensors.py, from PyTorch): the
// metadata of a safetensors file read with the file named in every problem, the model config
// as JSON (walking nn's table of its fields) and the model file's config and tokenizer.
#pragma once
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "flag_range.h"  // ConfigError
#include "xgrad/io/checkpoint.h"
#include "xgrad/io/safetensors.h"
#include "xgrad/nn/llama.h"
#include "xgrad/nn/transformer.h"
#include "xgrad/text/tokenizer.h"

namespace xgrad_examples {

using xgrad::nn::GPTConfig;
using xgrad::nn::LlamaConfig;

// The metadata of one file of a checkpoint; a missing key, bad JSON or bad count throws
// xgrad::Error naming `file` (`hint` follows a missing key).
struct CheckpointMeta {
  const xgrad::io::SafetensorsFile& f;
  std::string file;
  // The metadata of `name`, a file of `ck`.
  static CheckpointMeta of(const xgrad::io::Checkpoint& ck, const char* name) {
    return {ck.at(name), (ck.dir / name).string()};
  }

  static constexpr const char* kHint = " (not a train_lm checkpoint?)";
  const std::string& str(const std::string& key, const char* hint = kHint) const;
  nlohmann::json json(const std::string& key, const char* hint = kHint) const;
  int64_t count(const std::string& key) const;   // a non-negative integer
  double seconds(const std::string& key) const;  // a finite number >= 0
  // A Generator's get_state() in base64 (xgrad::io::base64_encode), of the right size.
  std::vector<uint8_t> rng_state(const std::string& key) const;
};

// A model config as JSON, and back: every row of its table of fields (GPTConfig's,
// xgrad/nn/transformer.h; LlamaConfig's, xgrad/nn/llama.h). A saved config without
// tie_weights or activation_checkpointing keeps the default (untied, not checkpointed, for a
// GPT). from_json throws ConfigError for a missing, mistyped or invalid field
// (nn::config_problem).
inline bool is_optional_field(std::string_view name) {
  return name == "tie_weights" || name == "activation_checkpointing";
}
template <class Config>
nlohmann::json to_json(const Config& c) {
  nlohmann::json j = nlohmann::json::object();
  Config::for_each_field([&](const auto& f) { j[f.name] = c.*f.member; });
  return j;
}
template <class Config>
Config config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) config_error("the saved model config is not a JSON object");
  Config c;
  Config::for_each_field([&](const auto& f) {
    using T = std::remove_cvref_t<decltype(c.*f.member)>;
    const char* k = f.name;
    if (is_optional_field(k) && !j.contains(k)) return;
    const bool ok = j.contains(k) && (std::is_same_v<T, int64_t> ? j[k].is_number_integer()
                                      : std::is_same_v<T, bool>  ? j[k].is_boolean()
                                                                 : j[k].is_number());
    if (!ok)
      config_error("the saved model config has no ", std::is_same_v<T, int64_t> ? "integer '" : "'", k, "'");
    c.*f.member = j[k].template get<T>();
  });
  const std::string problem = xgrad::nn::config_problem(c);
  if (!problem.empty()) config_error("the saved model config is invalid: ", problem);
  return c;
}
inline GPTConfig gpt_config_from_json(const nlohmann::json& j) { return config_from_json<GPTConfig>(j); }
// "emb_dim 32 in the checkpoint vs 64 now, ...": the fields that differ. Activation
// checkpointing is how the model is trained, not what it computes: it may differ.
template <class Config>
std::string describe_config_diff(const Config& saved, const Config& now) {
  std::ostringstream os;
  os << std::boolalpha;
  const char* sep = "";
  Config::for_each_field([&](const auto& f) {
    if (saved.*f.member == now.*f.member || std::string_view(f.name) == "activation_checkpointing") return;
    os << sep << f.name << " " << saved.*f.member << " in the checkpoint vs " << now.*f.member << " now";
    sep = ", ";
  });
  return os.str();
}

// The model file's "arch" (none: gpt), "config" and "vocab" (the tokenizer's to_json()),
// checked against each other; throws xgrad::Error naming the file.
struct SavedModel {
  std::string arch = "gpt";  // gpt: `config` is the model's; llama: `llama` is
  GPTConfig config;          // a Llama's: its sizes (no dropout, no biases)
  LlamaConfig llama;
  std::shared_ptr<const xgrad::text::Tokenizer> tokenizer;
};
SavedModel read_saved_model(const CheckpointMeta& model_file, const char* hint = CheckpointMeta::kHint);

}  // namespace xgrad_examples
