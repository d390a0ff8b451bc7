// examples/train_lm/options.cpp: see options.h. To add a `train` flag: a field in
// TrainOptions, a row in for_each_train_flag (with its range when it is a number), and a line
// in README.md; a model setting is a field of GPTConfig and a row of its table instead.
#include "options.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <type_traits>
#include <utility>

#include "flag_range.h"

namespace train_lm {
namespace {

// ---------------------------------------------------------------- the flags
using namespace xgrad_examples;  // Flag, FlagRange, ints, reals, flag_name (flag_range.h)

constexpr int kSaved = 4;   // kept in the checkpoint: --resume takes it from there unless given
constexpr int kPreset = 8;  // --preset sets it unless given
constexpr int kModel = 16;  // a GPTConfig field: nn checks it, the checkpoint's config keeps it

constexpr double kBig = 1e9;

// GPTConfig's fields but vocab_size (which the corpus sets), from nn's table:
// f(flag, member pointer). The presets set every number.
template <class F>
void for_each_model_field(F&& f) {
  GPTConfig::for_each_field([&](const auto& field) {
    using T = std::remove_cvref_t<decltype(GPTConfig{}.*field.member)>;
    if (std::string_view(field.name) == "vocab_size") return;
    if constexpr (std::is_same_v<T, bool>) f(Flag{flag_name(field.name), field.help, kModel}, field.member);
    else
      f(Flag{flag_name(field.name), std::string(field.help) + " (preset)", kModel | kPreset,
             FlagRange{field.min, field.max, std::is_integral_v<T>}},
        field.member);
  });
}

template <class S, class F>
void for_each_sampling_flag(S& s, int attrs, F&& f) {
  f(Flag{"temperature", "sampling temperature; 0 = greedy", attrs, reals(0, 1e6)}, s.temperature);
  f(Flag{"top-k", "sample from the k most likely characters; 0 = all", attrs, ints(0, kBig)}, s.top_k);
  f(Flag{"top-p",
         "sample from the smallest set of characters whose probabilities add up to p (nucleus); 1 = all",
         attrs, FlagRange{0, 1, false, true, false}},
    s.top_p);
}

template <class S, class F>
void for_each_tokenizer_flag(S& s, F&& f) {
  f(Flag{"tokenizer",
         "char (one token per character of the corpus), gpt2 (GPT-2's BPE, files from "
         "scripts/get_gpt2_vocab.sh) or bpe (a BPE learnt from the corpus)",
         kSaved | kShowDefault},
    s.kind);
  f(Flag{"gpt2-vocab", "directory with GPT-2's vocab.bpe and encoder.json", kShowDefault}, s.gpt2_vocab_dir);
  f(Flag{"bpe-merges", "--tokenizer bpe: merges to learn (vocabulary 256 + merges)", kSaved | kShowDefault,
         ints(0, 1e6)},
    s.bpe_merges);
  f(Flag{"bpe-file",
         "--tokenizer bpe: load the merges from this file (BPETokenizer::save's JSON) instead of learning "
         "them"},
    s.bpe_file);
}

// Every `train` flag, in --help order: f(flag, field). O is TrainOptions, or const
// TrainOptions to read.
template <class O, class F>
void for_each_train_flag(O& o, F&& f) {
  const int saved = kSaved | kShowDefault;
  f(Flag{"arch", "gpt or llama (RMSNorm, RoPE, SwiGLU, grouped-query attention)", kShowDefault}, o.arch);
  f(Flag{"preset",
         "model size: tiny, small, medium, gpt2 (124M), llama-tiny, llama-small, llama-medium (README)",
         saved},
    o.preset);
  for_each_model_field([&](const Flag& flag, auto member) { f(flag, o.model.*member); });
  f(Flag{"batch-size", "sequences per step (preset)", kSaved | kPreset, ints(1, 1e12)}, o.batch_size);
  f(Flag{"grad-accum", "micro-batches of --batch-size per optimizer step (gradient accumulation)", saved,
         ints(1, 1e6)},
    o.grad_accum);
  f(Flag{"steps", "optimizer steps in all; the cosine schedule's length", saved, ints(1, kBig)}, o.steps);
  f(Flag{"time-budget", "stop (and save) after this many seconds; 0 = none", kShowDefault, reals(0, kBig)},
    o.time_budget);
  f(Flag{"lr", "peak learning rate", saved, FlagRange{0, 10, false, true, false}}, o.lr);
  f(Flag{"min-lr", "learning rate at the end of the cosine decay", saved, reals(0, 10)}, o.min_lr);
  f(Flag{"warmup", "linear warmup steps", saved, ints(0, kBig)}, o.warmup);
  f(Flag{"weight-decay", "AdamW weight decay (matrices only)", saved, reals(0, 100)}, o.weight_decay);
  f(Flag{"beta1", "AdamW beta1", saved, FlagRange{0, 1, false, false, true}}, o.beta1);
  f(Flag{"beta2", "AdamW beta2", saved, FlagRange{0, 1, false, false, true}}, o.beta2);
  f(Flag{"grad-clip", "max gradient norm; 0 = off", saved, reals(0, kBig)}, o.grad_clip);
  f(Flag{"eval-interval", "steps between evaluations and checkpoints", saved, ints(1, kBig)},
    o.eval_interval);
  f(Flag{"eval-iters", "batches per loss estimate", saved, ints(1, kBig)}, o.eval_iters);
  f(Flag{"seed", "random seed (init, batches, dropout, samples)", saved,
         FlagRange{0, 0, true, false, false, true}},
    o.seed);
  f(Flag{"threads", "threads (xgrad::set_num_threads); 0 = default", kShowDefault, ints(0, 4096)}, o.threads);
  f(Flag{"dtype",
         "fp32, or bf16: forward and loss under autocast (matmuls in bfloat16; weights, optimizer and "
         "checkpoints stay float32)",
         saved},
    o.dtype);
  f(Flag{"checkpoint-dir", "where checkpoints go", kShowDefault}, o.checkpoint_dir);
  f(Flag{"resume", "continue from the latest checkpoint in --checkpoint-dir"}, o.resume);
  f(Flag{"keep-checkpoints", "step directories to keep", saved, ints(1, 1e6)}, o.keep_checkpoints);
  f(Flag{"sample-length", "characters sampled at each evaluation; 0 = none", saved, ints(0, kBig)},
    o.sample_length);
  for_each_sampling_flag(o.sampling, saved, f);
  f(Flag{"dry-run",
         "check flags, corpus and checkpoint, print the memory estimate, and stop without writing anything"},
    o.dry_run);
  f(Flag{"data", "UTF-8 text corpus", saved}, o.data);
  f(Flag{"metrics", "CSV metrics file (default <checkpoint-dir>/metrics.csv)"}, o.metrics);
  f(Flag{"no-progress", "plain log lines instead of the live progress bar", kNegated}, o.progress);
  f(Flag{"profile",
         "profile the first N optimizer steps of this run: print the op table and write "
         "<checkpoint-dir>/profile_trace.json; 0 = off",
         kShowDefault, ints(0, kBig)},
    o.profile);
  for_each_tokenizer_flag(o.tokenizer, f);
}

template <class O, class F>
void for_each_generate_flag(O& o, F&& f) {
  f(Flag{"checkpoint", "checkpoint directory (or a root with 'latest')", kShowDefault}, o.checkpoint);
  f(Flag{"prompt", "text to continue", kShowDefault}, o.prompt);
  f(Flag{"max-new-tokens", "characters to generate", kShowDefault, ints(0, kBig)}, o.max_new_tokens);
  for_each_sampling_flag(o.sampling, kShowDefault, f);
  f(Flag{"seed", "random seed", kShowDefault, FlagRange{0, 0, true, false, false, true}}, o.seed);
  f(Flag{"threads", "threads (xgrad::set_num_threads); 0 = default", kShowDefault, ints(0, 4096)}, o.threads);
  f(Flag{"no-kv-cache",
         "recompute the whole window for every token instead of caching keys and values (the same text, "
         "slower)",
         kNegated},
    o.sampling.use_kv_cache);
}

// Every numeric field walked by `for_each` lies in its flag's range; model fields are nn's to
// check (validate below).
template <class O, class ForEach>
void check_ranges(const O& o, ForEach for_each) {
  for_each(o, [](const Flag& flag, const auto& v) {
    if (!(flag.attrs & kModel))
      if (const std::string problem = value_problem(flag, v); !problem.empty()) throw ConfigError(problem);
  });
}

// Sampling parameters as torch's samplers check them (HF TemperatureLogitsWarper, TopK, TopP),
// with flag names: nn::sampling_problem also refuses a subnormal temperature.
void validate(const xgrad::nn::GenerateOptions& s) {
  const std::string problem = xgrad::nn::sampling_problem({s.temperature, s.top_k, s.top_p});
  if (!problem.empty()) config_error("--", problem);
}

void validate(const TokenizerSpec& t) {
  if (t.kind != "char" && t.kind != "gpt2" && t.kind != "bpe")
    config_error("--tokenizer must be char, gpt2 or bpe, got '", t.kind, "'");
  check_ranges(t, [](const auto& x, auto f) { for_each_tokenizer_flag(x, f); });
  if (t.kind == "gpt2" && t.gpt2_vocab_dir.empty()) config_error("--gpt2-vocab must not be empty");
}

auto add_to(CLI::App* app) {
  return [app](const Flag& flag, auto& field) { add_flag(*app, flag, field); };
}

}  // namespace

std::string check_flag_text(const std::string& flag, const std::string& text) {
  std::string problem;
  auto check = [&](const Flag& f, const auto&) {
    if (f.name == flag && f.range && problem.empty())
      problem = xgrad_examples::check_flag_text(flag, *f.range, text);
  };
  TrainOptions t;
  GenerateOptions g;
  for_each_train_flag(t, check);
  for_each_generate_flag(g, check);
  return problem;
}

CliParse parse_cli(const std::vector<std::string>& args) {
  CliParse out;
  CLI::App app{"train_lm: train a GPT with xgrad (character-level by default), and sample from it"};
  app.require_subcommand(1);
  // a flag given twice takes its last value, so `scripts/train.sh --steps 4000` overrides the
  // script's own --steps (subcommands inherit this default)
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  TrainOptions t;
  GenerateOptions g;
  TokenizeOptions k;
  CLI::App* train = app.add_subcommand("train", "train (or --resume) a model on a text corpus");
  for_each_train_flag(t, add_to(train));
  CLI::App* gen = app.add_subcommand("generate", "sample text from a checkpoint");
  for_each_generate_flag(g, add_to(gen));
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "print the token ids of a file, space-separated, on one line");
  for_each_tokenizer_flag(k.tokenizer, add_to(tokenize));
  add_to(tokenize)(Flag{"data", "UTF-8 text file", kShowDefault}, k.data);

