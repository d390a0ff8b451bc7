// tests/train/test_checkpoint_files.cpp: the checkpoint directory layout (latest pointer,
// step directories, pruning) and its crash safety, independent of any model.
#include <gtest/gtest.h>

#include "checkpoint.h"
#include "train_test_util.h"
#include "xgrad/xgrad.h"

using namespace train_lm;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

namespace {
NamedTensors model_at(double v) { return {{"w", xgrad::full({4, 4}, v)}}; }
NamedTensors state_at(double v) { return {{"optim.w.exp_avg", xgrad::full({4, 4}, v)}}; }
}  // namespace

TEST(CheckpointFiles, SaveWritesStepDirAndLatest) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  fs::path d = save_checkpoint(root, 10, model_at(1), {{"a", "b"}}, state_at(2), {{"step", "10"}});
  EXPECT_EQ(d, root / "step_00000010");
  EXPECT_EQ(slurp(root / "latest"), "step_00000010\n");
  EXPECT_TRUE(fs::exists(d / "model.safetensors"));
  EXPECT_TRUE(fs::exists(d / "train_state.safetensors"));
  auto ck = load_checkpoint_files(root);
  EXPECT_EQ(ck.dir, d);
  EXPECT_EQ(ck.model.metadata.at("a"), "b");
  EXPECT_EQ(ck.train_state.metadata.at("step"), "10");
  EXPECT_EQ(ck.model.at("w").to_vector<float>()[0], 1.0f);
  // a step directory itself is a checkpoint too
  EXPECT_EQ(load_checkpoint_files(d).dir, d);
  EXPECT_EQ(*find_checkpoint(root), d);
  EXPECT_FALSE(find_checkpoint(tmp.path).has_value());
}

TEST(CheckpointFiles, KeepsTheNewestAndPrunesTheRest) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  for (int s : {1, 2, 3, 4}) save_checkpoint(root, s * 100, model_at(s), {}, state_at(s), {}, 2);
  EXPECT_FALSE(fs::exists(root / "step_00000100"));
  EXPECT_FALSE(fs::exists(root / "step_00000200"));
  EXPECT_TRUE(fs::exists(root / "step_00000300"));
  EXPECT_TRUE(fs::exists(root / "step_00000400"));
  EXPECT_EQ(load_checkpoint_files(root).model.at("w").to_vector<float>()[0], 4.0f);
  expect_error([&] { save_checkpoint(root, 400, model_at(5), {}, state_at(5), {}); }, {"already the latest"});
}

TEST(CheckpointFiles, FailedSaveLeavesThePreviousCheckpoint) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  save_checkpoint(root, 100, model_at(1), {}, state_at(1), {});
  // the disk fills up during the next save: nothing of it may be visible
  inject_write_failure_after(50);
  EXPECT_THROW(save_checkpoint(root, 200, model_at(2), {}, state_at(2), {}), xgrad::Error);
  inject_write_failure_after(-1);
  EXPECT_EQ(slurp(root / "latest"), "step_00000100\n");
  EXPECT_FALSE(fs::exists(root / "step_00000200"));
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << e.path();
  EXPECT_EQ(load_checkpoint_files(root).model.at("w").to_vector<float>()[0], 1.0f);

  // a crash after the step directory was renamed but before `latest` moved: the stale
  // directory is ignored, and replaced when that step is saved again
  fs::create_directories(root / "step_00000200");
  spit(root / "step_00000200" / "model.safetensors", "garbage");
  EXPECT_EQ(load_checkpoint_files(root).dir, root / "step_00000100");
  save_checkpoint(root, 200, model_at(3), {}, state_at(3), {});
  EXPECT_EQ(load_checkpoint_files(root).model.at("w").to_vector<float>()[0], 3.0f);
  // leftovers of a killed save are cleaned up by the next one
  fs::create_directories(root / ".tmp-step_00000300-1");
  save_checkpoint(root, 300, model_at(4), {}, state_at(4), {});
  EXPECT_FALSE(fs::exists(root / ".tmp-step_00000300-1"));
}

TEST(CheckpointFiles, LoadErrors) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  expect_error([&] { load_checkpoint_files(root); }, {"no such directory"});
  fs::create_directories(root);
  expect_error([&] { load_checkpoint_files(root); }, {"holds no checkpoint"});
  spit(root / "latest", "../../etc\n");
  expect_error([&] { load_checkpoint_files(root); }, {"latest", "does not name a step directory"});
  spit(root / "latest", "step_00000005\n");
  expect_error([&] { load_checkpoint_files(root); }, {"points to", "step_00000005"});

  // model and train state from two different saves
  fs::path a = save_checkpoint(tmp / "a", 1, model_at(1), {}, state_at(1), {});
  fs::path b = save_checkpoint(tmp / "b", 1, model_at(1), {}, state_at(1), {});
  fs::copy_file(b / "train_state.safetensors", a / "train_state.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_checkpoint_files(a); }, {"different saves"});
  // the train state is optional for generation only
  fs::remove(a / "train_state.safetensors");
  expect_error([&] { load_checkpoint_files(a); }, {"train_state.safetensors", "no such file"});
  EXPECT_NO_THROW(load_checkpoint_files(a, /*need_train_state=*/false));
  // truncated model file
  std::string m = slurp(b / "model.safetensors");
  spit(b / "model.safetensors", m.substr(0, m.size() / 2));
  expect_error([&] { load_checkpoint_files(b); }, {"model.safetensors", "truncated"});
}

TEST(CheckpointFiles, WritableDirCheck) {
  TempDir tmp;
  EXPECT_NO_THROW(check_writable_dir(tmp / "new" / "nested"));
  EXPECT_TRUE(fs::is_directory(tmp / "new" / "nested"));
  EXPECT_TRUE(fs::is_empty(tmp / "new" / "nested"));  // the probe is gone
  spit(tmp / "file", "x");
  expect_error([&] { check_writable_dir(tmp / "file"); }, {"not a directory"});
  expect_error([&] { check_writable_dir(tmp / "file" / "sub"); }, {"cannot create"});
}
