// examples/train_lm/trainer.h: the character-level GPT trainer: corpus loading, the training
// loop (AdamW, warmup + cosine lr, gradient clipping, periodic evaluation, sampling and
// checkpoints), resuming, and generation.
//
// The loop is the one of nanoGPT's train.py, written against xgrad's PyTorch-like API:
//   logits = model(x); loss = cross_entropy_last_dim(logits, y); loss.backward();
//   clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad(); sched.step();
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "config.h"
#include "progress.h"
#include "tokenizer.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/optim/adam.h"
#include "xgrad/optim/lr_scheduler.h"

namespace train_lm {

// The corpus as UTF-8 text: throws xgrad::Error for a missing, unreadable or empty file or
// invalid UTF-8 (with the byte offset); the message says how to fetch the default corpus.
std::string read_corpus(const std::string& path);

struct Corpus {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit split;  // 90% train, 10% validation
};
// Tokenizes `text` and splits it; throws when either split is shorter than one window of
// context_length + 1 tokens. Without a tokenizer, the CharTokenizer of `text`.
Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer = nullptr);

struct StepRecord {
  int64_t step;  // 1-based optimizer step
  double loss;
  double lr;
};

struct TrainResult {
  int64_t step = 0;                 // optimizer steps done in all (resumed runs included)
  std::vector<StepRecord> history;  // this invocation's steps
  std::optional<double> last_val_loss;
  bool nan_stop = false;  // stopped because the loss was not finite
  bool time_budget_hit = false;
  std::optional<fs::path> last_checkpoint;
};

class Trainer {
 public:
  // Seeds the default generator with o.seed and builds the model and optimizer;
  // o.model.vocab_size is set from the tokenizer.
  Trainer(TrainOptions o, Corpus corpus);
  Trainer(const Trainer&) = delete;  // the batch sampler points into corpus_
  Trainer& operator=(const Trainer&) = delete;

  // Restores model, optimizer, scheduler, RNGs and counters from a checkpoint; throws
  // xgrad::Error (config or vocabulary mismatch, missing/mis-shaped tensors, bad metadata)
  // before modifying anything it cannot restore completely.
  void load(const CheckpointFiles& ck);
  fs::path save();  // a checkpoint of the current state under o.checkpoint_dir

  // Runs until o.steps optimizer steps are done in all (or the time budget is spent, or
  // the loss is not finite, or `stop_after` steps are done: a checkpoint is saved then, as
  // when the time budget runs out). Progress and metrics are optional.
  TrainResult train(Progress* progress = nullptr, MetricsLog* metrics = nullptr, int64_t stop_after = -1);

  // Mean loss over eval_iters batches of a split ("train" or "val"), with fixed batches
  // (the same at every evaluation), in eval mode and without gradients.
  double estimate_loss(const std::string& split);

  // One optimizer step's gradients, accumulated into .grad: o.grad_accum micro-batches of
  // o.batch_size, each loss divided by grad_accum (so the step equals one batch grad_accum
  // times larger). Returns the mean loss, or the first non-finite micro-batch loss (then the
  // gradients are partial). `phase` names the part running, for error messages.
  double accumulate_gradients(const char*& phase);

  double lr_at(int64_t step) const;  // the schedule (step = optimizer steps done)
  int64_t step() const { return step_; }
  const TrainOptions& options() const { return o_; }
  const Tokenizer& tokenizer() const { return *corpus_.tokenizer; }
  xgrad::nn::GPTModel& model() { return *model_; }
  xgrad::optim::AdamW& optimizer() { return *opt_; }

  // The tensors and metadata a checkpoint holds (exposed for tests).
  NamedTensors optimizer_tensors() const;
  Metadata train_state_metadata() const;
  Metadata model_metadata() const;

 private:
  TrainOptions o_;
  Corpus corpus_;
  std::shared_ptr<xgrad::nn::GPTModel> model_;
  std::shared_ptr<xgrad::nn::Module> forward_;  // model_, or DistributedDataParallel(model_)
  std::unique_ptr<xgrad::optim::AdamW> opt_;
  std::unique_ptr<xgrad::optim::WarmupCosineLR> sched_;
  std::vector<std::string> opt_param_names_;  // optimizer's flat parameter order
  BatchSampler train_batches_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  double elapsed_s_ = 0;  // training time over all invocations
};

// Autoregressive sampling with GPTModel::generate (no gradients, eval mode, a KV cache unless
// kv_cache is false): appends max_new_tokens ids to `ids`, each drawn by nn::sample_token
// from softmax(logits / temperature) restricted to the top_k most likely (top_k 0 = all) and
// then to the smallest set whose probabilities reach top_p (1 = all); temperature 0 = greedy.
// Inputs longer than the context are cropped. Invalid parameters and non-finite logits throw
// xgrad::Error, as torch's samplers refuse them.
std::vector<int64_t> generate_tokens(xgrad::nn::GPTModel& model, std::vector<int64_t> ids,
                                     int64_t max_new_tokens, double temperature, int64_t top_k,
                                     xgrad::Generator& gen, double top_p = 1.0, bool kv_cache = true);

// The commands. Return the process exit code; errors are logged, never thrown.
int run_train(TrainOptions o);
int run_generate(const GenerateOptions& o);
int run_tokenize(const TokenizeOptions& o);

// Sets the BLAS thread count (0 = leave the default).
void set_threads(int threads);

}  // namespace train_lm
