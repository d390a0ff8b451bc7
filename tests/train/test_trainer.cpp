// tests/train/test_trainer.cpp: the training loop end to end on a small generated text:
// the loss falls, checkpoints round-trip, a resumed run reproduces an uninterrupted one step
// for step, mismatching or broken checkpoints are refused, a NaN loss stops without saving,
// and a checkpoint written by PyTorch loads and gives torch's logits.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "core/fixture_reader.h"
#include "train.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::expect_error;
using train_test::load_checkpoint_files;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;
using xgrad::Tensor;

namespace {

// A learnable text: a few sentences repeated with small variations (~6 KB).
std::string generated_text() {
  const char* words[] = {"the whale", "a ship", "the sea", "old ahab", "the crew"};
  const char* verbs[] = {" sails to ", " looks at ", " hunts ", " dreams of "};
  std::string s;
  for (int i = 0; i < 240; ++i)
    s += std::string(words[i % 5]) + verbs[(i / 5) % 4] + words[(i * 3 + 1) % 5] + ".\n";
  return s;
}

TrainOptions tiny_options(const fs::path& dir) {
  TrainOptions o;
  o.model.context_length = 16;
  o.model.emb_dim = 32;
  o.model.n_heads = 2;
  o.model.n_layers = 1;
  o.model.drop_rate = 0.1;
  o.batch_size = 8;
  o.steps = 20;
  o.warmup = 2;
  o.lr = 3e-3;
  o.min_lr = 3e-4;
  o.eval_interval = 10;
  o.eval_iters = 2;
  o.sample_length = 0;
  o.seed = 1234;
  o.checkpoint_dir = dir.string();
  o.data = "generated";
  return o;
}

std::vector<double> losses(const TrainResult& r) {
  std::vector<double> v;
  for (const auto& s : r.history) v.push_back(s.train_loss);
  return v;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { spdlog::set_level(spdlog::level::warn); }
  void TearDown() override { spdlog::set_level(spdlog::level::info); }
  Corpus corpus(int64_t ctx = 16) { return make_corpus(generated_text(), ctx, "generated"); }
};

}  // namespace

namespace {

// Resumes the fixture's step_00000004 (copied into tmp/ck) to step 6 with train_lm (its saved
// options): an old checkpoint has no loader position, so the run starts a fresh epoch of
// batches from --seed, and the model the fixture's run saved at step 6 (other batches) is not
// the one to compare with. What must carry over is the state: Trainer::load puts every moment
// of the file on its parameter (OldCheckpointsResume, Version3CheckpointsResume) and sets the
// schedule's lr (EverySettingIsWrittenOnceAndResumedFromThere); here the run continues and saves
// in the current format, and every weight moved by at most a few lr = 1e-3 from the step-4 model.
void expect_fixture_resumes(const fs::path& fixture, const TempDir& tmp) {
  const auto start = xgrad::load(fixture / "step_00000004" / kModelFile);
  ASSERT_EQ(run_cli({"train_lm", "train", "--resume", "--checkpoint-dir", (tmp / "ck").string(), "--data",
                     (tmp / "corpus.txt").string(), "--no-progress"}),
            0);
  const auto got = load_checkpoint_files(tmp / "ck");
  EXPECT_EQ(got.dir.filename(), "step_00000006");
  EXPECT_EQ(got.at(kTrainStateFile).metadata.at("format_version"), "5");  // saved in the current format
  ASSERT_EQ(got.at(kModelFile).tensors.size(), start.tensors.size());
  double moved = 0;
  for (std::size_t i = 0; i < start.tensors.size(); ++i) {
    const auto a = got.at(kModelFile).tensors[i].second.to_vector<float>();
    const auto b = start.tensors[i].second.to_vector<float>();
    ASSERT_EQ(a.size(), b.size()) << start.tensors[i].first;
    for (std::size_t j = 0; j < a.size(); ++j) {
      EXPECT_LE(std::abs(a[j] - b[j]), 1e-2) << start.tensors[i].first << "[" << j << "]";
      moved = std::max(moved, double(std::abs(a[j] - b[j])));
    }
  }
  EXPECT_GT(moved, 0.0);  // two steps were taken
}

// A fixture's checkpoint at step 4 as tmp/ck, and its corpus as tmp/corpus.txt.
void copy_fixture(const fs::path& fixture, const TempDir& tmp) {
  fs::create_directories(tmp / "ck");
  fs::copy(fixture / "step_00000004", tmp / "ck" / "step_00000004");
  spit(tmp / "ck" / "latest", "step_00000004\n");
  spit(tmp / "corpus.txt", train_test::ishmael_corpus());
}

}  // namespace

