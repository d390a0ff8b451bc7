// examples/train_lm/checkpoint.cpp: see checkpoint.h.
#include "checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "xgrad/error.h"

namespace train_lm {
namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

// step number of "step_00001000", or -1.
int64_t parse_step_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t v = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// "<name>.tmp.<pid>" (write_file_atomic's temp name) for the files we write into a checkpoint
// root, and ".write-test.<pid>" (check_writable_dir's probe).
bool is_leftover_temp_file(const std::string& n) {
  auto digits_after = [&](std::size_t at) {
    return at < n.size() && n.find_first_not_of("0123456789", at) == std::string::npos;
  };
  if (n.rfind(".write-test.", 0) == 0) return digits_after(12);
  const std::size_t t = n.rfind(".tmp.");
  if (t == std::string::npos || !digits_after(t + 5)) return false;
  const std::string base = n.substr(0, t);
  return base == kLatestFile || (base.size() > 4 && base.compare(base.size() - 4, 4, ".csv") == 0);
}

std::optional<std::string> read_latest(const fs::path& root) {
  fs::path p = root / kLatestFile;
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  std::string s = read_file(p);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (parse_step_name(s) < 0)
    xgrad::fail("checkpoint", p.string(), " does not name a step directory (got '", s,
                "'): corrupted checkpoint root");
  return s;
}

std::string new_checkpoint_id(int64_t step) {
  std::random_device rd;
  uint64_t nonce =
      (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld-%016llx", static_cast<long long>(step),
                static_cast<unsigned long long>(nonce));
  return buf;
}

}  // namespace

void check_writable_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    xgrad::fail("checkpoint", dir.string(), " exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) xgrad::fail("checkpoint", "cannot create directory ", dir.string(), ": ", ec.message());
  fs::path probe = dir / (".write-test." + std::to_string(::getpid()));
  try {
    write_file_atomic(probe, "ok\n");
  } catch (const xgrad::Error& e) {
    xgrad::fail("checkpoint", "directory ", dir.string(), " is not writable (", e.what(), ")");
  }
  fs::remove(probe, ec);
}

fs::path save_checkpoint(const fs::path& root, int64_t step, const NamedTensors& model, Metadata model_meta,
                         const NamedTensors& train_state, Metadata train_state_meta, int keep_last) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) xgrad::fail("checkpoint", "cannot create directory ", root.string(), ": ", ec.message());
  const std::string name = step_name(step);
  const fs::path final_dir = root / name;
  std::optional<std::string> latest = read_latest(root);
  if (latest && *latest == name)
    xgrad::fail("checkpoint", final_dir.string(), " is already the latest checkpoint");

  // Leftovers of interrupted saves are never valid checkpoints, nor are the temp files of a
  // killed atomic write (latest.tmp.<pid>, metrics.csv.tmp.<pid>, the .write-test.<pid> probe).
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0) fs::remove_all(e.path(), ec);
    else if (is_leftover_temp_file(n)) fs::remove(e.path(), ec);
  }

  const fs::path tmp = root / (".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::create_directory(tmp, ec);
  if (ec) xgrad::fail("checkpoint", "cannot create directory ", tmp.string(), ": ", ec.message());
  try {
    std::string id = new_checkpoint_id(step);
    model_meta[kCheckpointIdKey] = id;
    train_state_meta[kCheckpointIdKey] = id;
    save_safetensors(tmp / kModelFile, model, model_meta);
    save_safetensors(tmp / kTrainStateFile, train_state, train_state_meta);
    fsync_dir(tmp);
    // A complete step directory that `latest` does not name is stale (a save interrupted
    // before `latest` moved, then training resumed from an older step): replace it.
    if (fs::exists(final_dir, ec)) fs::remove_all(final_dir, ec);
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
      xgrad::fail("checkpoint", "cannot rename ", tmp.string(), " to ", final_dir.string(), ": ",
                  std::strerror(errno));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fsync_dir(root);
  write_file_atomic(root / kLatestFile, name + "\n");

  // Keep the newest keep_last step directories (the latest among them).
  std::vector<std::pair<int64_t, fs::path>> steps;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    int64_t s = parse_step_name(e.path().filename().string());
    if (s >= 0 && e.is_directory()) steps.emplace_back(s, e.path());
  }
  std::sort(steps.begin(), steps.end());
  int64_t excess = static_cast<int64_t>(steps.size()) - std::max(1, keep_last);
  for (int64_t i = 0; i < excess; ++i)
    if (steps[i].second != final_dir) fs::remove_all(steps[i].second, ec);
  return final_dir;
}

std::optional<fs::path> find_checkpoint(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path / kModelFile, ec)) return path;
  std::optional<std::string> latest = read_latest(path);
  if (!latest) return std::nullopt;
  fs::path dir = path / *latest;
  if (!fs::exists(dir / kModelFile, ec))
    xgrad::fail("checkpoint", (path / kLatestFile).string(), " points to ", dir.string(), ", which has no ",
                kModelFile, " (deleted or corrupted checkpoint)");
  return dir;
}

CheckpointFiles load_checkpoint_files(const fs::path& path, bool need_train_state) {
  std::error_code ec;
  if (!fs::exists(path, ec)) xgrad::fail("checkpoint", path.string(), ": no such directory");
  std::optional<fs::path> dir = find_checkpoint(path);
  if (!dir)
    xgrad::fail("checkpoint", path.string(), " holds no checkpoint (neither ", kModelFile, " nor a '",
                kLatestFile, "' file)");
  CheckpointFiles out;
  out.dir = *dir;
  out.model = load_safetensors(*dir / kModelFile);
  fs::path state = *dir / kTrainStateFile;
  if (need_train_state || fs::exists(state, ec)) {
    if (!fs::exists(state, ec))
      xgrad::fail("checkpoint", state.string(), ": no such file (needed to resume training)");
    out.train_state = load_safetensors(state);
    auto a = out.model.metadata.find(kCheckpointIdKey);
    auto b = out.train_state.metadata.find(kCheckpointIdKey);
    if (a == out.model.metadata.end() || b == out.train_state.metadata.end() || a->second != b->second)
      xgrad::fail("checkpoint", dir->string(), ": ", kModelFile, " and ", kTrainStateFile,
                  " come from different saves (", kCheckpointIdKey, " differs)");
  }
  return out;
}

}  // namespace train_lm