  try {
    app.parse(
        std::vector<std::string>(args.rbegin(), args.rend() - (args.empty() ? 0 : 1)));  // CLI11: reversed
  } catch (const CLI::ParseError& e) {
    out.exit_code = app.exit(e) == 0 ? 0 : 2;
    return out;
  }
  try {
    if (train->parsed()) {
      for (const CLI::Option* opt : train->get_options())
        if (opt->count() > 0 && !opt->get_lnames().empty()) t.explicit_flags.insert(opt->get_lnames()[0]);
      if (t.arch == "llama" && !t.explicit_flags.count("preset")) t.preset = "llama-" + t.preset;
      apply_preset(t, t.preset);
      if (!t.explicit_flags.count("warmup")) t.warmup = std::min<int64_t>(t.warmup, t.steps / 10);
      if (!t.resume) validate(t);  // on --resume, after merging the checkpoint's options
      out.kind = CliParse::kTrain;
      out.train = std::move(t);
    } else if (tokenize->parsed()) {
      validate(k.tokenizer);
      if (k.data.empty()) config_error("--data must not be empty");
      out.kind = CliParse::kTokenize;
      out.tokenize = std::move(k);
    } else {
      validate(g);
      out.kind = CliParse::kGenerate;
      out.generate = std::move(g);
    }
  } catch (const ConfigError& e) {
    std::cerr << "train_lm: error: " << e.what() << "\n";  // out.kind is still kExit
    out.exit_code = 2;
  }
  return out;
}