TEST_F(TrainerTest, SmokeLossFalls) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp / "ck");
  o.steps = 100;
  o.warmup = 10;
  o.eval_interval = 100;
  o.model.drop_rate = 0.0;
  Trainer t(o, corpus());
  EXPECT_EQ(t.options().model.vocab_size, t.tokenizer().vocab_size());
  const double before = t.estimate_loss("val");
  EXPECT_NEAR(before, std::log(double(t.tokenizer().vocab_size())), 0.6);  // ~uniform at init
  TrainResult r = t.train();
  ASSERT_EQ(r.history.size(), 100u);
  EXPECT_FALSE(r.nan_stop);
  ASSERT_TRUE(r.last_val_loss.has_value());
  EXPECT_LT(*r.last_val_loss, 0.5 * before) << "val loss " << before << " -> " << *r.last_val_loss;
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i)
    first += r.history[i].train_loss / 10, last += r.history[90 + i].train_loss / 10;
  EXPECT_LT(last, 0.5 * first);
  // the schedule: warmup, then cosine down to min_lr
  EXPECT_NEAR(r.history[0].lr, o.lr * 1 / 11, 1e-12);
  EXPECT_NEAR(r.history[10].lr, o.lr, 1e-12);
  EXPECT_GT(r.history[50].lr, o.min_lr);
  EXPECT_LT(r.history[99].lr, o.min_lr * 1.01);
  ASSERT_TRUE(r.last_checkpoint.has_value());
  EXPECT_EQ(r.last_checkpoint->filename(), "step_00000100");

  // sampling after training reproduces the corpus's words
  xgrad::Generator g(5);
  std::string text = t.tokenizer().decode(
      generate_tokens(t.model(), t.tokenizer().encode("the "), 40, {.temperature = 0.0}, g));
  EXPECT_EQ(text.rfind("the ", 0), 0u);
  EXPECT_EQ(text.size(), 44u);
}

TEST_F(TrainerTest, CheckpointRoundTrip) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp / "ck");
  Trainer a(o, corpus());
  a.train(nullptr, nullptr, /*stop_after=*/5);
  ASSERT_EQ(a.step(), 5);
  auto ck = load_checkpoint_files(o.checkpoint_dir);
  EXPECT_EQ(ck.dir.filename(), "step_00000005");
  EXPECT_TRUE(ck.at(kModelFile).checksum_verified);
  EXPECT_TRUE(ck.at(kModelFile).contains("tok_emb.weight"));
  EXPECT_TRUE(ck.at(kModelFile).contains("trf_blocks.0.att.W_query.weight"));
  // the optimizer's own layout (xgrad::save(opt.state_dict(), path)): state.<flat index>.<key>
  EXPECT_TRUE(ck.at(kTrainStateFile).contains("state.0.exp_avg"));
  EXPECT_EQ(ck.at(kTrainStateFile).metadata.at("optimizer"), "AdamW");
  EXPECT_EQ(ck.at(kTrainStateFile).metadata.at("format_version"), "5");
  EXPECT_EQ(ck.at(kTrainStateFile).metadata.at("step"), "5");

  Trainer b(o, corpus());  // fresh weights: differ from a's
  b.load(ck);
  EXPECT_EQ(b.step(), 5);
  auto sa = a.model().state_dict(), sb = b.model().state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [name, t] : sa) EXPECT_EQ(t.to_vector<double>(), sb.at(name).to_vector<double>()) << name;
  const auto oa = a.optimizer().state_dict(), ob = b.optimizer().state_dict();
  ASSERT_EQ(oa.state.size(), ob.state.size());
  for (const auto& [index, entries] : oa.state)
    for (const auto& [key, t] : entries)
      EXPECT_EQ(t.to_vector<double>(), ob.state.at(index).at(key).to_vector<double>()) << index << "." << key;
  ASSERT_EQ(oa.param_groups.size(), ob.param_groups.size());
  for (std::size_t g = 0; g < oa.param_groups.size(); ++g)
    EXPECT_EQ(oa.param_groups[g].options, ob.param_groups[g].options);
  EXPECT_EQ(a.optimizer().lr(0), b.optimizer().lr(0));
  EXPECT_DOUBLE_EQ(a.estimate_loss("val"), b.estimate_loss("val"));
}

