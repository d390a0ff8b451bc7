// examples/train_lm/train.h: what nanoGPT's train.py and sample.py are, on xgrad's API: the
// Trainer (model, AdamW, the batches of a data::DataLoader, the loop, eval, sample, save and
// resume); the commands that run it are commands.cpp's (run_cli). The loop is
//   logits = model(x); loss = cross_entropy_last_dim(logits, y); loss.backward();
//   clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad(); sched.step();
// A checkpoint is xgrad::train's (xgrad/train/checkpoint.h): the model's state_dict with its
// config and vocabulary, and AdamW's moments with the training options, counters and the
// loader's position; README.md has the layout and what older format versions kept.
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
#include "xgrad/data/batch_stream.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/nn/llama.h"
#include "xgrad/optim/adam.h"
#include "xgrad/text/gpt_dataset.h"
#include "xgrad/train/checkpoint.h"  // and io/checkpoint.h, optim/lr_scheduler.h

namespace train_lm {

namespace fs = std::filesystem;
using namespace xgrad_examples;  // Progress, MetricsLog, plot_loss_curve, format_*
using xgrad::text::CharTokenizer;
using xgrad::text::Tokenizer;

using xgrad::train::kModelFile;
using xgrad::train::kTrainStateFile;

// The model of --arch, a GPTModel or a LlamaModel, initialised from the default generator.
std::shared_ptr<xgrad::nn::Module> make_model(const std::string& arch, const GPTConfig& gpt,
                                              const xgrad::nn::LlamaConfig& llama);

// ---------------------------------------------------------------- training
struct TrainResult {
  int64_t step = 0;                 // optimizer steps done in all (resumed runs included)
  std::vector<MetricsRow> history;  // this invocation's steps, as the metrics file has them
  std::optional<double> last_val_loss;
  bool nan_stop = false;  // stopped because the loss was not finite
  std::optional<fs::path> last_checkpoint;
};

class Trainer {
 public:
  // Seeds the default generator with o.seed, builds the model (o.model.vocab_size from the
  // tokenizer), AdamW and its schedule from the options.
  Trainer(TrainOptions o, Corpus corpus);

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
  xgrad::nn::Module& module() { return *model_; }
  xgrad::nn::GPTModel& model() { return dynamic_cast<xgrad::nn::GPTModel&>(*model_); }  // --arch gpt
  xgrad::optim::AdamW& optimizer() { return *opt_; }

 private:
  TrainOptions o_;
  Corpus corpus_;
  std::shared_ptr<xgrad::nn::Module> model_;
  std::shared_ptr<xgrad::nn::Module> forward_;  // model_, or DistributedDataParallel(model_)
  std::unique_ptr<xgrad::optim::AdamW> opt_;
  std::unique_ptr<xgrad::optim::WarmupCosineLR> sched_;
  // The training batches: every window of context_length + 1 tokens (stride 1), shuffled each
  // epoch by a generator seeded from --seed; the last, partial batch dropped.
  std::shared_ptr<xgrad::text::GPTDataset> train_windows_, val_windows_;
  xgrad::data::BatchStream batches_;
  double forward_backward(const char*& phase);  // one step's micro-batches: the mean loss
  xgrad::train::Run run() { return {*model_, *opt_, *sched_, &batches_}; }
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  double elapsed_s_ = 0;  // training time over all invocations
};

// `ids` and max_new_tokens more, by the model's generate; throws for an empty prompt.
std::vector<int64_t> generate_tokens(xgrad::nn::Module& model, const std::vector<int64_t>& ids,
                                     int64_t max_new_tokens, const xgrad::nn::GenerateOptions& options,
                                     xgrad::Generator& gen);

}  // namespace train_lm
