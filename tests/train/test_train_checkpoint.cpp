// tests/train/test_train_checkpoint.cpp: xgrad::train's checkpoint of a run (model, AdamW,
// its schedule, the default generator, a data::BatchStream) on a small Linear model: the
// files' layout, a restore that continues bit for bit like the run that saved, the run's
// settings over the file's, the older layouts (by parameter name, without the batches'
// position), and refusals that change nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "error_message.h"
#include "xgrad/data.h"
#include "xgrad/nn/linear.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/random.h"
#include "xgrad/train/checkpoint.h"

namespace xgrad::train {
namespace {

namespace fs = std::filesystem;
using xgrad::testing::expect_error;

const Format kFormat{"test-trainer", 3, 2};

// 10 inputs of 4, the same in every run (the data is not part of a checkpoint).
Tensor inputs() {
  Generator g(0);
  return randn({10, 4}, &g);
}

// A model, AdamW with nanoGPT's two groups (the weight decays, the bias does not), a
// warmup-cosine schedule (`lr` is the peak) and batches of 4 of the inputs, shuffled by
// a stream seeded with `seed` (2 batches a pass).
struct TinyRun {
  std::shared_ptr<nn::Linear> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::WarmupCosineLR> sched;
  data::BatchStream batches;
  explicit TinyRun(uint64_t seed, double lr = 1e-2, double weight_decay = 0.1)
      : batches(std::make_shared<data::TensorDataset>(std::vector<Tensor>{inputs()}),
                {.batch_size = 4, .shuffle = true, .drop_last = true}, seed) {
    manual_seed(seed);
    model = std::make_shared<nn::Linear>(4, 3);
    opt = std::make_unique<optim::AdamW>(
        std::vector<optim::AdamW::ParamGroup>{{{model->weight}}, {{model->bias}, {.weight_decay = 0.0}}},
        optim::AdamWOptions{.lr = lr, .weight_decay = weight_decay});
    sched = std::make_unique<optim::WarmupCosineLR>(
        *opt, optim::WarmupCosineLROptions{.warmup_iters = 2, .lr_decay_iters = 20, .min_lr = 1e-3});
  }
  Run run() { return {*model, *opt, *sched, &batches}; }
  // One step on the next batch, times noise from the default generator (as dropout would
  // draw): the loss.
  double step() {
    const Tensor x = batches.next().at(0) * randn({4, 4});
    Tensor loss = (*model)(x).pow(2.0).mean();
    loss.backward();
    opt->step();
    opt->zero_grad();
    sched->step();
    return loss.item();
  }
};

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / ("xgrad_train_ck_" + std::to_string(::getpid()) + "_" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

io::Checkpoint load(const fs::path& root) { return io::load_checkpoint(root, {kModelFile, kTrainStateFile}); }

TEST(TrainCheckpoint, RestoredRunContinuesBitForBit) {
  TempDir tmp;
  TinyRun a(1);
  for (int i = 0; i < 3; ++i) a.step();
  save_checkpoint(tmp.path, 3, a.run(), kFormat, {{"config", "{}"}}, {{"epoch", "1"}});
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) want.push_back(a.step());

  const io::Checkpoint ck = load(tmp.path);
  EXPECT_EQ(ck.dir.filename(), "step_00000003");
  const io::Metadata& model_meta = ck.at(kModelFile).metadata;
  EXPECT_EQ(model_meta.at("format"), "pt");
  EXPECT_EQ(model_meta.at("step"), "3");
  EXPECT_EQ(model_meta.at("config"), "{}");
  const io::Metadata& meta = ck.at(kTrainStateFile).metadata;
  EXPECT_EQ(meta.at("format"), "test-trainer");
  EXPECT_EQ(meta.at("format_version"), "3");
  EXPECT_EQ(meta.at("epoch"), "1");
  EXPECT_EQ(meta.at("data.epoch"), "1");  // 3 batches: the second pass has begun
  EXPECT_EQ(meta.at("data.batch"), "1");
  EXPECT_EQ(meta.at("optimizer"), "AdamW");
  EXPECT_FALSE(meta.count("param_groups.0.lr")) << "the options are the run's";
  EXPECT_TRUE(ck.at(kTrainStateFile).contains("state.1.exp_avg"));

  TinyRun b(2);  // other weights, no moments, the generator elsewhere
  const Resume r = read_checkpoint(ck, b.run(), kFormat);
  EXPECT_EQ(r.version, 3);
  EXPECT_EQ(r.step, 3);
  restore(r, b.run());
  EXPECT_EQ(b.sched->last_epoch(), 3);
  EXPECT_EQ(b.opt->lr(0), a.sched->lr_at(3, 1e-2));
  std::vector<double> got;
  for (int i = 0; i < 4; ++i) got.push_back(b.step());
  EXPECT_EQ(got, want);  // same weights, moments, lr, batches and noise
  EXPECT_EQ(b.model->weight.to_vector<float>(), a.model->weight.to_vector<float>());
}

TEST(TrainCheckpoint, TheRunsSettingsWinOverTheFiles) {
  TempDir tmp;
  TinyRun a(1);
  for (int i = 0; i < 5; ++i) a.step();
  save_checkpoint(tmp.path, 5, a.run(), kFormat, {}, {});
  TinyRun b(2, /*lr=*/4e-2, /*weight_decay=*/0.5);
  restore(read_checkpoint(load(tmp.path), b.run(), kFormat), b.run());
  EXPECT_EQ(b.opt->lr(0), b.sched->lr_at(5, 4e-2));
  EXPECT_EQ(b.opt->lr(1), b.sched->lr_at(5, 4e-2));
  EXPECT_EQ(b.opt->options(0).weight_decay, 0.5);
  EXPECT_EQ(b.opt->options(1).weight_decay, 0.0);
  EXPECT_EQ(b.opt->state(0, 0).exp_avg.to_vector<float>(), a.opt->state(0, 0).exp_avg.to_vector<float>());
}

TEST(TrainCheckpoint, StateByParameterNameLandsOnThatParameter) {
  TempDir tmp;
  TinyRun a(1);
  a.step();
  save_checkpoint(tmp.path, 1, a.run(), kFormat, {}, {});
  io::Checkpoint ck = load(tmp.path);
  // rewrite the moments in the older layout: "optim.<name>.<key>", no param_groups
  io::SafetensorsFile& state = ck.at(kTrainStateFile);
  const std::string names[] = {"weight", "bias"};  // flat index 0 and 1
  for (auto& [name, t] : state.tensors) name = "optim." + names[name[6] - '0'] + name.substr(7);
  for (auto it = state.metadata.begin(); it != state.metadata.end();)
    it = it->first.starts_with("param_groups") || it->first.starts_with("data.") || it->first == "rng.data"
             ? state.metadata.erase(it)
             : std::next(it);
  TinyRun b(1);
  b.batches.next();  // without a saved position the batches start again from the first pass
  restore(read_checkpoint(ck, b.run(), kFormat), b.run());
  TinyRun fresh(1);
  EXPECT_EQ(b.batches.next().at(0).to_vector<float>(), fresh.batches.next().at(0).to_vector<float>());
  for (std::size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(b.opt->state(g, 0).exp_avg.to_vector<float>(), a.opt->state(g, 0).exp_avg.to_vector<float>())
        << g;
    EXPECT_EQ(b.opt->state(g, 0).exp_avg_sq.to_vector<float>(),
              a.opt->state(g, 0).exp_avg_sq.to_vector<float>())
        << g;
  }
  state.tensors[0].first = "optim.head.exp_avg";
  expect_error([&] { read_checkpoint(ck, b.run(), kFormat); }, {"'head'", "does not have"});
}

TEST(TrainCheckpoint, RefusalsChangeNothing) {
  TempDir tmp;
  TinyRun a(1);
  a.step();
  save_checkpoint(tmp.path, 1, a.run(), kFormat, {}, {});
  const io::Checkpoint ck = load(tmp.path);
  TinyRun b(2);
  const std::vector<float> weight = b.model->weight.to_vector<float>();
  expect_error([&] { read_checkpoint(ck, b.run(), {"other", 3}); }, {"format is 'test-trainer'", "'other'"});
  expect_error(
      [&] {
        read_checkpoint(ck, b.run(), {"test-trainer", 2});
      },
      {"format_version 3 is not supported", "versions 1 to 2"});
  io::Checkpoint unchecked = ck;  // from version 2 on a header checksum is required
  unchecked.at(kModelFile).header_verified = false;
  expect_error([&] { read_checkpoint(unchecked, b.run(), kFormat); },
               {"model.safetensors", "format_version 3 but no xgrad_header_crc32"});
  unchecked.at(kTrainStateFile).metadata["format_version"] = "1";
  EXPECT_NO_THROW(read_checkpoint(unchecked, b.run(), kFormat));
  io::Checkpoint far = ck;  // a position past a pass of this stream
  far.at(kTrainStateFile).metadata["data.batch"] = "3";
  expect_error([&] { read_checkpoint(far, b.run(), kFormat); }, {"data.batch 3", "2 batches"});
  io::Checkpoint no_rng = ck;
  no_rng.at(kTrainStateFile).metadata.erase("rng.default");
  expect_error([&] { read_checkpoint(no_rng, b.run(), kFormat); },
               {"train_state.safetensors", "'rng.default'"});

  io::Checkpoint bad_model = ck;  // a model tensor of the wrong shape
  bad_model.at(kModelFile).tensors[0].second = zeros({2, 2});
  expect_error([&] { restore(read_checkpoint(bad_model, b.run(), kFormat), b.run()); },
               {"model.safetensors", "does not fit the model"});
  expect_error([&] { load_model(bad_model, *b.model); }, {"model.safetensors", "does not fit the model"});
  io::Checkpoint bad_state = ck;  // a moment of the wrong shape: the model gets its values back
  for (auto& [name, t] : bad_state.at(kTrainStateFile).tensors)
    if (name == "state.0.exp_avg") t = zeros({7});
  expect_error([&] { restore(read_checkpoint(bad_state, b.run(), kFormat), b.run()); },
               {"optimizer state does not fit"});
  EXPECT_EQ(b.model->weight.to_vector<float>(), weight);
  EXPECT_EQ(b.sched->last_epoch(), 0);
  EXPECT_EQ(b.batches.position().batch, 0);
}

}  // namespace
}  // namespace xgrad::train
