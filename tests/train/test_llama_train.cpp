// tests/train/test_llama_train.cpp: train_lm --arch llama: the flag and its presets (sized like
// the GPT presets), a short run whose loss falls and whose checkpoint generates (with and
// without the KV cache), a resume that continues bit for bit (with --grad-accum), the arch
// taken from the checkpoint, and the memory estimate against what a Llama's step allocates.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "cli_capture.h"
#include "memory.h"
#include "options.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::load_checkpoint_files;
using train_test::RunResult;
using train_test::TempDir;

namespace {

CliParse parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"train_lm", "train"});
  ::testing::internal::CaptureStderr();
  CliParse p = parse_cli(args);
  ::testing::internal::GetCapturedStderr();
  return p;
}

// A learnable text (~5 KB), as test_trainer.cpp's.
std::string generated_text() {
  const char* words[] = {"the whale", "a ship", "the sea", "old ahab", "the crew"};
  const char* verbs[] = {" sails to ", " looks at ", " hunts ", " dreams of "};
  std::string s;
  for (int i = 0; i < 200; ++i)
    s += std::string(words[i % 5]) + verbs[(i / 5) % 4] + words[(i * 3 + 1) % 5] + ".\n";
  return s;
}

TrainOptions llama_options(const fs::path& dir) {
  TrainOptions o;
  o.arch = "llama";
  o.model = {
      .vocab_size = 0, .context_length = 16, .emb_dim = 32, .n_heads = 4, .n_layers = 2, .drop_rate = 0.0};
  o.batch_size = 8;
  o.steps = 12;
  o.warmup = 2;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.eval_interval = 6;
  o.eval_iters = 2;
  o.sample_length = 0;
  o.seed = 99;
  o.checkpoint_dir = dir.string();
  return o;
}

std::vector<double> losses(const TrainResult& r) {
  std::vector<double> v;
  for (const auto& s : r.history) v.push_back(s.train_loss);
  return v;
}

}  // namespace

TEST(LlamaFlags, ArchAndPresets) {
  CliParse p = parse({"--arch", "llama"});  // the default size: llama-small
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.arch, "llama");
  EXPECT_EQ(p.train.preset, "llama-small");
  EXPECT_EQ(p.train.model.emb_dim, 128);
  EXPECT_EQ(p.train.model.drop_rate, 0.0);
  EXPECT_EQ(p.train.batch_size, 16);
  p = parse({"--preset", "llama-tiny", "--emb-dim", "32"});  // the preset names the arch
  ASSERT_EQ(p.kind, CliParse::kTrain);
  EXPECT_EQ(p.train.arch, "llama");
  EXPECT_EQ(p.train.model.context_length, 64);
  const xgrad::nn::LlamaConfig c = llama_config(p.train);
  EXPECT_EQ(c.emb_dim, 32);
  EXPECT_EQ(c.hidden_dim, 96);
  EXPECT_EQ(c.n_kv_groups, 2);  // 4 query heads share 2 key/value heads
  EXPECT_FALSE(c.rope_freq);
  EXPECT_EQ(c.rope_base, 10000);
  EXPECT_EQ(parse({"--preset", "tiny"}).train.arch, "gpt");
  for (auto bad : std::vector<std::vector<std::string>>{{"--arch", "mamba"},
                                                        {"--arch", "gpt", "--preset", "llama-tiny"},
                                                        {"--arch", "llama", "--preset", "tiny"},
                                                        {"--arch", "llama", "--drop-rate", "0.1"},
                                                        {"--arch", "llama", "--qkv-bias"},
                                                        {"--arch", "llama", "--activation-checkpointing"},
                                                        {"--preset", "llama-huge"}})
    EXPECT_EQ(parse(bad).kind, CliParse::kExit) << ::testing::PrintToString(bad);
}

// Each llama preset has about as many parameters as its GPT preset (Moby-Dick's 89
// characters), and nn::num_parameters counts what LlamaModel builds.
TEST(LlamaFlags, PresetsAreSizedLikeTheGptPresets) {
  for (const char* size : {"tiny", "small", "medium"}) {
    TrainOptions gpt = parse({"--preset", size}).train,
                 llama = parse({"--preset", std::string("llama-") + size}).train;
    gpt.model.vocab_size = llama.model.vocab_size = 89;
    const double g = double(xgrad::nn::GPTModel(gpt.model).num_parameters());
    const double l = double(xgrad::nn::num_parameters(llama_config(llama)));
    EXPECT_NEAR(l / g, 1.0, 0.05) << size << ": gpt " << g << ", llama " << l;
    if (std::string(size) == "tiny")
      EXPECT_EQ(double(xgrad::nn::LlamaModel(llama_config(llama)).num_parameters()), l);
  }
}