// ---------------------------------------------------------------- validation
void apply_preset(TrainOptions& o, const std::string& preset) {
  struct Preset {
    const char* name;
    GPTConfig model;
    int64_t batch_size;
    const char* tokenizer = nullptr;  // the tokenizer it comes with; null: the --tokenizer default
  };
  static const Preset presets[] = {
      {"tiny", {.context_length = 64, .emb_dim = 64, .n_heads = 4, .n_layers = 2, .drop_rate = 0.1}, 32},
      {"small", {.context_length = 128, .emb_dim = 128, .n_heads = 4, .n_layers = 4, .drop_rate = 0.1}, 16},
      {"medium", {.context_length = 256, .emb_dim = 384, .n_heads = 6, .n_layers = 6, .drop_rate = 0.1}, 8},
      // GPT-2 small (124M): the book's GPT_CONFIG_124M, output head tied to the token embedding
      {"gpt2",
       {.context_length = 1024,
        .emb_dim = 768,
        .n_heads = 12,
        .n_layers = 12,
        .drop_rate = 0.1,
        .tie_weights = true},
       8,
       "gpt2"},
  };
  const bool llama = preset.starts_with("llama-");  // the GPT preset's sizes, without dropout
  if (llama != (o.arch == "llama") && o.explicit_flags.count("arch"))
    config_error("--preset ", preset, " is not for --arch ", o.arch);
  for (const Preset& p : presets) {
    if (preset != (llama ? "llama-" : "") + std::string(p.name) || (llama && p.tokenizer)) continue;
    o.preset = preset;
    if (!o.explicit_flags.count("arch")) o.arch = llama ? "llama" : "gpt";
    for_each_model_field([&](const Flag& flag, auto member) {
      if ((flag.attrs & kPreset) && !o.explicit_flags.count(flag.name)) o.model.*member = p.model.*member;
    });
    if (p.model.tie_weights) o.model.tie_weights = true;
    if (llama && !o.explicit_flags.count("drop-rate")) o.model.drop_rate = 0;
    if (!o.explicit_flags.count("batch-size")) o.batch_size = p.batch_size;
    if (p.tokenizer && !o.explicit_flags.count("tokenizer")) o.tokenizer.kind = p.tokenizer;
    return;
  }
  config_error("--preset must be [llama-]tiny, [llama-]small, [llama-]medium or gpt2, got '", preset, "'");
}