TEST_F(TrainerTest, EverySettingIsWrittenOnceAndResumedFromThere) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp / "ck");
  Trainer a(o, corpus());
  a.train(nullptr, nullptr, /*stop_after=*/4);
  auto ck = load_checkpoint_files(o.checkpoint_dir);
  const auto& state = ck.at(kTrainStateFile).metadata;
  // the settings are train_options' alone: no optimizer option, schedule, config or vocabulary
  // copy in the train state (config and vocabulary are model.safetensors')
  for (const auto& [key, value] : state) {
    const bool group_option = key.rfind("param_groups.", 0) == 0 && key.find(".params") == std::string::npos;
    EXPECT_FALSE(group_option) << key << " = " << value;
  }
  for (const char* key : {"scheduler", "config", "vocab"}) EXPECT_FALSE(state.count(key)) << key;
  EXPECT_EQ(nlohmann::json::parse(state.at("train_options")).at("lr"), o.lr);
  EXPECT_TRUE(ck.at(kModelFile).metadata.count("config"));

  // resumed with other settings: the optimizer takes them, lr where the new schedule is at step 4
  TrainOptions changed = o;
  changed.lr = 2 * o.lr;
  changed.weight_decay = 0.5;
  changed.beta2 = 0.95;
  Trainer b(changed, corpus());
  b.load(ck);
  xgrad::optim::AdamW probe({xgrad::zeros({1})}, {.lr = changed.lr});
  xgrad::optim::WarmupCosineLR schedule(
      probe, {.warmup_iters = changed.warmup, .lr_decay_iters = changed.steps, .min_lr = changed.min_lr});
  for (std::size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(b.optimizer().lr(g), schedule.lr_at(4, changed.lr)) << g;
    EXPECT_EQ(b.optimizer().options(g).betas.second, 0.95) << g;
  }
  EXPECT_EQ(b.optimizer().options(0).weight_decay, 0.5);  // matrices decay
  EXPECT_EQ(b.optimizer().options(1).weight_decay, 0.0);  // biases and LayerNorm weights do not
  // and the moments are the checkpoint's
  const auto oa = a.optimizer().state_dict(), ob = b.optimizer().state_dict();
  for (const auto& [index, entries] : oa.state)
    for (const auto& [key, t] : entries)
      EXPECT_EQ(t.to_vector<double>(), ob.state.at(index).at(key).to_vector<double>()) << index << "." << key;
}

