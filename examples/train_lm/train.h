// examples/train_lm/train.h: what nanoGPT's train.py and sample.py are, on xgrad's API:
// the data (corpus, tokenizer, 90/10 split, get_batch), the Trainer (model, AdamW, the loop,
// eval, sample, save and resume) and the commands. The loop is
//   logits = model(x); loss = cross_entropy_last_dim(logits, y); loss.backward();
//   clip_grad_norm_(params, 1.0); opt.step(); opt.zero_grad(); sched.step();
// Checkpoints are xgrad::io's step directories (xgrad/io/checkpoint.h) with two files:
//   model.safetensors        the model's state_dict (torch names) + config and vocabulary
//   train_state.safetensors  AdamW's state_dict as xgrad::save(opt.state_dict(), path) writes
//                            it, + step, RNG states, options (format_version 3; versions 1
//                            and 2, with the state by parameter name, still load)
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memory.h"
#include "options.h"
#include "progress.h"
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

// 3: the optimizer's own layout ("state.<i>.<key>"); 2: by parameter name, both files with
// xgrad_header_crc32 (required from 2 on); 1: data CRC only. All three load.
inline constexpr int kCheckpointFormatVersion = 3;
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kTrainStateFile = "train_state.safetensors";

// ---------------------------------------------------------------- data
// The corpus as UTF-8 text: throws xgrad::Error for a missing, unreadable or empty file or
// invalid UTF-8 (with the byte offset); the message says how to fetch the default corpus.
std::string read_corpus(const std::string& path);

// The tokenizer `spec` names for `text` (named `source` in messages): xgrad::text's char,
// GPT-2 BPE (files from scripts/get_gpt2_vocab.sh) or a BPE learnt from the text.
std::shared_ptr<const Tokenizer> make_tokenizer(const TokenizerSpec& spec, std::string_view text,
                                                const std::string& source);

struct TokenSplit {
  std::vector<int64_t> train;
  std::vector<int64_t> val;
};
// The first train_fraction of the tokens train, the rest validate (nanoGPT's 90/10).
TokenSplit split_tokens(const std::vector<int64_t>& ids, double train_fraction = 0.9);

struct Corpus {
  std::shared_ptr<const Tokenizer> tokenizer;
  TokenSplit split;
};
// Tokenizes and splits `text`; throws when a split is shorter than one window of
// context_length + 1 tokens. Without a tokenizer, the CharTokenizer of `text`.
Corpus make_corpus(const std::string& text, int64_t context_length, const std::string& source,
                   std::shared_ptr<const Tokenizer> tokenizer = nullptr);

struct Batch {
  xgrad::Tensor x;  // (B, T) int64
  xgrad::Tensor y;  // (B, T) int64, x shifted left by one
};

// nanoGPT's get_batch: B random windows of T + 1 tokens, starts drawn with
// torch.randint(len(data) - T, (B,)) from the sampler's own generator (saved in checkpoints,
// so a resumed run draws the same batches).
class BatchSampler {
 public:
  BatchSampler(const std::vector<int64_t>* tokens, int64_t batch_size, int64_t context_length, uint64_t seed,
               std::string split = "train");
  Batch next();
  xgrad::Generator& generator() { return gen_; }

 private:
  const std::vector<int64_t>* tokens_;
  int64_t batch_size_, context_length_;
  xgrad::Generator gen_;
};

// ---------------------------------------------------------------- training
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
  // Seeds the default generator with o.seed, builds the model (o.model.vocab_size from the
  // tokenizer) and AdamW.
  Trainer(TrainOptions o, Corpus corpus);
  Trainer(const Trainer&) = delete;  // the batch sampler points into corpus_
  Trainer& operator=(const Trainer&) = delete;

  // Runs until o.steps optimizer steps are done in all, the time budget is spent, the loss is
  // not finite, or `stop_after` steps are done (then a checkpoint is saved, as on a time-out).
  TrainResult train(Progress* progress = nullptr, MetricsLog* metrics = nullptr, int64_t stop_after = -1);
  // Mean loss over eval_iters fixed batches of "train" or "val", in eval mode, no gradients.
  double estimate_loss(const std::string& split);

  fs::path save();  // a checkpoint of the current state under o.checkpoint_dir
  // Restores model, optimizer, scheduler, RNGs and counters; throws xgrad::Error (config or
  // vocabulary mismatch, missing or mis-shaped tensors, bad metadata) changing nothing.
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
// false): max_new_tokens more ids sampled by nn::sample_token (temperature 0 = greedy,
// top_k 0 = all, top_p 1 = all). Throws for an empty prompt or bad parameters.
std::vector<int64_t> generate_tokens(xgrad::nn::GPTModel& model, std::vector<int64_t> ids,
                                     int64_t max_new_tokens, double temperature, int64_t top_k,
                                     xgrad::Generator& gen, double top_p = 1.0, bool kv_cache = true);

// ---------------------------------------------------------------- the commands
// Exit codes as run_cli's; errors are logged, never thrown.
int run_train(TrainOptions o);
int run_generate(const GenerateOptions& o);
int run_tokenize(const TokenizeOptions& o);

// What is wrong with `mpirun -np <launcher_size>` for a global batch of `batch_size`
// (nothing: nullopt); checked before anything is written.
std::optional<std::string> launch_problem(bool with_mpi, int launcher_size, int64_t batch_size);
// Throws ConfigError naming the flags that drive the estimate when it exceeds `available`.
void check_memory_fits(const TrainOptions& o, const MemoryEstimate& e, std::optional<double> available);

}  // namespace train_lm
