// examples/train_lm/checkpoint.h: the on-disk checkpoint layout (see README.md).
//
//   <root>/latest                       "step_00001000\n", replaced atomically
//   <root>/step_00001000/model.safetensors        the model's state_dict (torch names)
//   <root>/step_00001000/train_state.safetensors  optimizer moments + metadata (config,
//                                                 vocabulary, step, RNG states, options)
//
// A checkpoint is first written to <root>/.tmp-step_00001000-<pid>/ (each file fsynced),
// then renamed to its final name, then `latest` is switched to it. Killing the process at
// any moment leaves `latest` pointing at a complete checkpoint. Older step directories
// beyond `keep_last` are deleted afterwards.
//
// This file only moves files; what the tensors and metadata mean is trainer.cpp's business.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "xgrad/io/safetensors.h"

namespace train_lm {

// The library's safetensors files (xgrad/io/safetensors.h): NamedTensors, Metadata,
// SafetensorsFile, save_safetensors, load_safetensors.
namespace fs = std::filesystem;
using namespace xgrad::io;

// 2: both files carry xgrad_header_crc32 (the header checksum), required when loading;
// version 1 files (data checksum only) still load.
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kTrainStateFile = "train_state.safetensors";
inline constexpr const char* kLatestFile = "latest";
// Both files carry the same id, so a model and a train state from different saves are caught.
inline constexpr const char* kCheckpointIdKey = "xgrad.checkpoint_id";

struct CheckpointFiles {
  fs::path dir;
  SafetensorsFile model;
  SafetensorsFile train_state;
};

// Creates `dir` if needed and proves it writable by creating and deleting a probe file;
// throws xgrad::Error with the reason otherwise. Call before training starts.
void check_writable_dir(const fs::path& dir);

// Writes one checkpoint (layout above) and returns its directory. Adds kCheckpointIdKey to
// both metadata maps. Throws if step_<step> is already the latest checkpoint.
fs::path save_checkpoint(const fs::path& root, int64_t step, const NamedTensors& model, Metadata model_meta,
                         const NamedTensors& train_state, Metadata train_state_meta, int keep_last = 2);

// `path` is a checkpoint directory (holding model.safetensors) or a root with `latest`.
// Returns the checkpoint directory, or nullopt when there is none; throws when `latest`
// points to a missing directory.
std::optional<fs::path> find_checkpoint(const fs::path& path);

// Loads both files (the train state is optional when `need_train_state` is false, e.g. for
// generation) and checks they belong together. Throws naming the file on any problem.
CheckpointFiles load_checkpoint_files(const fs::path& path, bool need_train_state = true);

}  // namespace train_lm
