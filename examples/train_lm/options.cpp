// examples/train_lm/options.cpp: see options.h. To add a `train` flag: a field in
// TrainOptions, a row in for_each_train_flag, a row in kRanges when it is a number, and a
// line in README.md.
#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "flag_range.h"
#include "train.h"  // the commands run_cli runs
#include "xgrad/nn/sampling.h"

namespace train_lm {
namespace {

template <class... Parts>
[[noreturn]] void bad(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw ConfigError(os.str());
}

// ---------------------------------------------------------------- the flags
enum FlagAttr : int {
  kSaved = 1,        // kept in the checkpoint: --resume takes it from there unless given
  kShowDefault = 2,  // --help shows the default
  kNegated = 4,      // a bool flag that clears its field (--no-progress)
};

// Every `train` flag, in --help order: f(name, field, help, attrs). O is TrainOptions, or
// const TrainOptions to read.
template <class O, class F>
void for_each_train_flag(O& o, F&& f) {
  f("preset", o.preset, "model size preset: tiny, small or medium", kSaved | kShowDefault);
  f("context-length", o.model.context_length, "tokens per window (preset)", 0);
  f("emb-dim", o.model.emb_dim, "embedding width (preset)", 0);
  f("n-heads", o.model.n_heads, "attention heads (preset)", 0);
  f("n-layers", o.model.n_layers, "transformer blocks (preset)", 0);
  f("drop-rate", o.model.drop_rate, "dropout probability (preset)", 0);
  f("qkv-bias", o.model.qkv_bias, "bias in the query/key/value projections", 0);
  f("tie-weights", o.model.tie_weights, "share tok_emb.weight with out_head.weight, as GPT-2 does", 0);
  f("batch-size", o.batch_size, "sequences per step (preset)", kSaved);
  f("grad-accum", o.grad_accum, "micro-batches of --batch-size per optimizer step (gradient accumulation)",
    kSaved | kShowDefault);
  f("steps", o.steps, "optimizer steps in all; the cosine schedule's length", kSaved | kShowDefault);
  f("time-budget", o.time_budget, "stop (and save) after this many seconds; 0 = none", kShowDefault);
  f("lr", o.lr, "peak learning rate", kSaved | kShowDefault);
  f("min-lr", o.min_lr, "learning rate at the end of the cosine decay", kSaved | kShowDefault);
  f("warmup", o.warmup, "linear warmup steps", kSaved | kShowDefault);
  f("weight-decay", o.weight_decay, "AdamW weight decay (matrices only)", kSaved | kShowDefault);
  f("beta1", o.beta1, "AdamW beta1", kSaved | kShowDefault);
  f("beta2", o.beta2, "AdamW beta2", kSaved | kShowDefault);
  f("grad-clip", o.grad_clip, "max gradient norm; 0 = off", kSaved | kShowDefault);
  f("eval-interval", o.eval_interval, "steps between evaluations and checkpoints", kSaved | kShowDefault);
  f("eval-iters", o.eval_iters, "batches per loss estimate", kSaved | kShowDefault);
  f("seed", o.seed, "random seed (init, batches, dropout, samples)", kSaved | kShowDefault);
  f("threads", o.threads, "threads (xgrad::set_num_threads); 0 = default", kShowDefault);
  f("checkpoint-dir", o.checkpoint_dir, "where checkpoints go", kShowDefault);
  f("resume", o.resume, "continue from the latest checkpoint in --checkpoint-dir", 0);
  f("keep-checkpoints", o.keep_checkpoints, "step directories to keep", kSaved | kShowDefault);
  f("sample-length", o.sample_length, "characters sampled at each evaluation; 0 = none",
    kSaved | kShowDefault);
  f("temperature", o.temperature, "sampling temperature; 0 = greedy", kSaved | kShowDefault);
  f("top-k", o.top_k, "sample from the k most likely characters; 0 = all", kSaved | kShowDefault);
  f("top-p", o.top_p,
    "sample from the smallest set of characters whose probabilities add up to p (nucleus); 1 = all",
    kSaved | kShowDefault);
  f("dry-run", o.dry_run,
    "check flags, corpus and checkpoint, print the memory estimate, and stop without writing anything", 0);
  f("data", o.data, "UTF-8 text corpus", kSaved | kShowDefault);
  f("metrics", o.metrics, "CSV metrics file (default <checkpoint-dir>/metrics.csv)", 0);
  f("no-progress", o.progress, "plain log lines instead of the live progress bar", kNegated);
  f("profile", o.profile,
    "profile the first N optimizer steps of this run: print the op table and write "
    "<checkpoint-dir>/profile_trace.json; 0 = off",
    kShowDefault);
}

template <class S, class F>
void for_each_tokenizer_flag(S& s, F&& f) {
  f("tokenizer", s.kind,
    "char (one token per character of the corpus), gpt2 (GPT-2's BPE, files from scripts/get_gpt2_vocab.sh) "
    "or bpe (a BPE learnt from the corpus)",
    kSaved | kShowDefault);
  f("gpt2-vocab", s.gpt2_vocab_dir, "directory with GPT-2's vocab.bpe and encoder.json", kShowDefault);
  f("bpe-merges", s.bpe_merges, "--tokenizer bpe: merges to learn (vocabulary 256 + merges)",
    kSaved | kShowDefault);
  f("bpe-file", s.bpe_file,
    "--tokenizer bpe: load the merges from this file (BPETokenizer::save's JSON) instead of learning them",
    0);
}

// ---------------------------------------------------------------- ranges
// The documented range of every numeric flag (README's flag table, --help; flag_range.h).
constexpr double kBig = 1e9;
const struct {
  const char* flag;
  FlagRange range;
} kRanges[] = {
    {"context-length", {1, 1 << 20, true}},
    {"emb-dim", {1, 1 << 20, true}},
    {"n-heads", {1, 1 << 16, true}},
    {"n-layers", {1, 1 << 16, true}},
    {"drop-rate", {0, 1, false}},     // torch's nn.Dropout range (xgrad::check_dropout_p)
    {"batch-size", {1, 1e12, true}},  // memory is the real limit: checked against the machine
    {"grad-accum", {1, 1e6, true}},
    {"profile", {0, kBig, true}},
    {"steps", {1, kBig, true}},
    {"time-budget", {0, kBig, false}},
    {"lr", {0, 10, false, true, false}},
    {"min-lr", {0, 10, false}},
    {"warmup", {0, kBig, true}},
    {"weight-decay", {0, 100, false}},
    {"beta1", {0, 1, false, false, true}},
    {"beta2", {0, 1, false, false, true}},
    {"grad-clip", {0, kBig, false}},
    {"eval-interval", {1, kBig, true}},
    {"eval-iters", {1, kBig, true}},
    {"seed", {0, 0, true, false, false, /*uint64=*/true}},
    {"threads", {0, 4096, true}},
    {"keep-checkpoints", {1, 1e6, true}},
    {"sample-length", {0, kBig, true}},
    {"max-new-tokens", {0, kBig, true}},
    {"temperature", {0, 1e6, false}},
    {"top-k", {0, kBig, true}},
    {"top-p", {0, 1, false, true, false}},
    {"bpe-merges", {0, 1e6, true}},
};

const FlagRange* flag_range(const std::string& flag) {
  for (const auto& r : kRanges)
    if (flag == r.flag) return &r.range;
  return nullptr;
}

// A value already converted (from a checkpoint, a test, a struct): the same range.
template <class T>
void check(const char* flag, T v) {
  const FlagRange* r = flag_range(flag);
  if (!r) throw std::logic_error(std::string("no range for flag --") + flag);
  if (in_range(*r, static_cast<double>(v))) return;
  if constexpr (std::is_integral_v<T>) bad("--", flag, " must be in ", describe_range(*r), ", got ", v);
  std::ostringstream os;
  os.precision(17);
  os << v;
  bad("--", flag, " must be in ", describe_range(*r), ", got ", os.str());
}

// Sampling parameters as torch's samplers check them (HF TemperatureLogitsWarper, TopK, TopP),
// with flag names: nn::sampling_problem also refuses a subnormal temperature.
void validate_sampling(double temperature, int64_t top_k, double top_p) {
  check("temperature", temperature);
  check("top-k", top_k);
  check("top-p", top_p);
  const std::string problem = xgrad::nn::sampling_problem({temperature, top_k, top_p});
  if (!problem.empty()) bad("--", problem);
}

// ---------------------------------------------------------------- CLI11
template <class T>
void add_flag(CLI::App& app, const char* name, T& field, const char* help, int attrs) {
  const std::string flag = std::string(attrs & kNegated ? "!--" : "--") + name;
  if constexpr (std::is_same_v<T, bool>) {
    app.add_flag(flag, field, help);
  } else {
    CLI::Option* opt = app.add_option(flag, field, help);
    if (attrs & kShowDefault) opt->capture_default_str();
    if (const FlagRange* r = flag_range(name)) add_range_check(opt, name, *r);  // flag_range.h
  }
}

void add_generate_flags(CLI::App& g, GenerateOptions& o) {
  auto f = [&](const char* name, auto& field, const char* help, int attrs) {
    add_flag(g, name, field, help, attrs);
  };
  f("checkpoint", o.checkpoint, "checkpoint directory (or a root with 'latest')", kShowDefault);
  f("prompt", o.prompt, "text to continue", kShowDefault);
  f("max-new-tokens", o.max_new_tokens, "characters to generate", kShowDefault);
  f("temperature", o.temperature, "sampling temperature; 0 = greedy", kShowDefault);
  f("top-k", o.top_k, "sample from the k most likely characters; 0 = all", kShowDefault);
  f("top-p", o.top_p,
    "nucleus sampling: the smallest set of characters whose probabilities add up to p; 1 = all",
    kShowDefault);
  f("seed", o.seed, "random seed", kShowDefault);
  f("threads", o.threads, "threads (xgrad::set_num_threads); 0 = default", kShowDefault);
  f("no-kv-cache", o.kv_cache,
    "recompute the whole window for every token instead of caching keys and values (the same text, slower)",
    kNegated);
}

}  // namespace

std::string check_flag_text(const std::string& flag, const std::string& text) {
  const FlagRange* r = flag_range(flag);
  return r ? xgrad_examples::check_flag_text(flag, *r, text) : "";
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
  auto add_to = [](CLI::App* a) {
    return [a](const char* name, auto& field, const char* help, int attrs) {
      add_flag(*a, name, field, help, attrs);
    };
  };
  for_each_train_flag(t, add_to(train));
  for_each_tokenizer_flag(t.tokenizer, add_to(train));
  CLI::App* gen = app.add_subcommand("generate", "sample text from a checkpoint");
  add_generate_flags(*gen, g);
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "print the token ids of a file, space-separated, on one line");
  for_each_tokenizer_flag(k.tokenizer, add_to(tokenize));
  add_to(tokenize)("data", k.data, "UTF-8 text file", kShowDefault);

  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  if (argv.empty()) argv.push_back("train_lm");
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    out.exit_code = app.exit(e) == 0 ? 0 : 2;
    return out;
  }
  try {
    if (train->parsed()) {
      for (const CLI::Option* opt : train->get_options())
        if (opt->count() > 0 && !opt->get_lnames().empty()) t.explicit_flags.insert(opt->get_lnames()[0]);
      TrainOptions p;
      apply_preset(p, t.preset);
      auto given = [&](const char* flag) { return t.explicit_flags.count(flag) > 0; };
      if (!given("context-length")) t.model.context_length = p.model.context_length;
      if (!given("emb-dim")) t.model.emb_dim = p.model.emb_dim;
      if (!given("n-heads")) t.model.n_heads = p.model.n_heads;
      if (!given("n-layers")) t.model.n_layers = p.model.n_layers;
      if (!given("drop-rate")) t.model.drop_rate = p.model.drop_rate;
      if (!given("batch-size")) t.batch_size = p.batch_size;
      if (!given("warmup")) t.warmup = std::min<int64_t>(t.warmup, t.steps / 10);
      if (!t.resume) validate(t);  // on --resume, after merging the checkpoint's options
      out.kind = CliParse::kTrain;
      out.train = std::move(t);
    } else if (tokenize->parsed()) {
      validate(k.tokenizer);
      if (k.data.empty()) bad("--data must not be empty");
      out.kind = CliParse::kTokenize;
      out.tokenize = std::move(k);
    } else {
      validate(g);
      out.kind = CliParse::kGenerate;
      out.generate = std::move(g);
    }
  } catch (const ConfigError& e) {
    std::cerr << "train_lm: error: " << e.what() << "\n";
    out.kind = CliParse::kExit;
    out.exit_code = 2;
  }
  return out;
}

