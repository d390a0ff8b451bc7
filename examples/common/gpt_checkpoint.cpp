// examples/common/gpt_checkpoint.cpp: see gpt_checkpoint.h.
#include "gpt_checkpoint.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "xgrad/error.h"
#include "xgrad/io/file.h"
#include "xgrad/random.h"

namespace xgrad_examples {

const std::string& CheckpointMeta::str(const std::string& key, const char* hint) const {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) xgrad::fail("checkpoint", file, ": metadata has no '", key, "'", hint);
  return it->second;
}

nlohmann::json CheckpointMeta::json(const std::string& key, const char* hint) const {
  nlohmann::json j = nlohmann::json::parse(str(key, hint), nullptr, false);
  if (j.is_discarded()) xgrad::fail("checkpoint", file, ": metadata '", key, "' is not valid JSON");
  return j;
}

int64_t CheckpointMeta::count(const std::string& key) const {
  const std::string& text = str(key);
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    xgrad::fail("checkpoint", file, ": metadata '", key, "' is not a non-negative integer: '", text, "'");
  return v;
}

double CheckpointMeta::seconds(const std::string& key) const {
  const std::string& text = str(key);
  double v = -1;
  try {
    std::size_t used = 0;
    v = std::stod(text, &used);
    if (used != text.size()) v = -1;
  } catch (const std::exception&) {
  }
  if (!std::isfinite(v) || v < 0)
    xgrad::fail("checkpoint", file, ": metadata '", key, "' is not a finite number >= 0");
  return v;
}

std::vector<uint8_t> CheckpointMeta::rng_state(const std::string& key) const {
  std::vector<uint8_t> state = xgrad::io::base64_decode(str(key), key.c_str());
  if (state.size() != xgrad::Generator::kStateSize)
    xgrad::fail("checkpoint", file, ": an RNG state has ", state.size(), " bytes, expected ",
                xgrad::Generator::kStateSize);
  return state;
}

nlohmann::json to_json(const GPTConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  GPTConfig::for_each_field([&](const auto& f) { j[f.name] = c.*f.member; });
  return j;
}

GPTConfig gpt_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) config_error("the saved model config is not a JSON object");
  GPTConfig c;
  GPTConfig::for_each_field([&](const auto& f) {
    using T = std::remove_cvref_t<decltype(c.*f.member)>;
    const char* k = f.name;
    // a config without tie_weights is untied (the default)
    if (std::string_view(k) == "tie_weights" && !j.contains(k)) return;
    const bool ok = j.contains(k) && (std::is_same_v<T, int64_t> ? j[k].is_number_integer()
                                      : std::is_same_v<T, bool>  ? j[k].is_boolean()
                                                                 : j[k].is_number());
    if (!ok)
      config_error("the saved model config has no ", std::is_same_v<T, int64_t> ? "integer '" : "'", k, "'");
    c.*f.member = j[k].get<T>();
  });
  const std::string problem = xgrad::nn::config_problem(c);
  if (!problem.empty()) config_error("the saved model config is invalid: ", problem);
  return c;
}

std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now) {
  std::ostringstream os;
  os << std::boolalpha;
  const char* sep = "";
  GPTConfig::for_each_field([&](const auto& f) {
    if (saved.*f.member == now.*f.member) return;
    os << sep << f.name << " " << saved.*f.member << " in the checkpoint vs " << now.*f.member << " now";
    sep = ", ";
  });
  return os.str();
}

SavedModel read_saved_model(const CheckpointMeta& meta, const char* hint) {
  SavedModel saved;
  try {
    saved.config = gpt_config_from_json(meta.json("config", hint));
  } catch (const ConfigError& e) {
    xgrad::fail("checkpoint", meta.file, ": ", e.what());
  }
  saved.tokenizer = xgrad::text::tokenizer_from_json(meta.str("vocab", hint));
  if (saved.tokenizer->vocab_size() != saved.config.vocab_size)
    xgrad::fail("checkpoint", meta.file, ": the ", saved.tokenizer->kind(), " vocabulary has ",
                saved.tokenizer->vocab_size(), " tokens but the config says vocab_size ",
                saved.config.vocab_size);
  return saved;
}

}  // namespace xgrad_examples