TEST_F(TrainerTest, ResumeReproducesAnUninterruptedRun) {
  TempDir tmp;
  // straight: 20 steps (dropout on, so the default generator's state matters too)
  TrainOptions o1 = tiny_options(tmp / "straight");
  Trainer straight(o1, corpus());
  std::vector<double> all = losses(straight.train());
  ASSERT_EQ(all.size(), 20u);

  // 7 steps (a checkpoint is saved on stopping), then a new process-like Trainer resumes
  TrainOptions o2 = tiny_options(tmp / "split");
  std::vector<double> first, second;
  {
    Trainer t(o2, corpus());
    first = losses(t.train(nullptr, nullptr, /*stop_after=*/7));
  }
  xgrad::manual_seed(999);  // disturb the global generator: resume must restore it
  {
    Trainer t(o2, corpus());
    t.load(load_checkpoint_files(o2.checkpoint_dir));
    EXPECT_EQ(t.step(), 7);
    second = losses(t.train());
  }
  ASSERT_EQ(first.size() + second.size(), all.size());
  first.insert(first.end(), second.begin(), second.end());
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(first[i], all[i]) << "step " << i + 1;  // bit for bit
}

// The loader's position (epoch, batch, the generator state its epoch began from) is saved:
// a resume inside an epoch, or in the epoch after, takes the batches the uninterrupted run
// takes. A short corpus makes epochs of 43 batches; 3 micro-batches a step cross one at step 15.
TEST_F(TrainerTest, ResumeAcrossEpochsReproducesAnUninterruptedRun) {
  TempDir tmp;
  const std::string text = generated_text().substr(0, 400);  // 360 training tokens: 344 windows
  auto run = [&](const std::string& dir, std::vector<int64_t> stops) {
    TrainOptions o = tiny_options(tmp / dir);
    o.grad_accum = 3;
    std::vector<double> all;
    for (int64_t stop : stops) {
      Trainer t(o, make_corpus(text, 16, "short"));
      if (fs::exists(tmp / dir)) t.load(load_checkpoint_files(o.checkpoint_dir));
      for (double l : losses(t.train(nullptr, nullptr, stop))) all.push_back(l);
    }
    return all;
  };
  const std::vector<double> straight = run("straight", {-1});
  ASSERT_EQ(straight.size(), 20u);
  EXPECT_EQ(run("split", {5, 15, -1}), straight);  // bit for bit
  const auto ck = load_checkpoint_files(tmp / "split" / "step_00000015");
  EXPECT_EQ(ck.at(kTrainStateFile).metadata.at("data.epoch"), "1");  // 45 batches = 43 + 2
  EXPECT_EQ(ck.at(kTrainStateFile).metadata.at("data.batch"), "2");

  // an epoch needs one full batch
  TrainOptions big = tiny_options(tmp / "big");
  big.batch_size = 345;
  expect_error([&] { Trainer(big, make_corpus(text, 16, "short")); },
               {"344 windows", "--context-length + 1 = 17", "--batch-size 345"});
}

TEST_F(TrainerTest, LoadRefusesMismatches) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp / "ck");
  {
    Trainer t(o, corpus());
    t.train(nullptr, nullptr, 2);
  }
  auto ck = load_checkpoint_files(o.checkpoint_dir);

  TrainOptions wide = o;
  wide.model.emb_dim = 64;
  Trainer w(wide, corpus());
  expect_error([&] { w.load(ck); }, {"different model config", "emb_dim 32 in the checkpoint vs 64 now"});

  // a corpus with one more character: the vocabulary differs (listed) before vocab_size does
  Corpus other = make_corpus(generated_text() + "Z", 16, "other.txt");
  Trainer v(o, std::move(other));
  expect_error([&] { v.load(ck); },
               {"different vocabulary", "only in the checkpoint: none", "only in the corpus: 'Z'"});

  // same vocabulary size, different characters
  std::string swapped = generated_text();
  for (char& c : swapped)
    if (c == 'w') c = 'W';
  Trainer s(o, make_corpus(swapped, 16, "swapped.txt"));
  expect_error([&] { s.load(ck); },
               {"different vocabulary", "only in the checkpoint: 'w'", "only in the corpus: 'W'"});

  // a model tensor with the wrong shape (checksums are fine: the file is "valid")
  auto bad = ck;
  for (auto& [name, t] : bad.at(kModelFile).tensors)
    if (name == "out_head.weight") t = xgrad::zeros({3, 3});
  Trainer m(o, corpus());
  auto before = m.model().state_dict().clone();
  expect_error([&] { m.load(bad); }, {"does not fit the model", "out_head.weight"});
  for (const auto& [name, t] : before)  // nothing changed
    EXPECT_EQ(t.to_vector<double>(), m.model().state_dict().at(name).to_vector<double>()) << name;

  // optimizer moments of the wrong shape: the model is restored too
  auto bad2 = ck;
  for (auto& [name, t] : bad2.at(kTrainStateFile).tensors)
    if (name == "state.0.exp_avg") t = xgrad::zeros({2});
  expect_error([&] { m.load(bad2); }, {"optimizer state does not fit"});
  for (const auto& [name, t] : before)
    EXPECT_EQ(t.to_vector<double>(), m.model().state_dict().at(name).to_vector<double>()) << name;
  EXPECT_EQ(m.step(), 0);

  auto bad3 = ck;
  bad3.at(kTrainStateFile).metadata["format_version"] = "99";
  expect_error([&] { m.load(bad3); }, {"format_version 99"});
  auto bad4 = ck;
  bad4.at(kTrainStateFile).metadata.erase("rng.default");
  expect_error([&] { m.load(bad4); }, {"rng.default"});
}

