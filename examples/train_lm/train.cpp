// examples/train_lm/train.cpp: see train.h. In train.py's order: data, the model and
// optimizer, save and resume, eval, and the loop (Trainer::train). The commands that wire
// them to the command line are in commands.cpp.
#include "train.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <new>

#include "world.h"
#include "xgrad/autograd.h"
#include "xgrad/error.h"
#include "xgrad/nn/clip_grad.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/text/utf8.h"

namespace train_lm {

using xgrad::Tensor;
namespace io = xgrad::io;
namespace nn = xgrad::nn;
namespace optim = xgrad::optim;

namespace {

constexpr const char* kFormat = "xgrad-train_lm";

// Seeds derived from --seed for the independent random streams.
uint64_t batch_seed(uint64_t seed) { return seed + 1; }
uint64_t eval_seed(uint64_t seed, bool val) { return seed + (val ? 3 : 2); }
uint64_t sample_seed(uint64_t seed) { return seed + 4; }

// "characters" for the char tokenizer, "tokens" for the others
const char* unit(const Tokenizer& t) { return t.kind() == "char" ? "characters" : "tokens"; }

// What differs between two vocabularies: the characters only one has, or the kinds.
std::string vocab_diff(const Tokenizer& saved_tok, const Tokenizer& now_tok) {
  const auto* saved = dynamic_cast<const CharTokenizer*>(&saved_tok);
  const auto* now = dynamic_cast<const CharTokenizer*>(&now_tok);
  if (!saved || !now)
    return saved_tok.kind() == now_tok.kind()
               ? "the " + saved_tok.kind() + " vocabularies (merges) differ"
               : "the checkpoint's tokenizer is " + saved_tok.kind() + ", this run's is " + now_tok.kind();
  auto only_in = [](const CharTokenizer& a, const CharTokenizer& b) {
    std::vector<char32_t> v;
    std::set_difference(a.vocab().begin(), a.vocab().end(), b.vocab().begin(), b.vocab().end(),
                        std::back_inserter(v));
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 10; ++i) {
      s += i ? " '" : "'";
      xgrad::text::append_utf8(s, v[i]);
      s += "'";
    }
    if (v.size() > 10) s += " ...";
    return s.empty() ? std::string("none") : s;
  };
  return "only in the checkpoint: " + only_in(*saved, *now) +
         "; only in the corpus: " + only_in(*now, *saved);
}

// Checkpoints of format_version 1 and 2 saved AdamW's state by parameter name: tensors
// "optim.<param>.<key>" and metadata "optimizer" = {"type", "param_groups": [{"options",
// "params": [names]}]}. The flat index of a name is its place in the Trainer's groups
// (matrices first, then the rest, each in named_parameters() order).
optim::OptimizerState legacy_optimizer_state(const io::SafetensorsFile& state, const nn::Module& model,
                                             const std::string& file) {
  std::map<std::string, int64_t> index_of;
  const auto named = model.named_parameters();
  for (bool matrices : {true, false})
    for (const auto& [name, p] : named)
      if ((p.dim() >= 2) == matrices) index_of.emplace(name, static_cast<int64_t>(index_of.size()));
  auto index = [&](const std::string& name, const char* what) {
    auto it = index_of.find(name);
    if (it == index_of.end())
      xgrad::fail("checkpoint", file, ": ", what, name, "', which this model does not have");
    return it->second;
  };
  optim::OptimizerState os;
  try {
    auto it = state.metadata.find("optimizer");
    if (it == state.metadata.end()) xgrad::fail("checkpoint", file, ": metadata has no 'optimizer'");
    const nlohmann::json oj = nlohmann::json::parse(it->second);
    os.type = oj.at("type").get<std::string>();
    for (const auto& g : oj.at("param_groups")) {
      optim::ParamGroupState pg;
      pg.options = g.at("options").get<std::map<std::string, double>>();
      for (const auto& name : g.at("params"))
        pg.params.push_back(index(name.get<std::string>(), "the optimizer state names parameter '"));
      os.param_groups.push_back(std::move(pg));
    }
  } catch (const nlohmann::json::exception& e) {
    xgrad::fail("checkpoint", file, ": metadata 'optimizer' is malformed (", e.what(), ")");
  }
  for (const auto& [name, t] : state.tensors) {
    const auto dot = name.rfind('.');
    if (name.rfind("optim.", 0) != 0 || dot == std::string::npos || dot <= 6)
      xgrad::fail("checkpoint", file, ": unexpected tensor '", name, "'");
    os.state[index(name.substr(6, dot - 6), "tensor for parameter '")][name.substr(dot + 1)] = t;
  }
  return os;
}

}  // namespace

