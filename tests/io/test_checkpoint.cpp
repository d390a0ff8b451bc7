// tests/io/test_checkpoint.cpp: xgrad::io's checkpoint directories (xgrad/io/checkpoint.h):
// the layout (latest pointer, step directories, pruning), pairing of the files of one save,
// and crash safety, independent of any model.
#include <gtest/gtest.h>

#include "train/train_test_util.h"
#include "xgrad/xgrad.h"

using namespace xgrad::io;
using train_test::expect_error;
using train_test::slurp;
using train_test::spit;
using train_test::TempDir;

namespace {
const std::vector<std::string> kFiles = {"model.safetensors", "train_state.safetensors"};

// A model file holding w = v and a train-state file holding optim.w.exp_avg = v2.
fs::path save_checkpoint(const fs::path& root, int64_t step, double v, Metadata model_meta, double v2,
                         Metadata state_meta, int keep_last = 2) {
  return xgrad::io::save_checkpoint(
      root, step,
      {{kFiles[0], {{"w", xgrad::full({4, 4}, v)}}, std::move(model_meta)},
       {kFiles[1], {{"optim.w.exp_avg", xgrad::full({4, 4}, v2)}}, std::move(state_meta)}},
      keep_last);
}
Checkpoint load_checkpoint_files(const fs::path& path, bool need_train_state = true) {
  return need_train_state ? load_checkpoint(path, kFiles) : load_checkpoint(path, {kFiles[0]}, {kFiles[1]});
}
std::optional<fs::path> find_checkpoint(const fs::path& path) {
  return xgrad::io::find_checkpoint(path, kFiles[0]);
}
float w_of(const Checkpoint& ck) { return ck.at(kFiles[0]).at("w").to_vector<float>()[0]; }
}  // namespace

TEST(Checkpoint, SaveWritesStepDirAndLatest) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  fs::path d = save_checkpoint(root, 10, 1, {{"a", "b"}}, 2, {{"step", "10"}});
  EXPECT_EQ(d, root / "step_00000010");
  EXPECT_EQ(slurp(root / "latest"), "step_00000010\n");
  EXPECT_TRUE(fs::exists(d / "model.safetensors"));
  EXPECT_TRUE(fs::exists(d / "train_state.safetensors"));
  auto ck = load_checkpoint_files(root);
  EXPECT_EQ(ck.dir, d);
  EXPECT_EQ(ck.at(kFiles[0]).metadata.at("a"), "b");
  EXPECT_EQ(ck.at(kFiles[1]).metadata.at("step"), "10");
  EXPECT_EQ(w_of(ck), 1.0f);
  // a step directory itself is a checkpoint too
  EXPECT_EQ(load_checkpoint_files(d).dir, d);
  EXPECT_EQ(*find_checkpoint(root), d);
  EXPECT_FALSE(find_checkpoint(tmp.path).has_value());
}

TEST(Checkpoint, KeepsTheNewestAndPrunesTheRest) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  for (int s : {1, 2, 3, 4}) save_checkpoint(root, s * 100, s, {}, s, {}, 2);
  EXPECT_FALSE(fs::exists(root / "step_00000100"));
  EXPECT_FALSE(fs::exists(root / "step_00000200"));
  EXPECT_TRUE(fs::exists(root / "step_00000300"));
  EXPECT_TRUE(fs::exists(root / "step_00000400"));
  EXPECT_EQ(w_of(load_checkpoint_files(root)), 4.0f);
  expect_error([&] { save_checkpoint(root, 400, 5, {}, 5, {}); }, {"already the latest"});
}

TEST(Checkpoint, FailedSaveLeavesThePreviousCheckpoint) {
  TempDir tmp;
  fs::path root = tmp / "ck";
  save_checkpoint(root, 100, 1, {}, 1, {});
  // the disk fills up during the next save: nothing of it may be visible
  inject_write_failure_after(50);
  EXPECT_THROW(save_checkpoint(root, 200, 2, {}, 2, {}), xgrad::Error);
  inject_write_failure_after(-1);
  EXPECT_EQ(slurp(root / "latest"), "step_00000100\n");
  EXPECT_FALSE(fs::exists(root / "step_00000200"));
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << e.path();
  EXPECT_EQ(w_of(load_checkpoint_files(root)), 1.0f);

  // a crash after the step directory was renamed but before `latest` moved: the stale
  // directory is ignored, and replaced when that step is saved again
  fs::create_directories(root / "step_00000200");
  spit(root / "step_00000200" / "model.safetensors", "garbage");
  EXPECT_EQ(load_checkpoint_files(root).dir, root / "step_00000100");
  save_checkpoint(root, 200, 3, {}, 3, {});
  EXPECT_EQ(w_of(load_checkpoint_files(root)), 3.0f);
  // leftovers of a killed save are cleaned up by the next one
  fs::create_directories(root / ".tmp-step_00000300-1");
  save_checkpoint(root, 300, 4, {}, 4, {});
  EXPECT_FALSE(fs::exists(root / ".tmp-step_00000300-1"));
}