TEST_F(TrainerTest, OldCheckpointsResume) {
  // tests/fixtures/train_lm_v2 (README.md there): a format_version 2 checkpoint at step 4,
  // AdamW's state by parameter name, and the model the same run had at step 6
  TempDir tmp;
  const fs::path fixture = XGRAD_FIXTURES_DIR "/train_lm_v2";
  copy_fixture(fixture, tmp);
  auto ck = load_checkpoint_files(tmp / "ck");
  ASSERT_EQ(ck.at(kTrainStateFile).metadata.at("format_version"), "2");
  EXPECT_TRUE(ck.at(kTrainStateFile).contains("optim.out_head.weight.exp_avg"));

  // a name this model does not have is refused
  auto renamed = ck;
  for (auto& [name, t] : renamed.at(kTrainStateFile).tensors)
    if (name == "optim.out_head.weight.exp_avg") name = "optim.head.weight.exp_avg";
  TrainOptions o = tiny_options(tmp / "unused");
  o.model.context_length = 8;
  o.model.emb_dim = 16;
  Trainer t(o, make_corpus(train_test::ishmael_corpus(), 8, "corpus.txt"));
  expect_error([&] { t.load(renamed); }, {"'head.weight'", "does not have"});

  // every moment lands on the parameter the file names, bit for bit
  t.load(ck);
  const auto& opt = t.optimizer();
  const auto named = t.model().named_parameters();
  std::size_t placed = 0;
  for (const auto& [name, p] : named)
    for (std::size_t g = 0; g < opt.param_groups().size(); ++g)
      for (std::size_t i = 0; i < opt.param_groups()[g].params.size(); ++i) {
        if (opt.param_groups()[g].params[i].impl() != p.impl()) continue;
        const auto& file = ck.at(kTrainStateFile);
        EXPECT_EQ(opt.state(g, i).exp_avg.to_vector<float>(),
                  file.at("optim." + name + ".exp_avg").to_vector<float>())
            << name;
        EXPECT_EQ(opt.state(g, i).exp_avg_sq.to_vector<float>(),
                  file.at("optim." + name + ".exp_avg_sq").to_vector<float>())
            << name;
        ++placed;
      }
  EXPECT_EQ(placed, named.size());

  expect_fixture_resumes(fixture, tmp);
}