TEST(LlamaTrainer, ShortRunLearnsAndItsCheckpointGenerates) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  TrainOptions o = llama_options(tmp / "ck");
  o.steps = 60;
  o.eval_interval = 60;
  Trainer t(o, make_corpus(generated_text(), 16, "generated"));
  EXPECT_NE(dynamic_cast<xgrad::nn::LlamaModel*>(&t.module()), nullptr);
  const double before = t.estimate_loss("val");
  const TrainResult r = t.train();
  ASSERT_TRUE(r.last_val_loss.has_value());
  EXPECT_LT(*r.last_val_loss, 0.6 * before) << before << " -> " << *r.last_val_loss;

  const auto ck = load_checkpoint_files(o.checkpoint_dir);
  const auto& meta = ck.at(kModelFile).metadata;
  EXPECT_EQ(meta.at("arch"), "llama");
  EXPECT_EQ(nlohmann::json::parse(meta.at("config")).at("hidden_dim"), 96);
  EXPECT_TRUE(ck.at(kModelFile).contains("trf_blocks.1.ff.fc3.weight"));
  EXPECT_TRUE(ck.at(kTrainStateFile).contains("state.0.exp_avg"));
  spdlog::set_level(spdlog::level::info);
  for (const char* temperature : {"0", "1"}) {  // past the context of 16: the window slides
    RunResult cached =
        train_test::run_captured({"generate", "--checkpoint", o.checkpoint_dir, "--prompt", "the ",
                                  "--max-new-tokens", "30", "--temperature", temperature});
    RunResult recomputed =
        train_test::run_captured({"generate", "--checkpoint", o.checkpoint_dir, "--prompt", "the ",
                                  "--max-new-tokens", "30", "--temperature", temperature, "--no-kv-cache"});
    ASSERT_EQ(cached.code, 0) << cached.out;
    EXPECT_EQ(cached.out.rfind("the ", 0), 0u) << cached.out;
    EXPECT_EQ(cached.out, recomputed.out) << temperature;
  }
}

TEST(LlamaTrainer, ResumeIsBitExact) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  auto run = [&](const std::string& dir, std::vector<int64_t> stops) {
    TrainOptions o = llama_options(tmp / dir);
    o.grad_accum = 2;
    std::vector<double> all;
    for (int64_t stop : stops) {
      Trainer t(o, make_corpus(generated_text(), 16, "generated"));
      if (fs::exists(tmp / dir)) t.load(load_checkpoint_files(o.checkpoint_dir));
      for (double l : losses(t.train(nullptr, nullptr, stop))) all.push_back(l);
    }
    return all;
  };
  const std::vector<double> straight = run("straight", {-1});
  ASSERT_EQ(straight.size(), 12u);
  EXPECT_EQ(run("split", {5, -1}), straight);  // bit for bit
  const auto a = load_checkpoint_files(tmp / "straight"), b = load_checkpoint_files(tmp / "split");
  for (const char* file : {kModelFile, kTrainStateFile}) {
    ASSERT_EQ(a.at(file).tensors.size(), b.at(file).tensors.size());
    for (std::size_t i = 0; i < a.at(file).tensors.size(); ++i)
      EXPECT_EQ(a.at(file).tensors[i].second.to_vector<float>(),
                b.at(file).tensors[i].second.to_vector<float>())
          << a.at(file).tensors[i].first;
  }
  spdlog::set_level(spdlog::level::info);
}

TEST(LlamaTrainer, ResumeTakesTheArchFromTheCheckpoint) {
  TempDir tmp;
  train_test::spit(tmp / "corpus.txt", train_test::ishmael_corpus());
  const std::string ck = (tmp / "ck").string();
  RunResult r = train_test::run_captured(train_test::tiny_train_args(
      tmp / "corpus.txt", ck,
      {"--arch", "llama", "--steps", "4", "--eval-interval", "2", "--batch-size", "4"}));
  ASSERT_EQ(r.code, 0) << r.out;
  r = train_test::run_captured(
      {"train", "--checkpoint-dir", ck, "--resume", "--steps", "6", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  r = train_test::run_captured(
      {"train", "--checkpoint-dir", ck, "--resume", "--steps", "8", "--no-progress", "--arch", "gpt"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("arch llama in the checkpoint vs gpt now"), std::string::npos) << r.out;
}

// As test_memory.cpp's test for the GPT: the estimate bounds what a step really allocates, in
// float32 and under --dtype bf16.
TEST(LlamaTrainer, MemoryEstimateBoundsTheMeasuredPeak) {
  spdlog::set_level(spdlog::level::warn);
  for (auto [ctx, emb, heads, layers, batch, bf16] :
       std::vector<std::array<int64_t, 6>>{{16, 32, 4, 1, 8, 0},
                                           {64, 64, 4, 2, 16, 0},
                                           {128, 32, 2, 2, 4, 0},
                                           {32, 128, 4, 3, 8, 0},
                                           {64, 64, 4, 2, 16, 1},
                                           {32, 128, 4, 3, 8, 1}}) {
    TempDir tmp;
    TrainOptions o = llama_options(tmp / "ck");
    o.model = {.context_length = ctx, .emb_dim = emb, .n_heads = heads, .n_layers = layers, .drop_rate = 0.0};
    o.batch_size = batch;
    o.dtype = bf16 ? "bf16" : "fp32";
    Corpus corpus = make_corpus(generated_text() + generated_text(), ctx, "generated");
    o.model.vocab_size = corpus.tokenizer->vocab_size();
    const MemoryEstimate e = estimate_training_memory(llama_config(o), batch, bf16 != 0);
    xgrad::empty_cache();
    const int64_t base = xgrad::memory_stats().current_bytes;
    xgrad::reset_peak_memory_stats();
    double measured = 0;
    {
      Trainer t(o, std::move(corpus));
      EXPECT_EQ(e.parameters, double(t.module().num_parameters()));
      t.train(nullptr, nullptr, /*stop_after=*/2);
      measured = double(xgrad::memory_stats().peak_bytes - base);
    }
    EXPECT_GE(e.total_bytes(), measured)
        << ctx << " " << emb << " " << layers << " " << batch << " " << o.dtype;
    EXPECT_LE(e.total_bytes(), 2.0 * measured)
        << ctx << " " << emb << " " << layers << " " << batch << " " << o.dtype;
    std::cout << "llama " << o.dtype << " ctx " << ctx << " emb " << emb << " layers " << layers << " batch "
              << batch << ": estimate " << format_bytes(e.total_bytes()) << ", measured "
              << format_bytes(measured) << "\n";
  }
  spdlog::set_level(spdlog::level::info);
}