int run_cli(const std::vector<std::string>& args) {
  CliParse p = parse_cli(args);
  switch (p.kind) {
    case CliParse::kTrain:
      return run_train(std::move(p.train));
    case CliParse::kGenerate:
      return run_generate(p.generate);
    case CliParse::kTokenize:
      return run_tokenize(p.tokenize);
    case CliParse::kExit:
      break;
  }
  return p.exit_code;
}

// ---------------------------------------------------------------- validation
void apply_preset(TrainOptions& o, const std::string& preset) {
  struct P {
    const char* name;
    int64_t ctx, emb, heads, layers, batch;
  };
  static constexpr P presets[] = {
      {"tiny", 64, 64, 4, 2, 32},
      {"small", 128, 128, 4, 4, 16},
      {"medium", 256, 384, 6, 6, 8},
  };
  for (const P& p : presets) {
    if (preset != p.name) continue;
    o.preset = preset;
    o.model.context_length = p.ctx;
    o.model.emb_dim = p.emb;
    o.model.n_heads = p.heads;
    o.model.n_layers = p.layers;
    o.model.drop_rate = 0.1;
    o.model.qkv_bias = false;
    o.batch_size = p.batch;
    return;
  }
  bad("--preset must be tiny, small or medium, got '", preset, "'");
}