TEST_F(TrainerTest, Version3CheckpointsResume) {
  // tests/fixtures/train_lm_v3 (README.md there): the optimizer's settings in its param groups
  TempDir tmp;
  const fs::path fixture = XGRAD_FIXTURES_DIR "/train_lm_v3";
  copy_fixture(fixture, tmp);
  const auto ck = load_checkpoint_files(tmp / "ck");
  ASSERT_EQ(ck.at(kTrainStateFile).metadata.at("format_version"), "3");
  TrainOptions o = tiny_options(tmp / "unused");
  o.model.context_length = 8;
  o.model.emb_dim = 16;
  Trainer t(o, make_corpus(train_test::ishmael_corpus(), 8, "corpus.txt"));
  t.load(ck);  // every moment the file holds, bit for bit, on the flat index it names
  const auto want = xgrad::optim::OptimizerState::from(ck.at(kTrainStateFile), "v3");
  const auto got = t.optimizer().state_dict();
  ASSERT_EQ(got.state.size(), want.state.size());
  for (const auto& [index, entries] : want.state)
    for (const auto& [key, v] : entries)
      EXPECT_EQ(got.state.at(index).at(key).to_vector<double>(), v.to_vector<double>())
          << index << "." << key;
  expect_fixture_resumes(fixture, tmp);
}

TEST_F(TrainerTest, NanLossStopsWithoutSaving) {
  TempDir tmp;
  TrainOptions o = tiny_options(tmp / "ck");
  Trainer t(o, corpus());
  t.train(nullptr, nullptr, 3);  // a good checkpoint at step 3
  {
    xgrad::NoGradGuard g;
    t.model().out_head->weight.fill_(NAN);
  }
  TrainResult r = t.train();
  EXPECT_TRUE(r.nan_stop);
  EXPECT_TRUE(r.history.empty());
  EXPECT_EQ(t.step(), 3);
  EXPECT_EQ(load_checkpoint_files(o.checkpoint_dir).dir.filename(), "step_00000003");
}

TEST_F(TrainerTest, CorpusErrors) {
  TempDir tmp;
  expect_error([&] { read_corpus((tmp / "none.txt").string()); }, {"none.txt", "not found", "get_corpus.sh"});
  spit(tmp / "empty.txt", "");
  expect_error([&] { read_corpus((tmp / "empty.txt").string()); }, {"empty.txt", "is empty"});
  spit(tmp / "bad.txt", "Call me \xFFshmael");
  expect_error([&] { read_corpus((tmp / "bad.txt").string()); }, {"bad.txt", "byte offset 8"});
  expect_error([&] { make_corpus(std::string(100, 'a'), 16, "short.txt"); },
               {"short.txt", "100 characters", "validation split", "--context-length"});
  EXPECT_NO_THROW(make_corpus(std::string(170, 'a'), 16, "ok.txt"));  // 17 val tokens = one window
}

TEST_F(TrainerTest, TorchCheckpointGivesTorchLogits) {
  // tests/fixtures/gen_safetensors.py saved a torch GPTModel's state_dict with train_lm metadata
  auto ck = load_checkpoint_files(XGRAD_FIXTURES_DIR "/gpt_tiny", /*need_train_state=*/false);
  EXPECT_FALSE(ck.at(kModelFile).checksum_verified);
  GPTConfig cfg = gpt_config_from_json(nlohmann::json::parse(ck.at(kModelFile).metadata.at("config")));
  auto tok = CharTokenizer::from_json(ck.at(kModelFile).metadata.at("vocab"));
  EXPECT_EQ(tok.vocab_size(), cfg.vocab_size);
  EXPECT_EQ(tok.decode(tok.encode("Ishmaelé")), "Ishmaelé");
  xgrad::nn::GPTModel model(cfg);
  xgrad::nn::StateDict sd;
  for (const auto& [name, t] : ck.at(kModelFile).tensors) sd.insert(name, t);
  model.load_state_dict(sd);
  model.eval();
  auto fx = xgrad::testing::read_fixture(XGRAD_FIXTURES_DIR "/gpt_tiny.txt");
  Tensor logits = model(fx.get("in_idx"));
  xgrad::testing::expect_close(logits, fx.get("logits"), 1e-5, 1e-4, "gpt_tiny logits");
}
