// examples/train_lm/config.cpp: see config.h.
#include "config.h"

#include <cmath>
#include <sstream>

namespace train_lm {
namespace {

template <class... Parts>
[[noreturn]] void bad(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw ConfigError(os.str());
}

void check_positive(const char* flag, int64_t v) {
  if (v <= 0) bad("--", flag, " must be positive, got ", v);
}
void check_finite_nonneg(const char* flag, double v) {
  if (!std::isfinite(v) || v < 0) bad("--", flag, " must be a finite number >= 0, got ", v);
}

}  // namespace

std::string TrainOptions::metrics_path() const {
  return metrics.empty() ? checkpoint_dir + "/metrics.csv" : metrics;
}

void apply_preset(TrainOptions& o, const std::string& preset) {
  struct P { const char* name; int64_t ctx, emb, heads, layers, batch; double drop; };
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
  check_positive("context-length", c.context_length);
  check_positive("emb-dim", c.emb_dim);
  check_positive("n-heads", c.n_heads);
  check_positive("n-layers", c.n_layers);
  if (c.emb_dim % c.n_heads != 0)
    bad("--emb-dim ", c.emb_dim, " is not divisible by --n-heads ", c.n_heads,
        " (each head gets emb_dim / n_heads features)");
  if (!(c.drop_rate >= 0.0 && c.drop_rate < 1.0))
    bad("--drop-rate must be in [0, 1), got ", c.drop_rate);
}

void validate(const TrainOptions& o) {
  validate_model(o.model, /*with_vocab=*/false);
  check_positive("batch-size", o.batch_size);
  check_positive("steps", o.steps);
  check_finite_nonneg("time-budget", o.time_budget);
  if (!std::isfinite(o.lr) || o.lr <= 0) bad("--lr must be a positive number, got ", o.lr);
  check_finite_nonneg("min-lr", o.min_lr);
  if (o.min_lr > o.lr) bad("--min-lr ", o.min_lr, " is larger than --lr ", o.lr);
  if (o.warmup < 0) bad("--warmup must be >= 0, got ", o.warmup);
  if (o.warmup >= o.steps)
    bad("--warmup ", o.warmup, " must be smaller than --steps ", o.steps);
  check_finite_nonneg("weight-decay", o.weight_decay);
  if (!(o.beta1 >= 0 && o.beta1 < 1)) bad("--beta1 must be in [0, 1), got ", o.beta1);
  if (!(o.beta2 >= 0 && o.beta2 < 1)) bad("--beta2 must be in [0, 1), got ", o.beta2);
  check_finite_nonneg("grad-clip", o.grad_clip);
  check_positive("eval-interval", o.eval_interval);
  check_positive("eval-iters", o.eval_iters);
  if (o.threads < 0) bad("--threads must be >= 0, got ", o.threads);
  if (o.keep_checkpoints < 1) bad("--keep-checkpoints must be >= 1, got ", o.keep_checkpoints);
  if (o.sample_length < 0) bad("--sample-length must be >= 0, got ", o.sample_length);
  check_finite_nonneg("temperature", o.temperature);
  if (o.top_k < 0) bad("--top-k must be >= 0, got ", o.top_k);
  if (o.checkpoint_dir.empty()) bad("--checkpoint-dir must not be empty");
  if (o.data.empty()) bad("--data must not be empty");
}

void validate(const GenerateOptions& o) {
  if (o.checkpoint.empty()) bad("--checkpoint must not be empty");
  if (o.max_new_tokens < 0) bad("--max-new-tokens must be >= 0, got ", o.max_new_tokens);
  check_finite_nonneg("temperature", o.temperature);
  if (o.top_k < 0) bad("--top-k must be >= 0, got ", o.top_k);
  if (o.threads < 0) bad("--threads must be >= 0, got ", o.threads);
}

nlohmann::json to_json(const GPTConfig& c) {
  return {{"vocab_size", c.vocab_size}, {"context_length", c.context_length},
          {"emb_dim", c.emb_dim},       {"n_heads", c.n_heads},
          {"n_layers", c.n_layers},     {"drop_rate", c.drop_rate},
          {"qkv_bias", c.qkv_bias}};
}

GPTConfig gpt_config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad("the saved model config is not a JSON object");
  GPTConfig c;
  auto int_field = [&](const char* k, int64_t& f) {
    if (!j.contains(k) || !j[k].is_number_integer()) bad("the saved model config has no integer '", k, "'");
    f = j[k].get<int64_t>();
  };
  int_field("vocab_size", c.vocab_size);
  int_field("context_length", c.context_length);
  int_field("emb_dim", c.emb_dim);
  int_field("n_heads", c.n_heads);
  int_field("n_layers", c.n_layers);
  if (!j.contains("drop_rate") || !j["drop_rate"].is_number()) bad("the saved model config has no 'drop_rate'");
  c.drop_rate = j["drop_rate"].get<double>();
  if (!j.contains("qkv_bias") || !j["qkv_bias"].is_boolean()) bad("the saved model config has no 'qkv_bias'");
  c.qkv_bias = j["qkv_bias"].get<bool>();
  try {
    validate_model(c, /*with_vocab=*/true);
  } catch (const ConfigError& e) {
    bad("the saved model config is invalid: ", e.what());
  }
  return c;
}