void validate(const TrainOptions& o) {
  if (o.arch != "gpt" && o.arch != "llama") config_error("--arch must be gpt or llama, got '", o.arch, "'");
  if (o.dtype != "fp32" && o.dtype != "bf16")
    config_error("--dtype must be fp32 or bf16, got '", o.dtype, "'");
  auto flag = [](const char* field) { return "--" + flag_name(field); };
  const std::string model_problem = o.arch == "llama" ? xgrad::nn::config_problem(llama_config(o), flag)
                                                      : xgrad::nn::config_problem(o.model, flag);
  if (!model_problem.empty()) config_error(model_problem);
  if (o.arch == "llama" && (o.model.drop_rate != 0 || o.model.qkv_bias || o.model.activation_checkpointing))
    config_error("--arch llama takes none of --drop-rate, --qkv-bias, --activation-checkpointing");
  check_ranges(o, [](const auto& x, auto f) { for_each_train_flag(x, f); });
  if (o.min_lr > o.lr) config_error("--min-lr ", o.min_lr, " is larger than --lr ", o.lr);
  if (o.warmup >= o.steps) config_error("--warmup ", o.warmup, " must be smaller than --steps ", o.steps);
  validate(o.sampling);
  if (o.checkpoint_dir.empty()) config_error("--checkpoint-dir must not be empty");
  if (o.data.empty()) config_error("--data must not be empty");
  validate(o.tokenizer);
}

void validate(const GenerateOptions& o) {
  if (o.checkpoint.empty()) config_error("--checkpoint must not be empty");
  check_ranges(o, [](const auto& x, auto f) { for_each_generate_flag(x, f); });
  validate(o.sampling);
}

xgrad::nn::LlamaConfig llama_config(const TrainOptions& o) {
  const GPTConfig& m = o.model;
  return {.vocab_size = m.vocab_size,
          .context_length = m.context_length,
          .emb_dim = m.emb_dim,
          .n_heads = m.n_heads,
          .n_layers = m.n_layers,
          .hidden_dim = 3 * m.emb_dim,
          .n_kv_groups = m.n_heads % 2 ? m.n_heads : m.n_heads / 2,
          .rope_base = 10000,
          .rope_freq = false,
          .tie_weights = m.tie_weights};
}

// ---------------------------------------------------------------- JSON
nlohmann::json train_options_to_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  auto save = [&](const Flag& flag, const auto& field) {
    if (flag.attrs & kSaved) j[flag.name] = field;
  };
  for_each_train_flag(o, save);
  return j;
}

void merge_saved_options(TrainOptions& o, const nlohmann::json& saved, const GPTConfig& saved_model) {
  // The model is the checkpoint's (a flag that disagrees fails) but vocab_size and activation_checkpointing.
  GPTConfig::for_each_field([&](const auto& f) {
    const std::string flag = flag_name(f.name);
    auto& now = o.model.*f.member;
    const auto was = saved_model.*f.member;
    if (std::string_view n = f.name; n == "vocab_size" || n == "activation_checkpointing") return;
    if (o.explicit_flags.count(flag) && now != was)
      config_error("--", flag, " ", now, " does not match the checkpoint being resumed (", flag, " ", was,
                   "); drop the flag or start a new --checkpoint-dir");
    now = was;
  });

  if (!saved.is_object()) config_error("the checkpoint's training options are not a JSON object");
  auto take = [&](const Flag& flag, auto& field) {
    const std::string& key = flag.name;
    if (!(flag.attrs & kSaved) || key == "tokenizer" || o.explicit_flags.count(key) || !saved.contains(key))
      return;
    if (const std::string problem = field_from_json(saved[key], field); !problem.empty())
      config_error("the checkpoint's training option '", key, "' ", problem);
  };
  for_each_train_flag(o, take);
  // the tokenizer itself comes from the checkpoint (run_train); a different kind is an error
  const std::string kind = saved.contains("tokenizer") && saved["tokenizer"].is_string()
                               ? saved["tokenizer"].get<std::string>()
                               : "char";  // train_options without a tokenizer: char
  if (o.explicit_flags.count("tokenizer") && o.tokenizer.kind != kind)
    config_error("--tokenizer ", o.tokenizer.kind, " does not match the checkpoint being resumed (", kind,
                 "); drop the flag or start a new --checkpoint-dir");
  o.tokenizer.kind = kind;
}

}  // namespace train_lm
