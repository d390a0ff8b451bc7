// examples/train_lm/config.cpp: see config.h.
#include "config.h"

#include "xgrad/nn/sampling.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>

namespace train_lm {
namespace {

template <class... Parts>
[[noreturn]] void bad(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw ConfigError(os.str());
}

// One row per numeric flag: the README's "range" column.
constexpr double kBig = 1e9;
const FlagRange kRanges[] = {
    {"context-length", 1, 1 << 20, true},
    {"emb-dim", 1, 1 << 20, true},
    {"n-heads", 1, 1 << 16, true},
    {"n-layers", 1, 1 << 16, true},
    {"drop-rate", 0, 1, false},     // torch's nn.Dropout range (xgrad::check_dropout_p)
    {"batch-size", 1, 1e12, true},  // memory is the real limit: checked against the machine
    {"grad-accum", 1, 1e6, true},
    {"profile", 0, kBig, true},
    {"steps", 1, kBig, true},
    {"time-budget", 0, kBig, false},
    {"lr", 0, 10, false, true, false},
    {"min-lr", 0, 10, false},
    {"warmup", 0, kBig, true},
    {"weight-decay", 0, 100, false},
    {"beta1", 0, 1, false, false, true},
    {"beta2", 0, 1, false, false, true},
    {"grad-clip", 0, kBig, false},
    {"eval-interval", 1, kBig, true},
    {"eval-iters", 1, kBig, true},
    {"seed", 0, 18446744073709551615.0, true},
    {"threads", 0, 4096, true},
    {"keep-checkpoints", 1, 1e6, true},
    {"sample-length", 0, kBig, true},
    {"max-new-tokens", 0, kBig, true},
    {"temperature", 0, 1e6, false},
    {"top-k", 0, kBig, true},
    {"top-p", 0, 1, false, true, false},
    {"bpe-merges", 0, 1e6, true},
};

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

bool in_range(const FlagRange& r, double v) {
  return std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

const FlagRange& range_of(const char* flag) {
  const FlagRange* r = flag_range(flag);
  if (!r) throw std::logic_error(std::string("no range for flag --") + flag);
  return *r;
}

// Values already converted (from a checkpoint, a test, a struct): the same ranges.
void check(const char* flag, int64_t v) {
  const FlagRange& r = range_of(flag);
  if (!in_range(r, static_cast<double>(v))) bad("--", flag, " must be in ", describe_range(r), ", got ", v);
}
void check(const char* flag, double v) {
  const FlagRange& r = range_of(flag);
  if (!in_range(r, v)) bad("--", flag, " must be in ", describe_range(r), ", got ", num(v));
}

void check_positive(const char* flag, int64_t v) {
  if (v <= 0) bad("--", flag, " must be positive, got ", v);
}

}  // namespace

const FlagRange* flag_range(const std::string& flag) {
  for (const FlagRange& r : kRanges)
    if (flag == r.flag) return &r;
  return nullptr;
}

std::string describe_range(const FlagRange& r) {
  if (std::string(r.flag) == "seed") return "[0, 18446744073709551615]";
  return std::string(r.lo_open ? "(" : "[") + num(r.lo) + ", " + num(r.hi) + (r.hi_open ? ")" : "]");
}

std::string check_flag_text(const std::string& flag, const std::string& text) {
  const FlagRange* r = flag_range(flag);
  if (!r) return "";
  const std::string name = "--" + flag;
  const char* b = text.data();
  const char* e = text.data() + text.size();
  if (r->integer) {
    if (flag == "seed") {
      uint64_t u = 0;
      auto [p, ec] = std::from_chars(b, e, u);
      if (ec == std::errc::result_out_of_range)
        return name + " " + text + " is out of range " + describe_range(*r);
      if (ec != std::errc() || p != e || text.empty())
        return name + " must be an integer in " + describe_range(*r) + ", got '" + text + "'";
      return "";
    }
    int64_t v = 0;
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec == std::errc::result_out_of_range)
      return name + " " + text + " is out of range " + describe_range(*r);
    if (ec != std::errc() || p != e || text.empty())
      return name + " must be an integer in " + describe_range(*r) + ", got '" + text + "'";
    if (!in_range(*r, static_cast<double>(v)))
      return name + " " + text + " is out of range " + describe_range(*r);
    return "";
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    return name + " must be a number in " + describe_range(*r) + ", got '" + text + "'";
  if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) > 1))
    return name + " " + text + " is not a finite number (range " + describe_range(*r) + ")";
  if (!in_range(*r, v)) return name + " " + text + " is out of range " + describe_range(*r);
  return "";
}

