// tests/train/test_memory.cpp: the memory estimate of examples/train_lm/memory.h against what
// xgrad really allocates (memory_stats' peak over two training steps, float32 and --dtype bf16), the
// parameter count against the model's, the allocator's cache at a checkpoint save, and the
// refusal message of a configuration that cannot fit.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "memory.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::expect_error;
using train_test::TempDir;

namespace {

std::string generated_text() {
  const char* words[] = {"the whale", "a ship", "the sea", "old ahab", "the crew"};
  const char* verbs[] = {" sails to ", " looks at ", " hunts ", " dreams of "};
  std::string s;
  for (int i = 0; i < 400; ++i)
    s += std::string(words[i % 5]) + verbs[(i / 5) % 4] + words[(i * 3 + 1) % 5] + ".\n";
  return s;
}

struct Case {
  int64_t ctx, emb, heads, layers, batch;
  bool activation_checkpointing = false;
  bool bf16 = false;  // --dtype bf16: the forward pass under autocast
};

}  // namespace

TEST(Memory, EstimateBoundsTheMeasuredPeak) {
  spdlog::set_level(spdlog::level::warn);
  for (const Case& c : {Case{16, 32, 2, 1, 8}, Case{64, 64, 4, 2, 16}, Case{128, 32, 4, 2, 4},
                        Case{32, 128, 2, 3, 8}, Case{64, 64, 4, 4, 16, true}, Case{128, 32, 4, 4, 4, true},
                        Case{16, 32, 2, 1, 8, false, true}, Case{64, 64, 4, 2, 16, false, true},
                        Case{128, 32, 4, 2, 4, false, true}, Case{32, 128, 2, 3, 8, false, true}}) {
    TempDir tmp;
    TrainOptions o;
    o.model = {.vocab_size = 0,
               .context_length = c.ctx,
               .emb_dim = c.emb,
               .n_heads = c.heads,
               .n_layers = c.layers,
               .drop_rate = 0.1,
               .qkv_bias = false,
               .activation_checkpointing = c.activation_checkpointing};
    o.batch_size = c.batch;
    o.dtype = c.bf16 ? "bf16" : "fp32";
    o.steps = 10;
    o.warmup = 1;
    o.eval_interval = 100;
    o.eval_iters = 1;
    o.sample_length = 0;
    o.checkpoint_dir = (tmp / "ck").string();
    Corpus corpus = make_corpus(generated_text(), c.ctx, "generated");
    GPTConfig full = o.model;
    full.vocab_size = corpus.tokenizer->vocab_size();
    const MemoryEstimate e = estimate_training_memory(full, c.batch, c.bf16);

    xgrad::empty_cache();
    const int64_t base = xgrad::memory_stats().current_bytes;
    xgrad::reset_peak_memory_stats();
    double measured = 0;
    {
      Trainer t(o, std::move(corpus));
      EXPECT_EQ(e.parameters, double(t.model().num_parameters()));
      t.train(nullptr, nullptr, /*stop_after=*/2);
      measured = double(xgrad::memory_stats().peak_bytes - base);
    }
    const std::string what = "ctx " + std::to_string(c.ctx) + " emb " + std::to_string(c.emb) + " layers " +
                             std::to_string(c.layers) + " batch " + std::to_string(c.batch) +
                             (c.activation_checkpointing ? " checkpointed" : "") + (c.bf16 ? " bf16" : "") +
                             ": estimate " + format_bytes(e.total_bytes()) + ", measured " +
                             format_bytes(measured);
    EXPECT_GE(e.total_bytes(), measured) << what;
    EXPECT_LE(e.total_bytes(), 2.0 * measured) << what;
    std::cout << what << "\n";
  }
  spdlog::set_level(spdlog::level::info);
}

TEST(Memory, ACheckpointSaveStartsFromAnEmptyAllocatorCache) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  TrainOptions o;
  o.model = {.vocab_size = 0, .context_length = 64, .emb_dim = 64, .n_heads = 4, .n_layers = 2};
  o.batch_size = 16;
  o.steps = 2;
  o.warmup = 1;
  o.eval_interval = 2;  // evaluated and saved after the last step, and nothing after that
  o.eval_iters = 1;
  o.sample_length = 0;
  o.checkpoint_dir = (tmp / "ck").string();
  Trainer t(o, make_corpus(generated_text(), o.model.context_length, "generated"));
  ASSERT_TRUE(t.train().last_checkpoint.has_value());
  // The cache holds the blocks the save freed (its copies of AdamW's moments, 8 bytes a
  // parameter, in size classes up to a quarter larger, and the steps' 0-d tensors) and none
  // of the steps' activation blocks, which are several times larger here.
  const double copies = 8.0 * double(t.model().num_parameters());
  EXPECT_LE(double(xgrad::cached_bytes()), 1.25 * copies + 65536);
  spdlog::set_level(spdlog::level::info);
}

TEST(Memory, RefusalNamesTheFlagsAndTheFigure) {
  TrainOptions o;
  o.model = {.vocab_size = 30,
             .context_length = 128,
             .emb_dim = 128,
             .n_heads = 4,
             .n_layers = 4,
             .drop_rate = 0.1,
             .qkv_bias = false};
  o.batch_size = 10000000000LL;
  const MemoryEstimate e = estimate_training_memory(o.model, o.batch_size);
  EXPECT_GT(e.total_bytes(), 1e16);  // no overflow: ~ 10^10 x 128 tokens x 128 x 100 floats
  auto problem = memory_problem(o.model, o.batch_size, e, 8.0 * (1 << 30));
  ASSERT_TRUE(problem);
  for (const char* part :
       {"needs about", "PiB", "8.0 GiB is available", "--batch-size 10000000000", "--context-length 128"})
    EXPECT_NE(problem->find(part), std::string::npos) << *problem << " lacks " << part;
  EXPECT_FALSE(memory_problem(o.model, o.batch_size, e, std::nullopt));  // unknown: not refused
  o.batch_size = 1;
  EXPECT_FALSE(memory_problem(o.model, 1, estimate_training_memory(o.model, 1), 8.0 * (1 << 30)));
  // a model too wide for its state: the message names the model's flags instead
  o.model.emb_dim = 1 << 20;
  o.model.n_heads = 1;
  problem = memory_problem(o.model, 1, estimate_training_memory(o.model, 1), 8.0 * (1 << 30));
  ASSERT_TRUE(problem);
  for (const char* part : {"--emb-dim 1048576", "--n-layers 4"})
    EXPECT_NE(problem->find(part), std::string::npos) << *problem << " lacks " << part;
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * (1 << 30)), "3.0 GiB");
}

TEST(Memory, AvailableMemoryIsKnownHere) {
  auto a = available_memory_bytes();
  ASSERT_TRUE(a.has_value());  // Linux: /proc/meminfo
  EXPECT_GT(*a, 0);
  setenv("XGRAD_MEMORY_LIMIT", "123456789", 1);
  EXPECT_EQ(available_memory_bytes(), 123456789.0);
  unsetenv("XGRAD_MEMORY_LIMIT");
}