TEST(Checkpoint, LoadErrors) {
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
  fs::path a = save_checkpoint(tmp / "a", 1, 1, {}, 1, {});
  fs::path b = save_checkpoint(tmp / "b", 1, 1, {}, 1, {});
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

TEST(Checkpoint, WritableDirCheck) {
  TempDir tmp;
  EXPECT_NO_THROW(check_writable_dir(tmp / "new" / "nested"));
  EXPECT_TRUE(fs::is_directory(tmp / "new" / "nested"));
  EXPECT_TRUE(fs::is_empty(tmp / "new" / "nested"));  // the probe is gone
  spit(tmp / "file", "x");
  expect_error([&] { check_writable_dir(tmp / "file"); }, {"not a directory"});
  expect_error([&] { check_writable_dir(tmp / "file" / "sub"); }, {"cannot create"});
}

TEST(Checkpoint, StepDirNames) {
  EXPECT_EQ(step_dir_name(1000), "step_00001000");
  EXPECT_EQ(step_dir_name(123456789012), "step_123456789012");
  EXPECT_EQ(parse_step_dir_name("step_00001000"), 1000);
  EXPECT_EQ(parse_step_dir_name("step_"), -1);
  EXPECT_EQ(parse_step_dir_name("step_12a"), -1);
  EXPECT_EQ(parse_step_dir_name("../etc"), -1);
  EXPECT_EQ(parse_step_dir_name("step_99999999999999999999"), -1);  // overflow
}

TEST(Checkpoint, AnyNumberOfFilesFromOneSave) {
  TempDir tmp;
  const fs::path root = tmp / "ck";
  const std::vector<std::string> files = {"a.safetensors", "b.safetensors", "c.safetensors"};
  std::vector<CheckpointFile> out;
  for (std::size_t i = 0; i < files.size(); ++i)
    out.push_back({files[i], {{"t", xgrad::full({2}, double(i))}}, {{"i", std::to_string(i)}}});
  const fs::path d = save_checkpoint(root, 7, out, /*keep_last=*/1);
  Checkpoint ck = load_checkpoint(root, files);
  ASSERT_EQ(ck.files.size(), 3u);
  const std::string id = ck.at("a.safetensors").metadata.at(kCheckpointIdKey);
  for (std::size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(ck.at(files[i]).metadata.at("i"), std::to_string(i));
    EXPECT_EQ(ck.at(files[i]).metadata.at(kCheckpointIdKey), id);  // one id per save
    EXPECT_EQ(ck.at(files[i]).at("t").to_vector<float>()[0], float(i));
  }
  EXPECT_FALSE(ck.contains("d.safetensors"));
  expect_error([&] { ck.at("d.safetensors"); }, {"d.safetensors", "not loaded"});
  // keep_last = 1: the next save removes step 7
  save_checkpoint(root, 8, out, 1);
  EXPECT_FALSE(fs::exists(d));
  // c from another save: refused, naming both files
  const fs::path other = save_checkpoint(tmp / "other", 8, out, 1);
  fs::copy_file(other / "c.safetensors", root / "step_00000008" / "c.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error([&] { load_checkpoint(root, files); }, {"a.safetensors and c.safetensors", "different saves"});
  // an optional file is checked too when it is there
  expect_error([&] { load_checkpoint(root, {"a.safetensors"}, {"c.safetensors"}); }, {"different saves"});
  EXPECT_EQ(load_checkpoint(root, {"a.safetensors"}, {"b.safetensors"}).files.size(), 2u);
  EXPECT_EQ(load_checkpoint(root, {"a.safetensors"}, {"missing.safetensors"}).files.size(), 1u);
}

TEST(Checkpoint, SaveCleansUpWhatKilledWritesLeft) {
  TempDir tmp;
  const fs::path root = tmp / "ck";
  save_checkpoint(root, 1, 1, {}, 1, {});
  for (const char* leftover : {"latest.tmp.123", "metrics.csv.tmp.9", ".write-test.42"})
    spit(root / leftover, "x");
  for (const char* kept : {"metrics.csv", "notes.tmp.txt", ".tmp."}) spit(root / kept, "x");
  save_checkpoint(root, 2, 2, {}, 2, {});
  for (const char* leftover : {"latest.tmp.123", "metrics.csv.tmp.9", ".write-test.42"})
    EXPECT_FALSE(fs::exists(root / leftover)) << leftover;
  for (const char* kept : {"metrics.csv", "notes.tmp.txt", ".tmp."})
    EXPECT_TRUE(fs::exists(root / kept)) << kept;
  EXPECT_EQ(w_of(load_checkpoint_files(root)), 2.0f);
}
