// xgrad/io/checkpoint.h: a directory of training checkpoints, one step per folder, each a
// few safetensors files written together (e.g. the model's state_dict and the optimizer's):
//
//   <root>/latest                          "step_00001000\n", replaced atomically
//   <root>/step_00001000/model.safetensors
//   <root>/step_00001000/train_state.safetensors
//
//   xgrad::io::save_checkpoint(root, step, {{"model.safetensors", model_tensors, meta},
//                                           {"train_state.safetensors", optim_tensors, meta2}});
//   xgrad::io::Checkpoint ck = xgrad::io::load_checkpoint(root, {"model.safetensors",
//                                                                 "train_state.safetensors"});
//   model.load_state_dict(nn::StateDict::from(ck.at("model.safetensors").tensors));
//
// A checkpoint is first written to <root>/.tmp-step_00001000-<pid>/ (each file fsynced),
// then renamed to its final name, then `latest` is switched to it: killing the process at any
// moment leaves `latest` naming a complete checkpoint. Step directories beyond `keep_last`
// (oldest first) are deleted afterwards. Every file of one save carries the same random
// "xgrad.checkpoint_id" metadata, so files from different saves are refused on load.
//
// What the tensors and metadata mean is the caller's business; this file only moves files.
// Every problem throws xgrad::Error ("checkpoint: ...") naming the file or directory.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/io/safetensors.h"

namespace xgrad::io {

inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kCheckpointIdKey = "xgrad.checkpoint_id";

// One file of a checkpoint, as xgrad::save would write it.
struct CheckpointFile {
  std::string name;  // e.g. "model.safetensors"
  NamedTensors tensors;
  Metadata metadata;
};

// A loaded checkpoint: its step directory and its files by name.
struct Checkpoint {
  fs::path dir;
  std::map<std::string, SafetensorsFile> files;
  const SafetensorsFile& at(const std::string& file) const;  // throws naming the missing file
  SafetensorsFile& at(const std::string& file);
  bool contains(const std::string& file) const { return files.count(file) > 0; }
};

// "step_00001000" for 1000; the step of such a name, or -1.
std::string step_dir_name(int64_t step);
int64_t parse_step_dir_name(const std::string& name);

// Creates `dir` if needed and proves it writable by creating and deleting a probe file;
// throws naming the reason otherwise. Call before training starts.
void check_writable_dir(const fs::path& dir);

// Writes one checkpoint (layout above) and returns its directory. Throws if step_<step> is
// already the latest checkpoint. Also removes what interrupted saves left in `root`
// (".tmp-step_*" directories, "<file>.tmp.<pid>" temp files of write_file_atomic).
fs::path save_checkpoint(const fs::path& root, int64_t step, std::vector<CheckpointFile> files,
                         int keep_last = 2);

// `path` is a checkpoint directory (holding `marker_file`) or a root with `latest`. Returns
// the checkpoint directory, or nullopt when there is none; throws when `latest` is corrupt or
// names a directory without `marker_file`.
std::optional<fs::path> find_checkpoint(const fs::path& path, const std::string& marker_file);

// Finds the checkpoint under `path` (files[0] marks a checkpoint directory), loads and checks
// every file of `files` (each must exist) and of `optional_files` (when present), and checks
// they come from one save.
Checkpoint load_checkpoint(const fs::path& path, const std::vector<std::string>& files,
                           const std::vector<std::string>& optional_files = {});

}  // namespace xgrad::io