void validate_model(const GPTConfig& c, bool with_vocab) {
  if (with_vocab && c.vocab_size <= 0) bad("--vocab-size must be positive, got ", c.vocab_size);
  check("context-length", c.context_length);
  check("emb-dim", c.emb_dim);
  check("n-heads", c.n_heads);
  check("n-layers", c.n_layers);
  if (c.emb_dim % c.n_heads != 0)
    bad("--emb-dim ", c.emb_dim, " is not divisible by --n-heads ", c.n_heads,
        " (each head gets emb_dim / n_heads features)");
  check("drop-rate", c.drop_rate);
}

void validate(const TrainOptions& o) {
  validate_model(o.model, /*with_vocab=*/false);
  for_each_train_flag(o, [](const char* name, const auto& field, const char*, int) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
      if (flag_range(name)) check(name, field);
  });
  if (o.min_lr > o.lr) bad("--min-lr ", o.min_lr, " is larger than --lr ", o.lr);
  if (o.warmup >= o.steps) bad("--warmup ", o.warmup, " must be smaller than --steps ", o.steps);
  validate_sampling(o.temperature, o.top_k, o.top_p);
  if (o.checkpoint_dir.empty()) bad("--checkpoint-dir must not be empty");
  if (o.data.empty()) bad("--data must not be empty");
  validate(o.tokenizer);
}

