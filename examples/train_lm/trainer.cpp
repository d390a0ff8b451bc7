// examples/train_lm/trainer.cpp: see trainer.h. The commands (run_train, run_generate) are
// in commands.cpp.
#include "trainer.h"
#include "world.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <new>
#include <numeric>
#include <set>

#include "xgrad/autograd.h"
#include "xgrad/error.h"
#include "xgrad/nn/clip_grad.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace train_lm {

using xgrad::Tensor;
namespace nn = xgrad::nn;
namespace optim = xgrad::optim;

namespace {

constexpr const char* kFormat = "xgrad-train_lm";

// Seeds derived from --seed for the independent random streams.
uint64_t batch_seed(uint64_t seed) { return seed + 1; }
uint64_t eval_seed(uint64_t seed, bool val) { return seed + (val ? 3 : 2); }
uint64_t sample_seed(uint64_t seed) { return seed + 4; }

const std::string& meta_at(const Metadata& m, const std::string& key, const std::string& file) {
  auto it = m.find(key);
  if (it == m.end())
    xgrad::fail("checkpoint", file, ": metadata has no '", key, "' (not a train_lm checkpoint?)");
  return it->second;
}

nlohmann::json meta_json(const Metadata& m, const std::string& key, const std::string& file) {
  const std::string& text = meta_at(m, key, file);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) xgrad::fail("checkpoint", file, ": metadata '", key, "' is not valid JSON");
  return j;
}

int64_t meta_int(const Metadata& m, const std::string& key, const std::string& file) {
  const std::string& text = meta_at(m, key, file);
  try {
    std::size_t used = 0;
    long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  xgrad::fail("checkpoint", file, ": metadata '", key, "' is not a non-negative integer: '", text, "'");
}

std::string vocab_diff(const Tokenizer& saved_tok, const Tokenizer& now_tok) {
  const auto* saved_chars = dynamic_cast<const CharTokenizer*>(&saved_tok);
  const auto* now_chars = dynamic_cast<const CharTokenizer*>(&now_tok);
  if (!saved_chars || !now_chars)
    return saved_tok.kind() == now_tok.kind()
               ? "the " + saved_tok.kind() + " vocabularies (merges) differ"
               : "the checkpoint's tokenizer is " + saved_tok.kind() + ", this run's is " + now_tok.kind();
  const CharTokenizer& saved = *saved_chars;
  const CharTokenizer& now = *now_chars;
  std::vector<char32_t> only_saved, only_now;
  std::set_difference(saved.vocab().begin(), saved.vocab().end(), now.vocab().begin(), now.vocab().end(),
                      std::back_inserter(only_saved));
  std::set_difference(now.vocab().begin(), now.vocab().end(), saved.vocab().begin(), saved.vocab().end(),
                      std::back_inserter(only_now));
  auto show = [](const std::vector<char32_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 10; ++i) {
      s += i ? " '" : "'";
      append_utf8(s, v[i]);
      s += "'";
    }
    if (v.size() > 10) s += " ...";
    return s.empty() ? std::string("none") : s;
  };
  return "only in the checkpoint: " + show(only_saved) + "; only in the corpus: " + show(only_now);
}

// "characters" for the char tokenizer, "tokens" for the others
const char* unit(const Tokenizer& t) { return t.kind() == "char" ? "characters" : "tokens"; }

}  // namespace

