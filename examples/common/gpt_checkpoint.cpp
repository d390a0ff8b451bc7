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

SavedModel read_saved_model(const CheckpointMeta& meta, const char* hint) {
  SavedModel saved;
  if (meta.f.metadata.count("arch")) saved.arch = meta.str("arch");
  if (saved.arch != "gpt" && saved.arch != "llama")
    xgrad::fail("checkpoint", meta.file, ": arch '", saved.arch, "' is neither gpt nor llama");
  try {
    if (saved.arch == "gpt") saved.config = gpt_config_from_json(meta.json("config", hint));
    else saved.llama = config_from_json<LlamaConfig>(meta.json("config", hint));
  } catch (const ConfigError& e) {
    xgrad::fail("checkpoint", meta.file, ": ", e.what());
  }
  saved.tokenizer = xgrad::text::tokenizer_from_json(meta.str("vocab", hint));
  const LlamaConfig& l = saved.llama;
  if (saved.arch == "llama")
    saved.config = {.vocab_size = l.vocab_size,
                    .context_length = l.context_length,
                    .emb_dim = l.emb_dim,
                    .n_heads = l.n_heads,
                    .n_layers = l.n_layers,
                    .drop_rate = 0.0,
                    .qkv_bias = false,
                    .tie_weights = l.tie_weights};
  const int64_t vocab_size = saved.config.vocab_size;
  if (saved.tokenizer->vocab_size() != vocab_size)
    xgrad::fail("checkpoint", meta.file, ": the ", saved.tokenizer->kind(), " vocabulary has ",
                saved.tokenizer->vocab_size(), " tokens but the config says vocab_size ", vocab_size);
  return saved;
}

}  // namespace xgrad_examples
