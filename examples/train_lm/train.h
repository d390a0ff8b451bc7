// examples/train_lm/train.h: what nanoGPT's train.py and sample.py are, on xgrad's API:
// the Trainer (model, AdamW, the loop, eval, sample, save and resume) and the commands; the
// data (corpus, tokenizer, 90/10 split, get_batch) is examples/common/text_data.h. The loop is
//   logits = model(x); loss = cross_entropy_last_dim(logits, y); loss.backward();
//   clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad(); sched.step();
// Checkpoints are xgrad::io's step directories (xgrad/io/checkpoint.h) with two files, and
// every value is written once:
//   model.safetensors        the model's state_dict (torch names) + config and vocabulary
//   train_state.safetensors  AdamW's state (moments, steps, param groups) + the training
//                            options, step, RNG states (format_version 4)
// The optimizer's settings (lr and its schedule, betas, weight decay) are training options:
// a resumed run builds AdamW from them, and each group's lr is the schedule's at the saved
// step. Versions 1 to 3 (which also kept the settings in the optimizer state) still load.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory.h"
#include "options.h"
#include "progress.h"
#include "text_data.h"
#include "xgrad/io/checkpoint.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/optim/adam.h"
#include "xgrad/optim/lr_scheduler.h"
#include "xgrad/text/tokenizer.h"

namespace train_lm {

namespace fs = std::filesystem;
using namespace xgrad_examples;  // Progress, MetricsLog, plot_loss_curve, format_*
using xgrad::text::CharTokenizer;
using xgrad::text::Tokenizer;

// 4: the settings only in train_options; 3: also in the optimizer's param groups, its state in
// its own layout ("state.<i>.<key>"); 2: the state by parameter name, both files with
// xgrad_header_crc32 (required from 2 on); 1: data CRC only. All four load.
inline constexpr int kCheckpointFormatVersion = 4;
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kTrainStateFile = "train_state.safetensors";

// ---------------------------------------------------------------- checkpoints
// What model.safetensors says about the model (gpt_checkpoint.h), `hint` after a missing key.
SavedModel read_saved_model(const xgrad::io::Checkpoint& ck, const char* hint = CheckpointMeta::kHint);
// The training options train_state.safetensors keeps (train_options_to_json's JSON).
nlohmann::json read_saved_options(const xgrad::io::Checkpoint& ck);

// ---------------------------------------------------------------- training
struct TrainResult {
  int64_t step = 0;                 // optimizer steps done in all (resumed runs included)
  std::vector<MetricsRow> history;  // this invocation's steps, as the metrics file has them
  std::optional<double> last_val_loss;
  bool nan_stop = false;  // stopped because the loss was not finite
  bool time_budget_hit = false;
  std::optional<fs::path> last_checkpoint;
};

class Trainer {
 public:
  // Seeds the default generator with o.seed, builds the model (o.model.vocab_size from the
  // tokenizer), AdamW and its schedule from the options.
  Trainer(TrainOptions o, Corpus corpus);
  Trainer(const Trainer&) = delete;  // the batch sampler points into corpus_
  Trainer& operator=(const Trainer&) = delete;

  // Runs until o.steps optimizer steps are done in all, the time budget is spent, the loss is
  // not finite, or `stop_after` steps are done (then a checkpoint is saved, as on a time-out).
  TrainResult train(Progress* progress = nullptr, MetricsLog* metrics = nullptr, int64_t stop_after = -1);
  // Mean loss over eval_iters fixed batches of "train" or "val", in eval mode, no gradients.
  double estimate_loss(const std::string& split);

  fs::path save();  // a checkpoint of the current state under o.checkpoint_dir
  // Restores model, optimizer state, schedule position, RNGs and counters; throws
  // xgrad::Error (config or vocabulary mismatch, missing or mis-shaped tensors, bad
  // metadata) changing nothing.
  void load(const xgrad::io::Checkpoint& ck);

  int64_t step() const { return step_; }
  const TrainOptions& options() const { return o_; }
  const Tokenizer& tokenizer() const { return *corpus_.tokenizer; }
  xgrad::nn::GPTModel& model() { return *model_; }
  xgrad::optim::AdamW& optimizer() { return *opt_; }

 private:
  TrainOptions o_;
  Corpus corpus_;
  std::shared_ptr<xgrad::nn::GPTModel> model_;
  std::shared_ptr<xgrad::nn::Module> forward_;  // model_, or DistributedDataParallel(model_)
  std::unique_ptr<xgrad::optim::AdamW> opt_;
  std::unique_ptr<xgrad::optim::WarmupCosineLR> sched_;
  BatchSampler train_batches_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  double elapsed_s_ = 0;  // training time over all invocations
};

// GPTModel::generate from `ids` (no gradients, eval mode, a KV cache unless kv_cache is
// false): max_new_tokens more ids sampled by nn::sample_token. Throws for an empty prompt or
// bad parameters.
std::vector<int64_t> generate_tokens(xgrad::nn::GPTModel& model, std::vector<int64_t> ids,
                                     int64_t max_new_tokens, const SamplingOptions& sampling,
                                     xgrad::Generator& gen, bool kv_cache = true);

// ---------------------------------------------------------------- the commands
// Exit codes as run_cli's; errors are logged, never thrown.
int run_train(TrainOptions o);
int run_generate(const GenerateOptions& o);
int run_tokenize(const TokenizeOptions& o);

}  // namespace train_lm
