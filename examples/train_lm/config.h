// examples/train_lm/config.h: the trainer's options, presets, validation and their JSON form
// (saved in every checkpoint, so `--resume` and `generate` rebuild the same model).
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "xgrad/nn/transformer.h"  // GPTConfig

namespace train_lm {

using xgrad::nn::GPTConfig;

// One flag's problem, worded for the command line ("--n-heads must be positive, got 0").
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Which tokenizer (--tokenizer), and what it needs: "char" (the vocabulary of the corpus),
// "gpt2" (vocab.bpe and encoder.json in gpt2_vocab_dir), "bpe" (bpe_merges merges learnt from
// the corpus, or the merges saved in bpe_file when it is given). See tokenizer.h.
struct TokenizerSpec {
  std::string kind = "char";
  std::string gpt2_vocab_dir = "data/gpt2";
  int64_t bpe_merges = 1000;
  std::string bpe_file;
};

struct TrainOptions {
  std::string preset = "small";  // tiny | small | medium: defaults for the fields below
  GPTConfig model{};             // vocab_size is set from the corpus
  int64_t batch_size = 16;       // sequences per micro-batch
  int64_t grad_accum = 1;        // micro-batches per optimizer step: batch_size * grad_accum
  int64_t steps = 2000;          // also the length of the cosine schedule
  double time_budget = 0;        // seconds; 0 = no limit. Stops early (and saves) when spent
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;       // 0 = off
  int64_t eval_interval = 250;  // also the checkpoint interval
  int64_t eval_iters = 20;
  uint64_t seed = 1337;
  int threads = 0;  // 0 = the BLAS default
  std::string checkpoint_dir = "checkpoints/train_lm";
  bool resume = false;
  int keep_checkpoints = 2;
  int64_t sample_length = 200;  // sample printed at each eval; 0 = none
  double temperature = 0.8;
  int64_t top_k = 0;     // 0 = all tokens
  double top_p = 1.0;    // nucleus sampling; 1 = all tokens
  bool dry_run = false;  // validate, estimate memory, print, write nothing
  std::string data = "data/moby_dick.txt";
  std::string metrics;      // default: <checkpoint_dir>/metrics.csv
  bool progress = true;     // live progress bar when stdout is a terminal
  TokenizerSpec tokenizer;  // char by default; on --resume the checkpoint's
  int64_t profile = 0;      // profile this many optimizer steps (xgrad::profiler); 0 = off

  // Names of the flags given on the command line ("emb-dim", "lr", ...): on --resume the
  // others come from the checkpoint.
  std::set<std::string> explicit_flags;

  std::string metrics_path() const;
};

struct GenerateOptions {
  std::string checkpoint = "checkpoints/train_lm";
  std::string prompt = "Call me";
  int64_t max_new_tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 1337;
  int threads = 0;
  bool kv_cache = true;  // --no-kv-cache: recompute the whole window for every token
};

// `train_lm tokenize`: prints the ids of a file, space-separated, on one line.
struct TokenizeOptions {
  TokenizerSpec tokenizer;
  std::string data = "data/moby_dick.txt";
};

// The documented range of every numeric flag (README's flag table, `--help`). Integer flags
// take decimal integers only; real ones any strtod number that is finite. `lo_open`/`hi_open`
// exclude the bound. seed is the one uint64 flag: [0, 2^64 - 1].
struct FlagRange {
  const char* flag;
  double lo, hi;
  bool integer;
  bool lo_open = false, hi_open = false;
};
const FlagRange* flag_range(const std::string& flag);  // nullptr for a non-numeric flag
std::string describe_range(const FlagRange& r);        // "[1, 1000000000]", "(0, 1]"
// Checks a command-line value of a numeric flag before any conversion (so nothing is clamped
// or wrapped): returns "" when it parses and lies in the range, else the message naming the flag.
std::string check_flag_text(const std::string& flag, const std::string& text);
// Sampling parameters as torch's samplers check them (HF TemperatureLogitsWarper, TopK, TopP):
// temperature 0 (greedy) or a finite normal number > 0 (a subnormal one overflows logits /
// temperature to inf, which torch.multinomial refuses), top_k >= 0, 0 < top_p <= 1.
void validate_sampling(double temperature, int64_t top_k, double top_p);

// Sets model/batch fields from a preset (tiny, small, medium); throws ConfigError otherwise.
void apply_preset(TrainOptions& o, const std::string& preset);

// Every range check of the options (not the corpus or files); throws ConfigError.
void validate(const TrainOptions& o);
void validate(const GenerateOptions& o);
void validate(const TokenizerSpec& t);
// GPTConfig checks, with flag names in the messages; vocab_size is checked when `with_vocab`.
void validate_model(const GPTConfig& c, bool with_vocab);

nlohmann::json to_json(const GPTConfig& c);
GPTConfig gpt_config_from_json(const nlohmann::json& j);  // throws ConfigError for bad fields
bool same_config(const GPTConfig& a, const GPTConfig& b);
std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now);

// The training hyperparameters (everything but the model config and paths).
nlohmann::json train_options_to_json(const TrainOptions& o);
// On --resume: fields not in o.explicit_flags are taken from `saved`.
void merge_saved_options(TrainOptions& o, const nlohmann::json& saved_train, const GPTConfig& saved_model);

}  // namespace train_lm
