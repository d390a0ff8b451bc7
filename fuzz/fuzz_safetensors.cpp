// fuzz/fuzz_safetensors.cpp: the safetensors reader and what the trainer builds from a file.
// The first byte picks the mode, the rest is the file:
//   0, 1  parse only (the library's xgrad::io::parse_safetensors: every length, offset, dtype and checksum is
//   checked) 2     model file: the harness first repairs both checksums (so mutations of the header and
//         data get past them), then parses it, reads its config and vocabulary as `generate`
//         does, and loads the tensors into a tiny GPT when the config is that GPT's
//   3     train-state file: checksums repaired, parsed, then Trainer::load on a tiny trainer
//         (with the matching model file from the seed corpus held fixed)
// Anything wrong must be an xgrad::Error (or ConfigError); a crash, a sanitizer report or
// another exception is a bug. Seeds: fuzz/corpus/fuzz_safetensors/ (files of the tiny run
// below, made by scripts/fuzz.sh --seeds; state_*_v2 are train states of format_version 2,
// AdamW's state by parameter name, kept for Trainer::load's reader of old checkpoints).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "one_thread.h"
#include "train.h"
#include "xgrad/error.h"
#include "xgrad/io/file.h"
#include "xgrad/io/safetensors.h"

using namespace train_lm;
using namespace xgrad::io;

namespace {

// The corpus and options of the tiny run the seeds come from (scripts/fuzz.sh --seeds).
const char* kCorpus = "Call me Ishmael. Some years ago, never mind how long.\n";

TrainOptions tiny_options() {
  TrainOptions o;
  o.model = {.vocab_size = 0,
             .context_length = 8,
             .emb_dim = 8,
             .n_heads = 2,
             .n_layers = 1,
             .drop_rate = 0.0,
             .qkv_bias = false};
  o.batch_size = 2;
  o.steps = 4;
  o.warmup = 0;
  o.eval_interval = 2;
  o.eval_iters = 1;
  o.sample_length = 0;
  o.checkpoint_dir = "/nonexistent/fuzz";
  return o;
}

Trainer& trainer() {
  static Trainer* t = [] {
    std::string text;
    for (int i = 0; i < 20; ++i) text += kCorpus;
    return new Trainer(tiny_options(), make_corpus(text, 8, "fuzz corpus"));
  }();
  return *t;
}

// The seed's model file, for train-state mode (FUZZ_MODEL_FILE, set by scripts/fuzz.sh).
const SafetensorsFile* seed_model() {
  static std::unique_ptr<SafetensorsFile> f = [] {
    const char* path = std::getenv("FUZZ_MODEL_FILE");
    std::unique_ptr<SafetensorsFile> out;
    if (path) out = std::make_unique<SafetensorsFile>(load_safetensors(path));
    return out;
  }();
  return f.get();
}

// Rewrites xgrad_crc32 / xgrad_header_crc32 to match the (mutated) file, as save does.
std::string repair_checksums(const std::string& bytes) {
  if (bytes.size() < 8) return bytes;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > bytes.size() - 8) return bytes;
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
  if (h.is_discarded() || !h.is_object() || !h.contains("__metadata__") || !h["__metadata__"].is_object())
    return bytes;
  const std::string data = bytes.substr(8 + n);
  auto& meta = h["__metadata__"];
  meta.erase(kHeaderChecksumKey);
  meta[kChecksumKey] = hex32(crc32(data.data(), data.size()));
  const std::string canonical = h.dump();
  meta[kHeaderChecksumKey] = hex32(crc32(canonical.data(), canonical.size()));
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(uint64_t(text.size()) >> (8 * i));
  return out + text + data;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (mode >= 2) bytes = repair_checksums(bytes);
  try {
    SafetensorsFile f = parse_safetensors(bytes, "fuzz.safetensors");
    if (mode == 2) {
      auto get = [&](const char* key) {
        auto it = f.metadata.find(key);
        if (it == f.metadata.end()) xgrad::fail("fuzz", "no ", key);
        nlohmann::json j = nlohmann::json::parse(it->second, nullptr, false);
        if (j.is_discarded()) xgrad::fail("fuzz", "bad json");
        return j;
      };
      GPTConfig cfg = gpt_config_from_json(get("config"));
      auto vocab = f.metadata.find("vocab");
      if (vocab == f.metadata.end()) xgrad::fail("fuzz", "no vocab");
      // any tokenizer's saved form (char, gpt2, bpe), compared as the trainer compares them
      std::unique_ptr<xgrad::text::Tokenizer> tok = xgrad::text::tokenizer_from_json(vocab->second);
      Trainer& t = trainer();
      if (cfg == t.options().model && tok->to_json() == t.tokenizer().to_json()) {
        t.model().load_state_dict(xgrad::nn::StateDict::from(f.tensors));
      }
    } else if (mode == 3 && seed_model()) {
      Checkpoint ck;
      ck.dir = "fuzz";
      ck.files[kModelFile] = *seed_model();
      ck.files[kTrainStateFile] = std::move(f);
      trainer().load(ck);
    }
  } catch (const xgrad::Error&) {
  } catch (const ConfigError&) {
  }
  return 0;
}