void validate_sampling(double temperature, int64_t top_k, double top_p) {
  check("temperature", temperature);
  check("top-k", top_k);
  check("top-p", top_p);
  // the library's rules (nn::sampling_problem: a subnormal temperature) with flag names
  const std::string problem = xgrad::nn::sampling_problem({temperature, top_k, top_p});
  if (!problem.empty()) bad("--", problem);
}

std::string TrainOptions::metrics_path() const {
  return metrics.empty() ? checkpoint_dir + "/metrics.csv" : metrics;
}

void apply_preset(TrainOptions& o, const std::string& preset) {
  struct P {
    const char* name;
    int64_t ctx, emb, heads, layers, batch;
    double drop;
  };
  static constexpr P presets[] = {
      {"tiny", 64, 64, 4, 2, 32, 0.1},
      {"small", 128, 128, 4, 4, 16, 0.1},
      {"medium", 256, 384, 6, 6, 8, 0.1},
  };
  for (const P& p : presets) {
    if (preset == p.name) {
      o.preset = preset;
      o.model.context_length = p.ctx;
      o.model.emb_dim = p.emb;
      o.model.n_heads = p.heads;
      o.model.n_layers = p.layers;
      o.model.drop_rate = p.drop;
      o.model.qkv_bias = false;
      o.batch_size = p.batch;
      return;
    }
  }
  bad("--preset must be tiny, small or medium, got '", preset, "'");
}

void validate_model(const GPTConfig& c, bool with_vocab) {
  if (with_vocab) check_positive("vocab-size", c.vocab_size);
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
  check("batch-size", o.batch_size);
  check("grad-accum", o.grad_accum);
  check("profile", o.profile);
  check("steps", o.steps);
  check("time-budget", o.time_budget);
  check("lr", o.lr);
  check("min-lr", o.min_lr);
  if (o.min_lr > o.lr) bad("--min-lr ", o.min_lr, " is larger than --lr ", o.lr);
  check("warmup", o.warmup);
  if (o.warmup >= o.steps) bad("--warmup ", o.warmup, " must be smaller than --steps ", o.steps);
  check("weight-decay", o.weight_decay);
  check("beta1", o.beta1);
  check("beta2", o.beta2);
  check("grad-clip", o.grad_clip);
  check("eval-interval", o.eval_interval);
  check("eval-iters", o.eval_iters);
  check("threads", static_cast<int64_t>(o.threads));
  check("keep-checkpoints", static_cast<int64_t>(o.keep_checkpoints));
  check("sample-length", o.sample_length);
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
  check("threads", static_cast<int64_t>(o.threads));
}

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
    if constexpr (std::is_same_v<T, int64_t>) {
      if (!j.contains(k) || !j[k].is_number_integer()) bad("the saved model config has no integer '", k, "'");
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!j.contains(k) || !j[k].is_boolean()) bad("the saved model config has no '", k, "'");
    } else {
      if (!j.contains(k) || !j[k].is_number()) bad("the saved model config has no '", k, "'");
    }
    c.*field = j[k].get<T>();
  });
  try {
    validate_model(c, /*with_vocab=*/true);
  } catch (const ConfigError& e) {
    bad("the saved model config is invalid: ", e.what());
  }
  return c;
}

bool same_config(const GPTConfig& a, const GPTConfig& b) { return a == b; }

std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now) {
  std::ostringstream os;
  const char* sep = "";
  auto cmp = [&](const char* name, auto a, auto b) {
    if (a != b) {
      os << sep << name << " " << a << " in the checkpoint vs " << b << " now";
      sep = ", ";
    }
  };
  GPTConfig::for_each_field([&](const char* name, auto field) { cmp(name, saved.*field, now.*field); });
  return os.str();
}