// ---------------------------------------------------------------- data
std::string read_corpus(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    xgrad::fail("corpus", path,
                " not found; run scripts/get_corpus.sh to fetch Moby-Dick into data/moby_dick.txt, or pass "
                "--data FILE");
  if (!fs::is_regular_file(path, ec)) xgrad::fail("corpus", path, " is not a regular file");
  std::string text = io::read_file(path);
  if (text.empty()) xgrad::fail("corpus", path, " is empty");
  xgrad::text::decode_utf8(text, path);  // throws with the byte offset of the first invalid sequence
  return text;
}

std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source) {
  using namespace xgrad::text;
  if (spec.kind == "char") return std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  if (spec.kind == "gpt2") {
    const fs::path dir = spec.gpt2_vocab_dir;
    for (const char* f : {"vocab.bpe", "encoder.json"})
      if (!fs::exists(dir / f))
        xgrad::fail(
            "tokenizer", (dir / f).string(),
            " not found; run scripts/get_gpt2_vocab.sh to fetch GPT-2's vocabulary into data/gpt2/, or "
            "pass --gpt2-vocab DIR");
    return std::make_shared<GPT2Tokenizer>(
        GPT2Tokenizer::from_files((dir / "vocab.bpe").string(), (dir / "encoder.json").string()));
  }
  if (spec.kind == "bpe")
    return std::make_shared<BPETokenizer>(spec.bpe_file.empty() ? BPETokenizer::train(text, spec.bpe_merges)
                                                                : BPETokenizer::load(spec.bpe_file));
  xgrad::fail("tokenizer", "unknown tokenizer '", spec.kind, "' (expected char, gpt2 or bpe)");
}

TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction) {
  if (!(train_fraction > 0.0 && train_fraction < 1.0))
    xgrad::fail("split_tokens", "train_fraction must be in (0, 1), got ", train_fraction);
  const auto n = static_cast<std::ptrdiff_t>(static_cast<double>(ids.size()) * train_fraction);
  return {{ids.begin(), ids.begin() + n}, {ids.begin() + n, ids.end()}};
}

Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer) {
  Corpus c;
  c.tokenizer = tokenizer ? std::move(tokenizer)
                          : std::make_shared<CharTokenizer>(CharTokenizer::from_text(text, source));
  const std::vector<int64_t> ids = c.tokenizer->encode(text);
  c.split = split_tokens(ids, 0.9);
  const char* units = unit(*c.tokenizer);
  const int64_t window = context_length + 1;
  const auto n_train = static_cast<int64_t>(c.split.train.size()),
             n_val = static_cast<int64_t>(c.split.val.size());
  if (n_train < window || n_val < window)
    xgrad::fail("corpus", source, " has ", ids.size(), " ", units, ": the ",
                n_val < window ? "validation" : "training", " split (", n_val < window ? n_val : n_train, " ",
                units, ") is shorter than one window of context_length + 1 = ", window,
                "; use a longer corpus (about 10 x ", window, " = ", 10 * window, " ", units,
                " at least) or a smaller --context-length");
  return c;
}

BatchSampler::BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size, int64_t context_length,
                           uint64_t seed, std::string split)
    : tokens_(tokens), batch_size_(batch_size), context_length_(context_length), gen_(seed) {
  if (batch_size <= 0) xgrad::fail("BatchSampler", "batch_size must be positive, got ", batch_size);
  if (context_length <= 0)
    xgrad::fail("BatchSampler", "context_length must be positive, got ", context_length);
  if (static_cast<int64_t>(tokens->size()) < context_length + 1)
    xgrad::fail("BatchSampler", "the ", split, " split has ", tokens->size(),
                " tokens, fewer than one window of context_length + 1 = ", context_length + 1);
}

