// examples/train_lm/train.cpp: see train.h. In train.py's order: the model and optimizer,
// save and resume, eval, and the loop (Trainer::train). The commands that wire
// them to the command line are in commands.cpp.
#include "train.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "world.h"
#include "xgrad/autocast.h"
#include "xgrad/error.h"
#include "xgrad/nn/clip_grad.h"
#include "xgrad/ops.h"
#include "xgrad/train/loop.h"

namespace train_lm {

using xgrad::Tensor;
namespace io = xgrad::io;
namespace nn = xgrad::nn;
namespace optim = xgrad::optim;
namespace data = xgrad::data;

namespace {

// Format 5. From version 2 on both files have header checksums, from 3 on AdamW's state is in
// optim's layout (before: by parameter name), from 5 on the batches' position is kept.
const xgrad::train::Format kFormat{"xgrad-train_lm", 5, 2};

// Seeds derived from --seed for the independent random streams.
uint64_t data_seed(uint64_t seed) { return seed + 1; }
uint64_t eval_seed(uint64_t seed, bool val) { return seed + (val ? 3 : 2); }
uint64_t sample_seed(uint64_t seed) { return seed + 4; }

}  // namespace

// ---------------------------------------------------------------- the model and optimizer
Trainer::Trainer(TrainOptions o, Corpus corpus)
    : o_(std::move(o)),
      corpus_(std::move(corpus)),
      train_windows_(
          std::make_shared<xgrad::text::GPTDataset>(corpus_.split.train, o_.model.context_length, 1)),
      val_windows_(std::make_shared<xgrad::text::GPTDataset>(corpus_.split.val, o_.model.context_length, 1)),
      batches_(train_windows_, {.batch_size = o_.batch_size, .shuffle = true, .drop_last = true},
               data_seed(o_.seed)) {
  if (batches_.loader().size() == 0)
    xgrad::fail("train", "the training split has ", train_windows_->size(),
                " windows of --context-length + 1 = ", o_.model.context_length + 1,
                " tokens, fewer than one batch (--batch-size ", o_.batch_size,
                "); use a longer corpus or a smaller --batch-size");
  o_.model.vocab_size = corpus_.tokenizer->vocab_size();  // GPTModel validates the config
  xgrad::manual_seed(o_.seed);
  model_ = make_model(o_.arch, o_.model, llama_config(o_));
  model_->train();
  forward_ = data_parallel(model_);  // mpirun -np N: rank 0's weights on every rank (world.h)

  // nanoGPT's split: matrices (and embeddings) decay, biases and norm weights do not
  opt_ = std::make_unique<optim::AdamW>(
      xgrad::train::weight_decay_groups(model_->parameters()),
      optim::AdamWOptions{.lr = o_.lr, .betas = {o_.beta1, o_.beta2}, .weight_decay = o_.weight_decay});
  sched_ = std::make_unique<optim::WarmupCosineLR>(
      *opt_, optim::WarmupCosineLROptions{
                 .warmup_iters = o_.warmup, .lr_decay_iters = o_.steps, .min_lr = o_.min_lr});
}

// ---------------------------------------------------------------- save and resume
fs::path Trainer::save() {
  // The save copies the optimizer's state (AdamW's moments, 8 bytes a parameter) into blocks
  // of the parameters' sizes, which the blocks the step freed (kept by the allocator for the
  // next step, xgrad/tensor.h) cannot serve: those go back to the system first, so the copies
  // do not stack on top of them. The next step takes its blocks from the system again.
  xgrad::empty_cache();
  const bool llama = o_.arch == "llama";  // a GPT's file has no "arch"
  io::Metadata model_meta = {{"producer", kFormat.name},
                             {"config", (llama ? to_json(llama_config(o_)) : to_json(o_.model)).dump()},
                             {"vocab", corpus_.tokenizer->to_json()}};
  if (llama) model_meta["arch"] = "llama";
  return xgrad::train::save_checkpoint(o_.checkpoint_dir, step_, run(), kFormat, std::move(model_meta),
                                       {{"train_options", train_options_to_json(o_).dump()},
                                        {"tokens_seen", std::to_string(tokens_seen_)},
                                        {"elapsed_s", fmt::format("{:.3f}", elapsed_s_)}},
                                       o_.keep_checkpoints);
}

void Trainer::load(const io::Checkpoint& ck) {
  // 1. everything is parsed and checked before the model or optimizer changes
  const xgrad::train::Resume r = xgrad::train::read_checkpoint(ck, run(), kFormat);
  const CheckpointMeta meta = CheckpointMeta::of(ck, kTrainStateFile);
  // the vocabulary first: other characters also change vocab_size, and the user must see them
  const SavedModel saved = read_saved_model(CheckpointMeta::of(ck, kModelFile));
  if (saved.tokenizer->to_json() != corpus_.tokenizer->to_json())
    xgrad::fail("checkpoint", meta.file, " has a different vocabulary (", saved.tokenizer->vocab_size(), " ",
                token_unit(*saved.tokenizer), ") than the corpus ", o_.data, " (",
                corpus_.tokenizer->vocab_size(), " ", token_unit(*corpus_.tokenizer),
                "): ", vocab_diff(*saved.tokenizer, *corpus_.tokenizer));
  const std::string diff = saved.arch != o_.arch
                               ? "arch " + saved.arch + " in the checkpoint vs " + o_.arch + " now"
                           : o_.arch == "llama" ? describe_config_diff(saved.llama, llama_config(o_))
                                                : describe_config_diff(saved.config, o_.model);
  if (!diff.empty())
    xgrad::fail("checkpoint", meta.file, " was trained with a different model config: ", diff);
  const int64_t tokens_seen = meta.count("tokens_seen");
  const double elapsed = meta.seconds("elapsed_s");

  // 2. apply: model and optimizer (all or nothing), schedule, generators, batches; the counters
  xgrad::train::restore(r, run());
  step_ = r.step;
  tokens_seen_ = tokens_seen;
  elapsed_s_ = elapsed;
}

// ---------------------------------------------------------------- eval
double Trainer::estimate_loss(const std::string& split) {
  const bool val = split == "val";
  // the same global batch on every rank: each takes its rows
  return mean_over_world(xgrad::train::estimate_loss(
      *model_, val ? val_windows_ : train_windows_,
      {.batch_size = o_.batch_size, .iters = o_.eval_iters, .seed = eval_seed(o_.seed, val)},
      [&](const data::Example& b) {
        xgrad::autocast guard(xgrad::kBFloat16, o_.dtype == "bf16");  // --dtype bf16
        return xgrad::cross_entropy_last_dim((*model_)(shard_rows(b[0])), shard_rows(b[1])).item();
      }));
}

// ---------------------------------------------------------------- the loop
// Forward and backward over grad_accum micro-batches: each mean loss is scaled by 1/grad_accum,
// so the summed gradients are those of the mean loss over all of them (as nanoGPT). Under
// mpirun each rank takes its rows of the global batch and DDP's backward averages the
// gradients over the ranks. Returns the mean loss, or the first loss that is not finite.
double Trainer::forward_backward(const char*& phase) {
  double total = 0;
  for (int64_t micro = 0; micro < o_.grad_accum; ++micro) {
    const data::Example b = batches_.next();  // {x, y}: (B, T) int64, y = x shifted by one
    phase = "forward pass";
    Tensor loss;
    {
      // --dtype bf16: the forward pass and its loss under autocast (backward outside, as torch's)
      xgrad::autocast guard(xgrad::kBFloat16, o_.dtype == "bf16");
      loss = xgrad::cross_entropy_last_dim((*forward_)(shard_rows(b[0])), shard_rows(b[1]));
    }
    const double micro_loss = mean_over_world(loss.item());  // the same on every rank
    if (!std::isfinite(micro_loss)) return micro_loss;
    total += micro_loss;
    phase = "backward pass";
    (o_.grad_accum > 1 ? loss / static_cast<double>(o_.grad_accum) : loss).backward();
  }
  return total / static_cast<double>(o_.grad_accum);
}

TrainResult Trainer::train(Progress* progress, MetricsLog* metrics, int64_t stop_after) {
  xgrad::train::StepTimer timer(o_.time_budget);
  auto say = [&](const std::string& s) { progress ? progress->message(s) : spdlog::info("{}", s); };
  TrainResult r;
  auto save_and_say = [&] {
    r.last_checkpoint = save();
    say("saved checkpoint " + r.last_checkpoint->string());
  };
  const std::vector<Tensor> params = model_->parameters();
  const int64_t tokens_per_step = o_.grad_accum * o_.batch_size * o_.model.context_length;
  xgrad::Generator sample_gen(sample_seed(o_.seed));  // keeps the training streams untouched
  int64_t last_saved = -1;
  bool stopped_early = false;
  const char* phase = "forward pass";  // for an out-of-memory message that says where
  model_->train();
  // --profile N: the first N optimizer steps of this run (evaluation included when it falls in)
  StepProfile profile(o_.profile, fs::path(o_.checkpoint_dir) / "profile_trace.json", say);
  try {
    while (step_ < o_.steps && !(stopped_early = stop_after >= 0 && step_ >= stop_after)) {
      if (any_over_world(timer.budget_spent())) {  // one decision
        stopped_early = true;
        say("time budget of " + format_duration(o_.time_budget) + " spent at step " + std::to_string(step_));
        break;
      }
      timer.start();
      const double lr = opt_->lr(0);
      const double loss = forward_backward(phase);
      if (!std::isfinite(loss)) {
        opt_->zero_grad();
        r.nan_stop = true;
        say("loss is " + std::to_string(loss) + " at step " + std::to_string(step_ + 1) +
            "; stopping without saving (lower --lr or raise --grad-clip?)");
        break;
      }
      if (o_.grad_clip > 0) nn::utils::clip_grad_norm_(params, o_.grad_clip);
      phase = "optimizer step";
      opt_->step();
      opt_->zero_grad();
      sched_->step();
      ++step_;
      tokens_seen_ += tokens_per_step;

      elapsed_s_ += timer.stop();
      const double tok_s = timer.tokens_per_second(double(tokens_per_step)),
                   eta = timer.eta(o_.steps - step_);
      profile.step_done();
      if (progress) progress->update(step_, loss, tok_s, eta);

      // eval, sample and save every eval_interval steps (only rank 0 samples and writes)
      MetricsRow row{step_, loss, std::nullopt, lr, tok_s, elapsed_s_};
      const bool eval_now = step_ % o_.eval_interval == 0 || step_ == o_.steps;
      if (eval_now) {
        phase = "evaluation";
        const double train_l = estimate_loss("train");
        row.val_loss = r.last_val_loss = estimate_loss("val");
        say(fmt::format("step {}: train loss {:.4f}, val loss {:.4f}, lr {:.3g}", step_, train_l,
                        *row.val_loss, lr));
        if (o_.sample_length > 0 && world().is_main())  // from a fixed first token
          say("sample: " +
              corpus_.tokenizer->decode(generate_tokens(*model_, {corpus_.split.val.front()},
                                                        o_.sample_length, o_.sampling, sample_gen)));
      }
      r.history.push_back(row);
      if (metrics) metrics->append(row);
      if (eval_now) {
        phase = "checkpoint save";
        if (world().is_main()) save_and_say();
        last_saved = step_;
      }
    }
  } catch (const xgrad::OutOfMemory& e) {
    if (progress) progress->finish();
    xgrad::fail("train", "out of memory at step ", step_ + 1, " during the ", phase, ": ", e.what(),
                " (--batch-size ", o_.batch_size, ", --context-length ", o_.model.context_length,
                "); lower --batch-size or --context-length");
  }
  profile.finish();  // a run shorter than --profile
  if (stopped_early && last_saved != step_ && !r.history.empty() && world().is_main()) save_and_say();
  if (progress) progress->finish();
  r.step = step_;
  return r;
}

// ---------------------------------------------------------------- the model and sampling
std::shared_ptr<nn::Module> make_model(const std::string& arch, const GPTConfig& gpt,
                                       const nn::LlamaConfig& llama) {
  if (arch == "llama") return std::make_shared<nn::LlamaModel>(llama);
  return std::make_shared<nn::GPTModel>(gpt);
}

std::vector<int64_t> generate_tokens(nn::Module& model, const std::vector<int64_t>& ids,
                                     int64_t max_new_tokens, const nn::GenerateOptions& options,
                                     xgrad::Generator& gen) {
  if (ids.empty()) xgrad::fail("generate", "the prompt is empty");
  const Tensor prompt = xgrad::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  auto* gpt = dynamic_cast<nn::GPTModel*>(&model);
  return (gpt ? gpt->generate(prompt, max_new_tokens, options, gen)
              : dynamic_cast<nn::LlamaModel&>(model).generate(prompt, max_new_tokens, options, gen))
      .to_vector<int64_t>();
}

}  // namespace train_lm