bool same_config(const GPTConfig& a, const GPTConfig& b) {
  return a.vocab_size == b.vocab_size && a.context_length == b.context_length &&
         a.emb_dim == b.emb_dim && a.n_heads == b.n_heads && a.n_layers == b.n_layers &&
         a.drop_rate == b.drop_rate && a.qkv_bias == b.qkv_bias;
}

std::string describe_config_diff(const GPTConfig& saved, const GPTConfig& now) {
  std::ostringstream os;
  const char* sep = "";
  auto cmp = [&](const char* name, auto a, auto b) {
    if (a != b) {
      os << sep << name << " " << a << " in the checkpoint vs " << b << " now";
      sep = ", ";
    }
  };
  cmp("vocab_size", saved.vocab_size, now.vocab_size);
  cmp("context_length", saved.context_length, now.context_length);
  cmp("emb_dim", saved.emb_dim, now.emb_dim);
  cmp("n_heads", saved.n_heads, now.n_heads);
  cmp("n_layers", saved.n_layers, now.n_layers);
  cmp("drop_rate", saved.drop_rate, now.drop_rate);
  cmp("qkv_bias", saved.qkv_bias, now.qkv_bias);
  return os.str();
}

nlohmann::json train_options_to_json(const TrainOptions& o) {
  return {{"preset", o.preset},
          {"batch-size", o.batch_size},
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
          {"data", o.data}};
}

void merge_saved_options(TrainOptions& o, const nlohmann::json& saved,
                         const GPTConfig& saved_model) {
  // The model must be the checkpoint's: an explicit flag that disagrees is an error.
  struct Field { const char* flag; int64_t* now; int64_t saved; };
  Field fields[] = {{"context-length", &o.model.context_length, saved_model.context_length},
                    {"emb-dim", &o.model.emb_dim, saved_model.emb_dim},
                    {"n-heads", &o.model.n_heads, saved_model.n_heads},
                    {"n-layers", &o.model.n_layers, saved_model.n_layers}};
  for (Field& f : fields) {
    if (o.explicit_flags.count(f.flag) && *f.now != f.saved)
      bad("--", f.flag, " ", *f.now, " does not match the checkpoint being resumed (", f.flag,
          " ", f.saved, "); drop the flag or start a new --checkpoint-dir");
    *f.now = f.saved;
  }
  if (o.explicit_flags.count("drop-rate") && o.model.drop_rate != saved_model.drop_rate)
    bad("--drop-rate ", o.model.drop_rate, " does not match the checkpoint being resumed (",
        saved_model.drop_rate, ")");
  o.model.drop_rate = saved_model.drop_rate;
  if (o.explicit_flags.count("qkv-bias") && o.model.qkv_bias != saved_model.qkv_bias)
    bad("--qkv-bias does not match the checkpoint being resumed");
  o.model.qkv_bias = saved_model.qkv_bias;

  if (!saved.is_object()) bad("the checkpoint's training options are not a JSON object");
  auto take = [&](const char* key, auto& field) {
    if (o.explicit_flags.count(key) || !saved.contains(key)) return;
    try {
      field = saved[key].get<std::decay_t<decltype(field)>>();
    } catch (const nlohmann::json::exception&) {
      bad("the checkpoint's training option '", key, "' has the wrong type");
    }
  };
  take("preset", o.preset);
  take("batch-size", o.batch_size);
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
  take("data", o.data);
}

}  // namespace train_lm