void validate(const TokenizerSpec& t) {
  if (t.kind != "char" && t.kind != "gpt2" && t.kind != "bpe")
    bad("--tokenizer must be char, gpt2 or bpe, got '", t.kind, "'");
  check("bpe-merges", t.bpe_merges);
  if (t.kind == "gpt2" && t.gpt2_vocab_dir.empty()) bad("--gpt2-vocab must not be empty");
}

void validate(const GenerateOptions& o) {
  if (o.checkpoint.empty()) bad("--checkpoint must not be empty");
  check("max-new-tokens", o.max_new_tokens);
  validate_sampling(o.temperature, o.top_k, o.top_p);
  check("threads", o.threads);
}

// ---------------------------------------------------------------- JSON
nlohmann::json to_json(const GPTConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  GPTConfig::for_each_field([&](const char* name, auto field) { j[name] = c.*field; });
  return j;
}

GPTConfig gpt_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad("the saved model config is not a JSON object");
  GPTConfig c;
  GPTConfig::for_each_field([&](const char* k, auto field) {
    using T = std::remove_reference_t<decltype(c.*field)>;
    // checkpoints from before --tie-weights have no such field: they are untied (the default)
    if (std::string_view(k) == "tie_weights" && !j.contains(k)) return;
    const bool ok = j.contains(k) && (std::is_same_v<T, int64_t> ? j[k].is_number_integer()
                                      : std::is_same_v<T, bool>  ? j[k].is_boolean()
                                                                 : j[k].is_number());
    if (!ok) bad("the saved model config has no ", std::is_same_v<T, int64_t> ? "integer '" : "'", k, "'");
    c.*field = j[k].get<T>();
  });
  try {
    validate_model(c, /*with_vocab=*/true);
  } catch (const ConfigError& e) {
    bad("the saved model config is invalid: ", e.what());
  }
  return c;
}