Batch BatchSampler::next() {
  const int64_t B = batch_size_, T = context_length_;
  // reference: nanoGPT train.py get_batch: ix = torch.randint(len(data) - block_size, (B,))
  std::vector<int64_t> starts(static_cast<std::size_t>(B));
  gen_.random_int(starts.data(), B, 0, static_cast<int64_t>(tokens_->size()) - T);
  Batch b{xgrad::empty({B, T}, xgrad::kInt64), xgrad::empty({B, T}, xgrad::kInt64)};
  int64_t* x = b.x.data_ptr<int64_t>();  // (B, T)
  int64_t* y = b.y.data_ptr<int64_t>();  // (B, T)
  for (int64_t i = 0; i < B; ++i) {
    const int64_t* w = tokens_->data() + starts[static_cast<std::size_t>(i)];  // T + 1 tokens
    std::copy(w, w + T, x + i * T);
    std::copy(w + 1, w + T + 1, y + i * T);
  }
  return b;
}

// ---------------------------------------------------------------- the model and optimizer
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
  for (const auto& [name, p] : model_->named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
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
  opt_ = std::make_unique<optim::AdamW>(std::move(groups));
  sched_ = std::make_unique<optim::WarmupCosineLR>(
      *opt_, optim::WarmupCosineLROptions{
                 .warmup_iters = o_.warmup, .lr_decay_iters = o_.steps, .min_lr = o_.min_lr});
}

// ---------------------------------------------------------------- save and resume
fs::path Trainer::save() {
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.3f", elapsed_s_);
  const std::string config = to_json(o_.model).dump(), vocab = corpus_.tokenizer->to_json();
  const nn::StateDict model = model_->state_dict();
  io::Metadata model_meta = {{"format", "pt"},
                             {"producer", kFormat},
                             {"config", config},
                             {"vocab", vocab},
                             {"step", std::to_string(step_)}};
  // the optimizer's state_dict in its own layout (xgrad::save(opt.state_dict(), path)), plus
  // what resuming needs
  io::SafetensorsFile state = opt_->state_dict().to_safetensors(
      {{"format", kFormat},
       {"format_version", std::to_string(kCheckpointFormatVersion)},
       {"config", config},
       {"train_options", train_options_to_json(o_).dump()},
       {"vocab", vocab},
       {"step", std::to_string(step_)},
       {"tokens_seen", std::to_string(tokens_seen_)},
       {"elapsed_s", elapsed},
       {"rng.default", io::base64_encode(xgrad::default_generator().get_state())},
       {"rng.batches", io::base64_encode(train_batches_.generator().get_state())},
       {"scheduler", nlohmann::json{{"type", "WarmupCosineLR"},
                                    {"last_epoch", sched_->last_epoch()},
                                    {"warmup_iters", o_.warmup},
                                    {"lr_decay_iters", o_.steps},
                                    {"min_lr", o_.min_lr}}
                         .dump()}});
  return io::save_checkpoint(
      o_.checkpoint_dir, step_,
      {{kModelFile, io::NamedTensors(model.begin(), model.end()), std::move(model_meta)},
       {kTrainStateFile, std::move(state.tensors), std::move(state.metadata)}},
      o_.keep_checkpoints);
}

