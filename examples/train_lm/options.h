// examples/train_lm/options.h: the configuration (nanoGPT's config block and configurator):
// the options of `train`, `generate` and `tokenize`, the presets, the command line (CLI11) and
// the JSON a checkpoint keeps. Every setting has one source: a model flag is a row of
// GPTConfig's field table (xgrad/nn/transformer.h), every other flag a row of a table in
// options.cpp; the command line, --resume's merge, validation and the JSON walk them.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt_checkpoint.h"  // ConfigError, the config JSON
#include "text_data.h"       // TokenizerSpec
#include "xgrad/nn/gpt.h"    // GPTConfig; GenerateOptions: the sampling flags

namespace train_lm {

using xgrad::nn::GPTConfig;
using xgrad_examples::ConfigError;
using xgrad_examples::TokenizerSpec;

struct TrainOptions {
  std::string arch = "gpt";      // gpt | llama: the model family (llama_config below)
  std::string preset = "small";  // tiny | small | medium | llama-*: defaults for the model and batch
  GPTConfig model{};             // vocab_size is set from the corpus
  int64_t batch_size = 16;       // sequences per micro-batch (the global batch under mpirun)
  int64_t grad_accum = 1;        // micro-batches per optimizer step
  int64_t steps = 2000;          // also the length of the cosine schedule
  double time_budget = 0;        // seconds; 0 = no limit. Stops early (and saves) when spent
  double lr = 1e-3;              // the peak of the schedule: its only source
  double min_lr = 1e-4;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double grad_clip = 1.0;       // 0 = off
  int64_t eval_interval = 250;  // also the checkpoint interval
  int64_t eval_iters = 20;
  uint64_t seed = 1337;
  int threads = 0;  // 0 = xgrad's default
  // fp32 | bf16: bf16 runs each forward pass and its loss under xgrad::autocast(kBFloat16)
  // (torch.autocast("cpu", dtype=torch.bfloat16)); weights, AdamW and checkpoints stay float32
  std::string dtype = "fp32";
  std::string checkpoint_dir = "checkpoints/train_lm";
  bool resume = false;
  int keep_checkpoints = 2;
  int64_t sample_length = 200;  // tokens sampled at each eval; 0 = none
  xgrad::nn::GenerateOptions sampling{.temperature = 0.8, .seed = std::nullopt};
  bool dry_run = false;  // validate, estimate memory, print, write nothing
  std::string data = "data/moby_dick.txt";
  std::string metrics;   // default: <checkpoint_dir>/metrics.csv
  bool progress = true;  // live progress bar when stdout is a terminal
  TokenizerSpec tokenizer;
  int64_t profile = 0;  // profile this many optimizer steps (xgrad::profiler); 0 = off

  // The flags given on the command line ("emb-dim", "lr", ...): on --resume the others come
  // from the checkpoint.
  std::set<std::string> explicit_flags;

  std::string metrics_path() const { return metrics.empty() ? checkpoint_dir + "/metrics.csv" : metrics; }
};

struct GenerateOptions {
  std::string checkpoint = "checkpoints/train_lm";
  std::string prompt = "Call me";
  int64_t max_new_tokens = 200;
  xgrad::nn::GenerateOptions sampling{.temperature = 0.8,
                                      .seed = std::nullopt};  // --no-kv-cache: use_kv_cache false
  uint64_t seed = 1337;
  int threads = 0;
};

struct TokenizeOptions {
  TokenizerSpec tokenizer;
  std::string data = "data/moby_dick.txt";
};

// ---- the command line
struct CliParse {
  enum Kind { kTrain, kGenerate, kTokenize, kExit } kind = kExit;
  TrainOptions train;
  GenerateOptions generate;
  TokenizeOptions tokenize;
  int exit_code = 0;  // for kExit (--help: 0; a bad flag: 2, already printed)
};
// args[0] is the program name. Applies the preset and validates (a --resume run is validated
// after merging the checkpoint's options); problems are printed and returned as kExit.
CliParse parse_cli(const std::vector<std::string>& args);
// main(): parses and runs the command; the exit code (0 ok, 1 runtime error, 2 bad usage).
int run_cli(const std::vector<std::string>& args);

// Checks a numeric flag's text before any conversion (so nothing is clamped or wrapped):
// "" when it parses and lies in the flag's range, else the message naming the flag.
std::string check_flag_text(const std::string& flag, const std::string& text);

// ---- validation (throws ConfigError naming the flag)
// The preset's model and batch, except the flags in o.explicit_flags.
void apply_preset(TrainOptions& o, const std::string& preset);
void validate(const TrainOptions& o);
void validate(const GenerateOptions& o);

// --arch llama's model of the GPT flags' sizes: hidden_dim 3 x emb_dim, n_kv_groups n_heads / 2
// (n_heads when odd), RoPE base 10000 unscaled: the GPT's parameters within 5% (README).
xgrad::nn::LlamaConfig llama_config(const TrainOptions& o);

// ---- what a checkpoint keeps
nlohmann::json train_options_to_json(const TrainOptions& o);  // the settings, not paths
// On --resume: options not given on the command line are taken from the checkpoint; a model
// flag or --tokenizer that disagrees with it is an error.
void merge_saved_options(TrainOptions& o, const nlohmann::json& saved_train, const GPTConfig& saved_model);

}  // namespace train_lm