// ---------------------------------------------------------------- corpus
std::string read_corpus(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    xgrad::fail("corpus", path,
                " not found; run scripts/get_corpus.sh to fetch Moby-Dick into "
                "data/moby_dick.txt, or pass --data FILE");
  if (!fs::is_regular_file(path, ec)) xgrad::fail("corpus", path, " is not a regular file");
  std::string text = read_file(path);
  if (text.empty()) xgrad::fail("corpus", path, " is empty");
  decode_utf8(text, path);  // throws with the byte offset of the first invalid sequence
  return text;
}

Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer) {
  Corpus c;
  c.tokenizer = tokenizer ? std::move(tokenizer)
                          : std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  std::vector<int64_t> ids = c.tokenizer->encode(text);
  const char* units = unit(*c.tokenizer);
  c.split = split_tokens(ids, 0.9);
  const int64_t window = context_length + 1;
  const int64_t n_train = static_cast<int64_t>(c.split.train.size());
  const int64_t n_val = static_cast<int64_t>(c.split.val.size());
  if (n_train < window || n_val < window)
    xgrad::fail("corpus", source, " has ", ids.size(), " ", units, ": the ",
                n_val < window ? "validation" : "training", " split (", n_val < window ? n_val : n_train, " ",
                units, ") is shorter than one window of context_length + 1 = ", window,
                "; use a longer corpus (about 10 x ", window, " = ", 10 * window, " ", units,
                " at least) or a smaller --context-length");
  return c;
}

// ---------------------------------------------------------------- Trainer
Trainer::Trainer(TrainOptions o, Corpus corpus)
    : o_(std::move(o)),
      corpus_(std::move(corpus)),
      train_batches_(&corpus_.split.train, o_.batch_size, o_.model.context_length, batch_seed(o_.seed),
                     "train") {
  o_.model.vocab_size = corpus_.tokenizer->vocab_size();
  validate_model(o_.model, /*with_vocab=*/true);
  xgrad::manual_seed(o_.seed);
  model_ = std::make_shared<nn::GPTModel>(o_.model);
  model_->train();
  forward_ = data_parallel(model_);  // mpirun -np N: rank 0's weights on every rank (world.h)

  // nanoGPT's split: matrices (and embeddings) decay, biases and LayerNorm weights do not.
  std::vector<Tensor> decay, no_decay;
  std::vector<std::string> decay_names, no_decay_names;
  for (auto& [name, p] : model_->named_parameters()) {
    if (p.dim() >= 2) {
      decay.push_back(p);
      decay_names.push_back(name);
    } else {
      no_decay.push_back(p);
      no_decay_names.push_back(name);
    }
  }
  optim::AdamWOptions base{.lr = o_.lr,
                           .betas = {o_.beta1, o_.beta2},
                           .eps = 1e-8,
                           .weight_decay = o_.weight_decay,
                           .amsgrad = false};
  optim::AdamWOptions nd = base;
  nd.weight_decay = 0.0;
  std::vector<optim::AdamW::ParamGroup> groups;
  if (!decay.empty()) groups.push_back({decay, base});
  if (!no_decay.empty()) groups.push_back({no_decay, nd});
  opt_param_names_ = decay.empty() ? std::vector<std::string>{} : decay_names;
  if (!no_decay.empty())
    opt_param_names_.insert(opt_param_names_.end(), no_decay_names.begin(), no_decay_names.end());
  opt_ = std::make_unique<optim::AdamW>(std::move(groups));
  sched_ = std::make_unique<optim::WarmupCosineLR>(
      *opt_, optim::WarmupCosineLROptions{
                 .warmup_iters = o_.warmup, .lr_decay_iters = o_.steps, .min_lr = o_.min_lr});
}

double Trainer::lr_at(int64_t step) const { return sched_->lr_at(step, o_.lr); }

NamedTensors Trainer::optimizer_tensors() const {
  NamedTensors out;
  optim::OptimizerState sd = opt_->state_dict();
  for (const auto& [index, entries] : sd.state) {
    const std::string& name = opt_param_names_.at(static_cast<std::size_t>(index));
    for (const auto& [key, t] : entries) out.emplace_back("optim." + name + "." + key, t);
  }
  return out;
}

Metadata Trainer::model_metadata() const {
  return {{"format", "pt"},
          {"producer", kFormat},
          {"config", to_json(o_.model).dump()},
          {"vocab", corpus_.tokenizer->to_json()},
          {"step", std::to_string(step_)}};
}