void Trainer::load(const io::Checkpoint& ck) {
  const io::SafetensorsFile& state = ck.at(kTrainStateFile);
  const io::SafetensorsFile& model_file = ck.at(kModelFile);
  const std::string file = (ck.dir / kTrainStateFile).string();
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = state.metadata.find(key);
    if (it == state.metadata.end())
      xgrad::fail("checkpoint", file, ": metadata has no '", key, "' (not a train_lm checkpoint?)");
    return it->second;
  };
  auto meta_json = [&](const std::string& key) {
    nlohmann::json j = nlohmann::json::parse(meta(key), nullptr, false);
    if (j.is_discarded()) xgrad::fail("checkpoint", file, ": metadata '", key, "' is not valid JSON");
    return j;
  };
  auto meta_int = [&](const std::string& key) {
    const std::string& text = meta(key);
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0)
      xgrad::fail("checkpoint", file, ": metadata '", key, "' is not a non-negative integer: '", text, "'");
    return v;
  };

  // 1. everything is parsed and checked before the model or optimizer changes
  if (meta("format") != kFormat)
    xgrad::fail("checkpoint", file, ": format is '", meta("format"), "', expected '", kFormat, "'");
  const std::string& version = meta("format_version");
  if (version != "1" && version != "2" && version != std::to_string(kCheckpointFormatVersion))
    xgrad::fail("checkpoint", file, ": format_version ", version,
                " is not supported (this build reads versions 1 to ", kCheckpointFormatVersion, ")");
  if (version != "1")  // from version 2 on, files are written with header checksums: both must have them
    for (const char* name : {kModelFile, kTrainStateFile})
      if (!ck.at(name).header_verified)
        xgrad::fail("checkpoint", (ck.dir / name).string(), ": format_version ", version, " but no ",
                    io::kHeaderChecksumKey, " (a corrupted checksum key?)");
  GPTConfig saved_cfg;
  try {
    saved_cfg = gpt_config_from_json(meta_json("config"));
  } catch (const ConfigError& e) {
    xgrad::fail("checkpoint", file, ": ", e.what());
  }
  // the vocabulary first: other characters also change vocab_size, and they are what the user
  // needs to see
  std::unique_ptr<Tokenizer> saved_vocab = xgrad::text::tokenizer_from_json(meta("vocab"));
  if (saved_vocab->to_json() != corpus_.tokenizer->to_json())
    xgrad::fail("checkpoint", file, " has a different vocabulary (", saved_vocab->vocab_size(), " ",
                unit(*saved_vocab), ") than the corpus ", o_.data, " (", corpus_.tokenizer->vocab_size(), " ",
                unit(*corpus_.tokenizer), "): ", vocab_diff(*saved_vocab, *corpus_.tokenizer));
  if (!(saved_cfg == o_.model))
    xgrad::fail("checkpoint", file,
                " was trained with a different model config: ", describe_config_diff(saved_cfg, o_.model));
  const int64_t step = meta_int("step"), tokens_seen = meta_int("tokens_seen");
  double elapsed = -1;
  try {
    std::size_t used = 0;
    elapsed = std::stod(meta("elapsed_s"), &used);
    if (used != meta("elapsed_s").size()) elapsed = -1;
  } catch (const std::exception&) {
  }
  if (!std::isfinite(elapsed) || elapsed < 0)
    xgrad::fail("checkpoint", file, ": metadata 'elapsed_s' is not a finite number >= 0");
  const auto rng_default = io::base64_decode(meta("rng.default"), "rng.default");
  const auto rng_batches = io::base64_decode(meta("rng.batches"), "rng.batches");
  for (const auto* s : {&rng_default, &rng_batches})
    if (s->size() != xgrad::Generator::kStateSize)
      xgrad::fail("checkpoint", file, ": an RNG state has ", s->size(), " bytes, expected ",
                  xgrad::Generator::kStateSize);

  const optim::OptimizerState os = version == "3" ? optim::OptimizerState::from(state, file)
                                                  : legacy_optimizer_state(state, *model_, file);

  // 2. apply: the model (all or nothing), then the optimizer (all or nothing); if the
  // optimizer refuses, the model gets its old values back.
  const nn::StateDict before = model_->state_dict().clone();
  try {
    model_->load_state_dict(nn::StateDict::from(model_file.tensors));
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
  train_batches_.generator().set_state(rng_batches);
}

// ---------------------------------------------------------------- eval
double Trainer::estimate_loss(const std::string& split) {
  const bool val = split == "val";
  BatchSampler batches(val ? &corpus_.split.val : &corpus_.split.train, o_.batch_size,
                       o_.model.context_length, eval_seed(o_.seed, val), split);
  const bool was_training = model_->is_training();
  model_->eval();
  xgrad::NoGradGuard no_grad;
  double total = 0;
  for (int64_t i = 0; i < o_.eval_iters; ++i) {
    const Batch b = batches.next();  // the same global batch on every rank: each takes its rows
    total += xgrad::cross_entropy_last_dim((*model_)(shard_rows(b.x)), shard_rows(b.y)).item();
  }
  model_->train(was_training);
  return mean_over_world(total / static_cast<double>(o_.eval_iters));
}