std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now) {
  std::ostringstream os;
  const char* sep = "";
  GPTConfig::for_each_field([&](const char* name, auto field) {
    if (saved.*field == now.*field) return;
    os << sep << name << " " << saved.*field << " in the checkpoint vs " << now.*field << " now";
    sep = ", ";
  });
  return os.str();
}

nlohmann::json train_options_to_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  auto save = [&](const char* name, const auto& field, const char*, int attrs) {
    if (attrs & kSaved) j[name] = field;
  };
  for_each_train_flag(o, save);
  for_each_tokenizer_flag(o.tokenizer, save);
  return j;
}

void merge_saved_options(TrainOptions& o, const nlohmann::json& saved, const GPTConfig& saved_model) {
  // The model is the checkpoint's: an explicit flag that disagrees is an error.
  auto same_model = [&](const char* flag, auto& now, auto was, bool show_values) {
    if (o.explicit_flags.count(flag) && now != was) {
      if (!show_values) bad("--", flag, " does not match the checkpoint being resumed");
      if constexpr (std::is_integral_v<std::decay_t<decltype(was)>>)
        bad("--", flag, " ", now, " does not match the checkpoint being resumed (", flag, " ", was,
            "); drop the flag or start a new --checkpoint-dir");
      else bad("--", flag, " ", now, " does not match the checkpoint being resumed (", was, ")");
    }
    now = was;
  };
  same_model("context-length", o.model.context_length, saved_model.context_length, true);
  same_model("emb-dim", o.model.emb_dim, saved_model.emb_dim, true);
  same_model("n-heads", o.model.n_heads, saved_model.n_heads, true);
  same_model("n-layers", o.model.n_layers, saved_model.n_layers, true);
  same_model("drop-rate", o.model.drop_rate, saved_model.drop_rate, true);
  same_model("qkv-bias", o.model.qkv_bias, saved_model.qkv_bias, false);
  same_model("tie-weights", o.model.tie_weights, saved_model.tie_weights, false);

  if (!saved.is_object()) bad("the checkpoint's training options are not a JSON object");
  auto take = [&](const char* key, auto& field, const char*, int attrs) {
    using T = std::decay_t<decltype(field)>;
    const std::string_view k = key;
    if (!(attrs & kSaved) || k == "tokenizer" || o.explicit_flags.count(key) || !saved.contains(key)) return;
    const nlohmann::json& v = saved[key];
    // nlohmann converts a number to any arithmetic type with a plain cast, which is undefined
    // for 2e118 -> int64: an integer option must hold an integer that fits.
    bool fits = true;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (v.is_number_unsigned())
        fits = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
      else if (v.is_number_integer()) fits = std::in_range<T>(v.get<int64_t>());
      else fits = false;
    }
    if (!fits) bad("the checkpoint's training option '", key, "' is not an integer in range: ", v.dump());
    try {
      field = v.get<T>();
    } catch (const nlohmann::json::exception&) {
      bad("the checkpoint's training option '", key, "' has the wrong type");
    }
  };
  for_each_train_flag(o, take);
  for_each_tokenizer_flag(o.tokenizer, take);
  // the tokenizer itself comes from the checkpoint (run_train); a different kind is an error
  const std::string kind = saved.contains("tokenizer") && saved["tokenizer"].is_string()
                               ? saved["tokenizer"].get<std::string>()
                               : "char";  // from before --tokenizer
  if (o.explicit_flags.count("tokenizer") && o.tokenizer.kind != kind)
    bad("--tokenizer ", o.tokenizer.kind, " does not match the checkpoint being resumed (", kind,
        "); drop the flag or start a new --checkpoint-dir");
  o.tokenizer.kind = kind;
}

}  // namespace train_lm