Metadata Trainer::train_state_metadata() const {
  optim::OptimizerState sd = opt_->state_dict();
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : sd.param_groups) {
    nlohmann::json names = nlohmann::json::array();
    for (int64_t i : g.params) names.push_back(opt_param_names_.at(static_cast<std::size_t>(i)));
    groups.push_back({{"options", g.options}, {"params", names}});
  }
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.3f", elapsed_s_);
  return {{"format", kFormat},
          {"format_version", std::to_string(kCheckpointFormatVersion)},
          {"config", to_json(o_.model).dump()},
          {"train_options", train_options_to_json(o_).dump()},
          {"vocab", corpus_.tokenizer->to_json()},
          {"step", std::to_string(step_)},
          {"tokens_seen", std::to_string(tokens_seen_)},
          {"elapsed_s", elapsed},
          {"rng.default", base64_encode(xgrad::default_generator().get_state())},
          {"rng.batches", base64_encode(train_batches_.get_state())},
          {"optimizer", nlohmann::json{{"type", sd.type}, {"param_groups", groups}}.dump()},
          {"scheduler", nlohmann::json{{"type", "WarmupCosineLR"},
                                       {"last_epoch", sched_->last_epoch()},
                                       {"warmup_iters", o_.warmup},
                                       {"lr_decay_iters", o_.steps},
                                       {"min_lr", o_.min_lr}}
                            .dump()}};
}

fs::path Trainer::save() {
  nn::StateDict sd = model_->state_dict();
  return save_checkpoint(o_.checkpoint_dir, step_, NamedTensors(sd.begin(), sd.end()), model_metadata(),
                         optimizer_tensors(), train_state_metadata(), o_.keep_checkpoints);
}

