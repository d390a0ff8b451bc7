// io/src/checkpoint.cpp: see xgrad/io/checkpoint.h.
#include "xgrad/io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "xgrad/error.h"

namespace xgrad::io {
namespace {

bool all_digits_from(const std::string& s, std::size_t at) {
  return at < s.size() && s.find_first_not_of("0123456789", at) == std::string::npos;
}

// What a killed save or probe leaves in a root: write_file_atomic's "<name>.tmp.<pid>" (e.g.
// latest.tmp.123, or metrics.csv.tmp.123 of a caller's log) and check_writable_dir's probe.
bool is_leftover_temp_file(const std::string& n) {
  if (n.rfind(".write-test.", 0) == 0) return all_digits_from(n, 12);
  const std::size_t t = n.rfind(".tmp.");
  return t != std::string::npos && t > 0 && all_digits_from(n, t + 5);
}

std::optional<std::string> read_latest(const fs::path& root) {
  const fs::path p = root / kLatestFile;
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  std::string s = read_file(p);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (parse_step_dir_name(s) < 0)
    fail("checkpoint", p.string(), " does not name a step directory (got '", s,
         "'): corrupted checkpoint root");
  return s;
}

std::string new_checkpoint_id(int64_t step) {
  std::random_device rd;
  const uint64_t nonce =
      (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld-%016llx", static_cast<long long>(step),
                static_cast<unsigned long long>(nonce));
  return buf;
}

void create_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("checkpoint", "cannot create directory ", dir.string(), ": ", ec.message());
}

}  // namespace

const SafetensorsFile& Checkpoint::at(const std::string& file) const {
  auto it = files.find(file);
  if (it == files.end()) fail("checkpoint", (dir / file).string(), " was not loaded");
  return it->second;
}

SafetensorsFile& Checkpoint::at(const std::string& file) {
  return const_cast<SafetensorsFile&>(static_cast<const Checkpoint&>(*this).at(file));
}

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

int64_t parse_step_dir_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0) return -1;
  int64_t v = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

void check_writable_dir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    fail("checkpoint", dir.string(), " exists and is not a directory");
  create_dirs(dir);
  const fs::path probe = dir / (".write-test." + std::to_string(::getpid()));
  try {
    write_file_atomic(probe, "ok\n");
  } catch (const Error& e) {
    fail("checkpoint", "directory ", dir.string(), " is not writable (", e.what(), ")");
  }
  fs::remove(probe, ec);
}

fs::path save_checkpoint(const fs::path& root, int64_t step, std::vector<CheckpointFile> files,
                         int keep_last) {
  if (files.empty()) fail("checkpoint", "save_checkpoint needs at least one file");
  std::error_code ec;
  create_dirs(root);
  const std::string name = step_dir_name(step);
  const fs::path final_dir = root / name;
  const std::optional<std::string> latest = read_latest(root);
  if (latest && *latest == name) fail("checkpoint", final_dir.string(), " is already the latest checkpoint");

  // Leftovers of interrupted saves are never valid checkpoints.
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0) fs::remove_all(e.path(), ec);
    else if (is_leftover_temp_file(n) && e.is_regular_file(ec)) fs::remove(e.path(), ec);
  }

  const fs::path tmp = root / (".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::create_directory(tmp, ec);
  if (ec) fail("checkpoint", "cannot create directory ", tmp.string(), ": ", ec.message());
  try {
    const std::string id = new_checkpoint_id(step);
    for (CheckpointFile& f : files) {
      f.metadata[kCheckpointIdKey] = id;
      save_safetensors(tmp / f.name, f.tensors, f.metadata);
    }
    fsync_dir(tmp);
    // A complete step directory that `latest` does not name is stale (a save interrupted
    // before `latest` moved, then training resumed from an older step): replace it.
    if (fs::exists(final_dir, ec)) fs::remove_all(final_dir, ec);
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
      fail("checkpoint", "cannot rename ", tmp.string(), " to ", final_dir.string(), ": ",
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
    const int64_t s = parse_step_dir_name(e.path().filename().string());
    if (s >= 0 && e.is_directory()) steps.emplace_back(s, e.path());
  }
  std::sort(steps.begin(), steps.end());
  const int64_t excess = static_cast<int64_t>(steps.size()) - std::max(1, keep_last);
  for (int64_t i = 0; i < excess; ++i)
    if (steps[i].second != final_dir) fs::remove_all(steps[i].second, ec);
  return final_dir;
}

std::optional<fs::path> find_checkpoint(const fs::path& path, const std::string& marker_file) {
  std::error_code ec;
  if (fs::exists(path / marker_file, ec)) return path;
  const std::optional<std::string> latest = read_latest(path);
  if (!latest) return std::nullopt;
  const fs::path dir = path / *latest;
  if (!fs::exists(dir / marker_file, ec))
    fail("checkpoint", (path / kLatestFile).string(), " points to ", dir.string(), ", which has no ",
         marker_file, " (deleted or corrupted checkpoint)");
  return dir;
}

Checkpoint load_checkpoint(const fs::path& path, const std::vector<std::string>& files,
                           const std::vector<std::string>& optional_files) {
  if (files.empty()) fail("checkpoint", "load_checkpoint needs at least one file");
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("checkpoint", path.string(), ": no such directory");
  const std::optional<fs::path> dir = find_checkpoint(path, files[0]);
  if (!dir)
    fail("checkpoint", path.string(), " holds no checkpoint (neither ", files[0], " nor a '", kLatestFile,
         "' file)");
  Checkpoint ck;
  ck.dir = *dir;
  for (const std::string& f : files) {
    if (!fs::exists(*dir / f, ec)) fail("checkpoint", (*dir / f).string(), ": no such file");
    ck.files[f] = load_safetensors(*dir / f);
  }
  for (const std::string& f : optional_files)
    if (fs::exists(*dir / f, ec)) ck.files[f] = load_safetensors(*dir / f);

  // one save: every file carries the id of the first
  const SafetensorsFile& first = ck.files.at(files[0]);
  auto id_of = [](const SafetensorsFile& f) {
    auto it = f.metadata.find(kCheckpointIdKey);
    return it == f.metadata.end() ? std::optional<std::string>() : it->second;
  };
  if (ck.files.size() > 1)
    for (const auto& [name, f] : ck.files)
      if (name != files[0] && (!id_of(first) || id_of(first) != id_of(f)))
        fail("checkpoint", dir->string(), ": ", files[0], " and ", name, " come from different saves (",
             kCheckpointIdKey, " differs)");
  return ck;
}

}  // namespace xgrad::io