nlohmann::json train_options_to_json(const TrainOptions& o) {
  return {{"preset", o.preset},
          {"batch-size", o.batch_size},
          {"grad-accum", o.grad_accum},
          {"steps", o.steps},
          {"lr", o.lr},
          {"min-lr", o.min_lr},
          {"warmup", o.warmup},
          {"weight-decay", o.weight_decay},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"grad-clip", o.grad_clip},
          {"eval-interval", o.eval_interval},
          {"eval-iters", o.eval_iters},
          {"seed", o.seed},
          {"keep-checkpoints", o.keep_checkpoints},
          {"sample-length", o.sample_length},
          {"temperature", o.temperature},
          {"top-k", o.top_k},
          {"top-p", o.top_p},
          {"data", o.data},
          {"tokenizer", o.tokenizer.kind},
          {"bpe-merges", o.tokenizer.bpe_merges}};
}

void merge_saved_options(TrainOptions& o, const nlohmann::json& saved, const GPTConfig& saved_model) {
  // The model must be the checkpoint's: an explicit flag that disagrees is an error.
  struct Field {
    const char* flag;
    int64_t* now;
    int64_t saved;
  };
  Field fields[] = {{"context-length", &o.model.context_length, saved_model.context_length},
                    {"emb-dim", &o.model.emb_dim, saved_model.emb_dim},
                    {"n-heads", &o.model.n_heads, saved_model.n_heads},
                    {"n-layers", &o.model.n_layers, saved_model.n_layers}};
  for (Field& f : fields) {
    if (o.explicit_flags.count(f.flag) && *f.now != f.saved)
      bad("--", f.flag, " ", *f.now, " does not match the checkpoint being resumed (", f.flag, " ", f.saved,
          "); drop the flag or start a new --checkpoint-dir");
    *f.now = f.saved;
  }
  if (o.explicit_flags.count("drop-rate") && o.model.drop_rate != saved_model.drop_rate)
    bad("--drop-rate ", o.model.drop_rate, " does not match the checkpoint being resumed (",
        saved_model.drop_rate, ")");
  o.model.drop_rate = saved_model.drop_rate;
  if (o.explicit_flags.count("qkv-bias") && o.model.qkv_bias != saved_model.qkv_bias)
    bad("--qkv-bias does not match the checkpoint being resumed");
  o.model.qkv_bias = saved_model.qkv_bias;
  if (o.explicit_flags.count("tie-weights") && o.model.tie_weights != saved_model.tie_weights)
    bad("--tie-weights does not match the checkpoint being resumed");
  o.model.tie_weights = saved_model.tie_weights;

  if (!saved.is_object()) bad("the checkpoint's training options are not a JSON object");
  auto take = [&](const char* key, auto& field) {
    using T = std::decay_t<decltype(field)>;
    if (o.explicit_flags.count(key) || !saved.contains(key)) return;
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
  take("preset", o.preset);
  take("batch-size", o.batch_size);
  take("grad-accum", o.grad_accum);
  take("steps", o.steps);
  take("lr", o.lr);
  take("min-lr", o.min_lr);
  take("warmup", o.warmup);
  take("weight-decay", o.weight_decay);
  take("beta1", o.beta1);
  take("beta2", o.beta2);
  take("grad-clip", o.grad_clip);
  take("eval-interval", o.eval_interval);
  take("eval-iters", o.eval_iters);
  take("seed", o.seed);
  take("keep-checkpoints", o.keep_checkpoints);
  take("sample-length", o.sample_length);
  take("temperature", o.temperature);
  take("top-k", o.top_k);
  take("top-p", o.top_p);
  take("data", o.data);
  // the tokenizer itself comes from the checkpoint (run_train); a different kind is an error
  if (saved.contains("tokenizer") && saved["tokenizer"].is_string()) {
    const std::string kind = saved["tokenizer"].get<std::string>();
    if (o.explicit_flags.count("tokenizer") && o.tokenizer.kind != kind)
      bad("--tokenizer ", o.tokenizer.kind, " does not match the checkpoint being resumed (", kind,
          "); drop the flag or start a new --checkpoint-dir");
    o.tokenizer.kind = kind;
  } else {
    if (o.explicit_flags.count("tokenizer") && o.tokenizer.kind != "char")
      bad("--tokenizer ", o.tokenizer.kind, " does not match the checkpoint being resumed (char)");
    o.tokenizer.kind = "char";  // checkpoints from before --tokenizer
  }
  take("bpe-merges", o.tokenizer.bpe_merges);
}

}  // namespace train_lm