void Trainer::load(const CheckpointFiles& ck) {
  const std::string file = (ck.dir / kTrainStateFile).string();
  const Metadata& m = ck.train_state.metadata;
  if (meta_at(m, "format", file) != kFormat)
    xgrad::fail("checkpoint", file, ": format is '", m.at("format"), "', expected '", kFormat, "'");
  const std::string& version = meta_at(m, "format_version", file);
  if (version != "1" && version != std::to_string(kCheckpointFormatVersion))
    xgrad::fail("checkpoint", file, ": format_version ", version,
                " is not supported (this build reads versions 1 to ", kCheckpointFormatVersion, ")");
  if (version != "1")  // version 2 files are written with header checksums: both must have them
    for (const auto* f : {&ck.model, &ck.train_state})
      if (!f->header_verified)
        xgrad::fail("checkpoint", (ck.dir / (f == &ck.model ? kModelFile : kTrainStateFile)).string(),
                    ": format_version ", version, " but no ", kHeaderChecksumKey,
                    " (a corrupted checksum key?)");

  // 1. everything is parsed and checked before the model or optimizer changes
  GPTConfig saved_cfg;
  try {
    saved_cfg = gpt_config_from_json(meta_json(m, "config", file));
  } catch (const ConfigError& e) {
    xgrad::fail("checkpoint", file, ": ", e.what());
  }
  // the vocabulary first: a corpus with other characters also changes vocab_size, and the
  // characters are what the user needs to see
  std::unique_ptr<Tokenizer> saved_vocab = xgrad::text::tokenizer_from_json(meta_at(m, "vocab", file));
  if (saved_vocab->to_json() != corpus_.tokenizer->to_json())
    xgrad::fail("checkpoint", file, " has a different vocabulary (", saved_vocab->vocab_size(), " ",
                unit(*saved_vocab), ") than the corpus ", o_.data, " (", corpus_.tokenizer->vocab_size(), " ",
                unit(*corpus_.tokenizer), "): ", vocab_diff(*saved_vocab, *corpus_.tokenizer));
  if (!same_config(saved_cfg, o_.model))
    xgrad::fail("checkpoint", file,
                " was trained with a different model config: ", describe_config_diff(saved_cfg, o_.model));
  const int64_t step = meta_int(m, "step", file);
  const int64_t tokens_seen = meta_int(m, "tokens_seen", file);
  double elapsed = 0;
  try {
    std::size_t used = 0;
    const std::string& text = meta_at(m, "elapsed_s", file);
    elapsed = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(elapsed) || elapsed < 0) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    xgrad::fail("checkpoint", file, ": metadata 'elapsed_s' is not a finite number >= 0");
  }
  auto rng_default = base64_decode(meta_at(m, "rng.default", file), "rng.default");
  auto rng_batches = base64_decode(meta_at(m, "rng.batches", file), "rng.batches");
  for (const auto* s : {&rng_default, &rng_batches})
    if (s->size() != xgrad::Generator::kStateSize)
      xgrad::fail("checkpoint", file, ": an RNG state has ", s->size(), " bytes, expected ",
                  xgrad::Generator::kStateSize);

  // The optimizer state: groups by parameter name, tensors "optim.<param>.<key>".
  nlohmann::json oj = meta_json(m, "optimizer", file);
  optim::OptimizerState os;
  std::map<std::string, int64_t> index_of;
  for (std::size_t i = 0; i < opt_param_names_.size(); ++i)
    index_of[opt_param_names_[i]] = static_cast<int64_t>(i);
  try {
    os.type = oj.at("type").get<std::string>();
    for (const auto& g : oj.at("param_groups")) {
      optim::ParamGroupState pg;
      pg.options = g.at("options").get<std::map<std::string, double>>();
      for (const auto& name : g.at("params")) {
        auto it = index_of.find(name.get<std::string>());
        if (it == index_of.end())
          xgrad::fail("checkpoint", file, ": the optimizer state names parameter '", name.get<std::string>(),
                      "', which this model does not have");
        pg.params.push_back(it->second);
      }
      os.param_groups.push_back(std::move(pg));
    }
  } catch (const nlohmann::json::exception& e) {
    xgrad::fail("checkpoint", file, ": metadata 'optimizer' is malformed (", e.what(), ")");
  }
  for (const auto& [name, t] : ck.train_state.tensors) {
    auto dot = name.rfind('.');
    if (name.rfind("optim.", 0) != 0 || dot == std::string::npos || dot <= 6)
      xgrad::fail("checkpoint", file, ": unexpected tensor '", name, "'");
    auto it = index_of.find(name.substr(6, dot - 6));
    if (it == index_of.end())
      xgrad::fail("checkpoint", file, ": tensor '", name, "' is for a parameter this model does not have");
    os.state[it->second][name.substr(dot + 1)] = t;
  }
  nn::StateDict sd;
  for (const auto& [name, t] : ck.model.tensors) sd.insert(name, t);

  // 2. apply: the model first (all-or-nothing), then the optimizer (all-or-nothing); if the
  // optimizer refuses, the model gets its old values back.
  nn::StateDict before = model_->state_dict().clone();
  try {
    model_->load_state_dict(sd);
  } catch (const xgrad::Error& e) {
    xgrad::fail("checkpoint", (ck.dir / kModelFile).string(), " does not fit the model: ", e.what());
  }
  try {
    opt_->load_state_dict(os);
  } catch (const xgrad::Error& e) {
    model_->load_state_dict(before);
    xgrad::fail("checkpoint", file, ": the optimizer state does not fit: ", e.what());
  }
  step_ = step;
  tokens_seen_ = tokens_seen;
  elapsed_s_ = elapsed;
  sched_->load_state_dict(step_);
  xgrad::default_generator().set_state(rng_default);
  train_batches_.set_state(rng_batches);
}

double Trainer::estimate_loss(const std::string& split) {
  const bool val = split == "val";
  const std::vector<int64_t>* tokens = val ? &corpus_.split.val : &corpus_.split.train;
  BatchSampler batches(tokens, o_.batch_size, o_.model.context_length, eval_seed(o_.seed, val), split);
  const bool was_training = model_->is_training();
  model_->eval();
  xgrad::NoGradGuard no_grad;
  double total = 0;
  for (int64_t i = 0; i < o_.eval_iters; ++i) {
    Batch b = world_shard(batches.next());  // the batch is shared by the ranks
    total += xgrad::cross_entropy_last_dim((*model_)(b.x), b.y).item();
  }
  model_->train(was_training);
  return mean_over_world(total / static_cast<double>(o_.eval_iters));
}