// ---------------------------------------------------------------- the loop
TrainResult Trainer::train(Progress* progress, MetricsLog* metrics, int64_t stop_after) {
  using clock = std::chrono::steady_clock;
  TrainResult r;
  const auto start = clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  auto say = [&](const std::string& s) {
    if (progress) progress->message(s);
    else spdlog::info("{}", s);
  };
  auto save_and_say = [&] {
    r.last_checkpoint = save();
    say("saved checkpoint " + r.last_checkpoint->string());
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
  const char* phase = "forward pass";  // for an out-of-memory message that says where
  try {
    while (step_ < o_.steps) {
      if (stop_after >= 0 && step_ >= stop_after) {
        stopped_early = true;
        break;
      }
      if (any_over_world(o_.time_budget > 0 &&
                         since_start() >= o_.time_budget)) {  // one decision for all ranks
        stopped_early = r.time_budget_hit = true;
        say("time budget of " + format_duration(o_.time_budget) + " spent at step " + std::to_string(step_));
        break;
      }
      const auto t0 = clock::now();
      const double lr = opt_->lr(0);

      // forward and backward over grad_accum micro-batches: each mean loss is scaled by
      // 1/grad_accum, so the summed gradients are those of the mean loss over all of them (as
      // nanoGPT). Under mpirun each rank takes its rows of the global batch and DDP's backward
      // averages the gradients over the ranks.
      double loss_v = 0;
      for (int64_t micro = 0; micro < o_.grad_accum; ++micro) {
        const Batch b = train_batches_.next();
        phase = "forward pass";
        Tensor logits = (*forward_)(shard_rows(b.x));  // (B / ranks, T, vocab)
        Tensor loss = xgrad::cross_entropy_last_dim(logits, shard_rows(b.y));
        const double micro_loss = mean_over_world(loss.item());  // the same on every rank
        if (!std::isfinite(micro_loss)) {
          loss_v = micro_loss;
          break;
        }
        loss_v += micro_loss;
        phase = "backward pass";
        if (o_.grad_accum > 1) loss = loss / static_cast<double>(o_.grad_accum);
        loss.backward();
      }
      if (!std::isfinite(loss_v)) {
        opt_->zero_grad();
        r.nan_stop = true;
        say("loss is " + std::to_string(loss_v) + " at step " + std::to_string(step_ + 1) +
            "; stopping without saving (lower --lr or raise --grad-clip?)");
        break;
      }
      loss_v /= static_cast<double>(o_.grad_accum);

      // clip, step, zero, schedule
      if (o_.grad_clip > 0) nn::utils::clip_grad_norm_(params, o_.grad_clip);
      phase = "optimizer step";
      opt_->step();
      opt_->zero_grad();
      sched_->step();
      ++step_;
      tokens_seen_ += tokens_per_step;

      // timing and logging
      const double dt = std::chrono::duration<double>(clock::now() - t0).count();
      elapsed_s_ += dt;
      step_time_avg = step_time_avg == 0 ? dt : 0.9 * step_time_avg + 0.1 * dt;
      const double tok_s = tokens_per_step / std::max(step_time_avg, 1e-9);
      double eta = double(o_.steps - step_) * step_time_avg;
      if (o_.time_budget > 0) eta = std::min(eta, std::max(0.0, o_.time_budget - since_start()));
      r.history.push_back({step_, loss_v, lr});
      if (prof && ++profiled_steps == o_.profile) finish_profile();
      if (progress) progress->update(step_, loss_v, tok_s, eta);

      // eval, sample and save every eval_interval steps (only rank 0 samples and writes)
      MetricsRow row{step_, loss_v, std::nullopt, lr, tok_s, elapsed_s_};
      const bool eval_now = step_ % o_.eval_interval == 0 || step_ == o_.steps;
      if (eval_now) {
        phase = "evaluation";
        const double train_l = estimate_loss("train");
        const double val_l = estimate_loss("val");
        row.val_loss = r.last_val_loss = val_l;
        char buf[160];
        std::snprintf(buf, sizeof buf, "step %lld: train loss %.4f, val loss %.4f, lr %.3g",
                      static_cast<long long>(step_), train_l, val_l, lr);
        say(buf);
        if (o_.sample_length > 0 && world().is_main()) {
          // a fixed first token; sample_gen keeps the training streams untouched
          std::vector<int64_t> ids = generate_tokens(*model_, {corpus_.split.val.front()}, o_.sample_length,
                                                     o_.temperature, o_.top_k, sample_gen, o_.top_p);
          say("sample: " + corpus_.tokenizer->decode(ids));
        }
      }
      if (metrics) metrics->append(row);
      if (eval_now) {
        phase = "checkpoint save";
        if (world().is_main()) save_and_say();
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
  if (stopped_early && last_saved != step_ && !r.history.empty() && world().is_main()) save_and_say();
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