double Trainer::accumulate_gradients(const char*& phase) {
  // nanoGPT's train.py: each micro-batch's mean loss is scaled by 1/grad_accum, so the summed
  // gradients are those of the mean loss over all grad_accum * batch_size sequences. Under
  // mpirun every backward averages the accumulated gradients over the ranks (DDP's node), which
  // is the same sum: averaging is linear (no_sync would only save the inner all-reduces).
  double total = 0;
  for (int64_t micro = 0; micro < o_.grad_accum; ++micro) {
    Batch b = world_shard(train_batches_.next());  // this rank's rows of the global batch
    phase = "forward pass";
    Tensor logits = (*forward_)(b.x);  // (B / ranks, T, vocab)
    Tensor loss = xgrad::cross_entropy_last_dim(logits, b.y);
    // the global micro-batch's loss, the same on every rank, so all ranks stop together
    const double loss_v = mean_over_world(loss.item());
    if (!std::isfinite(loss_v)) return loss_v;
    total += loss_v;
    phase = "backward pass";
    if (o_.grad_accum > 1) loss = loss / static_cast<double>(o_.grad_accum);
    loss.backward();
  }
  return total / static_cast<double>(o_.grad_accum);
}

TrainResult Trainer::train(Progress* progress, MetricsLog* metrics, int64_t stop_after) {
  using clock = std::chrono::steady_clock;
  TrainResult r;
  const auto start = clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  auto say = [&](const std::string& s) {
    if (progress) progress->message(s);
    else spdlog::info("{}", s);
  };
  const std::vector<Tensor> params = model_->parameters();
  const int64_t tokens_per_step = o_.grad_accum * o_.batch_size * o_.model.context_length;
  xgrad::Generator sample_gen(sample_seed(o_.seed));
  int64_t last_saved = -1;
  double step_time_avg = 0;  // seconds, exponential moving average
  model_->train();

  // --profile N: the first N optimizer steps of this run (evaluation included when it falls in)
  std::optional<xgrad::profiler::profile> prof;
  if (o_.profile > 0) prof.emplace();
  int64_t profiled_steps = 0;
  auto finish_profile = [&] {
    if (!prof) return;
    prof->stop();
    const fs::path trace = fs::path(o_.checkpoint_dir) / "profile_trace.json";
    say("profile of " + std::to_string(profiled_steps) + " steps (sorted by self time):\n" +
        prof->key_averages().table("self_cpu_time_total", 30));
    fs::create_directories(trace.parent_path());
    prof->export_chrome_trace(trace.string());
    say("wrote " + trace.string() + " (open it in ui.perfetto.dev or chrome://tracing)");
    prof.reset();
  };

  bool stopped_early = false;
  // which part of a step is running, for an out-of-memory message that says where
  const char* phase = "forward pass";
  try {
    while (step_ < o_.steps) {
      if (stop_after >= 0 && step_ >= stop_after) {
        stopped_early = true;
        break;
      }
      // one decision for all ranks (their clocks differ)
      if (any_over_world(o_.time_budget > 0 && since_start() >= o_.time_budget)) {
        stopped_early = true;
        r.time_budget_hit = true;
        say("time budget of " + format_duration(o_.time_budget) + " spent at step " + std::to_string(step_));
        break;
      }
      const auto t0 = clock::now();
      const double lr = opt_->lr(0);
      const double loss_v = accumulate_gradients(phase);
      if (!std::isfinite(loss_v)) {
        opt_->zero_grad();
        r.nan_stop = true;
        say("loss is " + std::to_string(loss_v) + " at step " + std::to_string(step_ + 1) +
            "; stopping without saving (lower --lr or raise --grad-clip?)");
        break;
      }
      if (o_.grad_clip > 0) xgrad::nn::utils::clip_grad_norm_(params, o_.grad_clip);
      phase = "optimizer step";
      opt_->step();
      opt_->zero_grad();
      sched_->step();
      ++step_;
      tokens_seen_ += tokens_per_step;

      const double dt = std::chrono::duration<double>(clock::now() - t0).count();
      elapsed_s_ += dt;
      step_time_avg = step_time_avg == 0 ? dt : 0.9 * step_time_avg + 0.1 * dt;
      const double tok_s = tokens_per_step / std::max(step_time_avg, 1e-9);
      double eta = double(o_.steps - step_) * step_time_avg;
      if (o_.time_budget > 0) eta = std::min(eta, std::max(0.0, o_.time_budget - since_start()));
      r.history.push_back({step_, loss_v, lr});
      if (prof && ++profiled_steps == o_.profile) finish_profile();
      if (progress) progress->update(step_, loss_v, tok_s, eta);

      MetricsRow row{step_, loss_v, std::nullopt, lr, tok_s, elapsed_s_};
      const bool eval_now = step_ % o_.eval_interval == 0 || step_ == o_.steps;
      if (eval_now) {
        phase = "evaluation";
        const double train_l = estimate_loss("train");
        const double val_l = estimate_loss("val");
        row.val_loss = val_l;
        r.last_val_loss = val_l;
        char buf[160];
        std::snprintf(buf, sizeof buf, "step %lld: train loss %.4f, val loss %.4f, lr %.3g",
                      static_cast<long long>(step_), train_l, val_l, lr);
        say(buf);
        if (o_.sample_length > 0 && world().is_main()) {
          // a fixed first character; sample_gen keeps the training streams untouched
          std::vector<int64_t> prompt = {corpus_.split.val.front()};
          auto ids = generate_tokens(*model_, prompt, o_.sample_length, o_.temperature, o_.top_k, sample_gen,
                                     o_.top_p);
          say("sample: " + corpus_.tokenizer->decode(ids));
        }
      }
      if (metrics) metrics->append(row);
      if (eval_now) {
        phase = "checkpoint save";
        if (world().is_main()) {  // the ranks hold the same state: rank 0 writes it
          r.last_checkpoint = save();
          say("saved checkpoint " + r.last_checkpoint->string());
        }
        last_saved = step_;
      }
    }
  } catch (const std::bad_alloc&) {
    if (progress) progress->finish();
    xgrad::fail("train", "out of memory (std::bad_alloc) at step ", step_ + 1, " during the ", phase,
                " (--batch-size ", o_.batch_size, ", --context-length ", o_.model.context_length,
                "); lower --batch-size or --context-length");
  } catch (const xgrad::Error& e) {
    if (std::string(e.what()).find("out of memory") == std::string::npos) throw;
    if (progress) progress->finish();
    xgrad::fail("train", "step ", step_ + 1, ", ", phase, ": ", e.what(), " (--batch-size ", o_.batch_size,
                ", --context-length ", o_.model.context_length, "); lower --batch-size or --context-length");
  }
  finish_profile();  // a run shorter than --profile
  if (stopped_early && last_saved != step_ && !r.history.empty() && world().is_main()) {
    r.last_checkpoint = save();
    say("saved checkpoint " + r.last_checkpoint->string());
  }
  if (progress) progress->finish();
  r.step = step_;
  return r;
}

// ---------------------------------------------------------------- sampling
std::vector<int64_t> generate_tokens(nn::GPTModel& model, std::vector<int64_t> ids, int64_t max_new_tokens,
                                     double temperature, int64_t top_k, xgrad::Generator& gen, double top_p,
                                     bool kv_cache) {
  if (ids.empty()) xgrad::fail("generate", "the prompt is empty");
  const int64_t n = static_cast<int64_t>(ids.size());
  Tensor out = model.generate(xgrad::from_vector(ids, {1, n}), max_new_tokens,
                              {.temperature = temperature,
                               .top_k = top_k,
                               .top_p = top_p,
                               .seed = std::nullopt,
                               .use_kv_cache = kv_cache},
                              gen);
  return out.to_vector<int64_t>();
}

}  // namespace train_lm
