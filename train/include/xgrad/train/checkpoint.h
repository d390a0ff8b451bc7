// xgrad/train/checkpoint.h: a training run's checkpoint, what a torch user writes as
//
//   torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
//               "scheduler": sched.state_dict(), "rng": torch.get_rng_state(), "step": step}, path)
//
// as one step directory of xgrad::io's checkpoint directories (xgrad/io/checkpoint.h), two
// safetensors files written together:
//
//   model.safetensors        model.state_dict(), with "format": "pt", "step" and the caller's
//                            model metadata (its config, its vocabulary, ...)
//   train_state.safetensors  the optimizer's state dict in xgrad::save's layout without the
//                            groups' options, with "format" and "format_version" (the caller's
//                            name and version for its metadata), "step" (optimizer steps done:
//                            the schedule's position), "rng.default" (the default generator's
//                            state, base64), the batches' position when the run has a
//                            data::BatchStream ("data.epoch", "data.batch", "rng.data") and the
//                            caller's own keys
//
//   train::Run run{model, opt, sched, &batches};
//   train::save_checkpoint("ck", step, run, {"my-trainer", 2}, {{"config", cfg}}, {{"epoch", "3"}});
//   io::Checkpoint ck = io::load_checkpoint("ck", {train::kModelFile, train::kTrainStateFile});
//   train::Resume r = train::read_checkpoint(ck, run, {"my-trainer", 2});  // checks, changes nothing
//   // ... the caller checks its own metadata ...
//   train::restore(r, run);  // model, optimizer, schedule and generator, or nothing
//
// The hyperparameters are the run's, not the file's: the groups' options are not saved, and a
// restored group has the options the optimizer has now, its lr where the schedule is at the
// saved step, so a run resumed with another peak lr or weight decay follows the new settings.
// The optimizer state may also be in the older layout by parameter name, tensors
// "optim.<parameter name>.<key>" (e.g. "optim.out_head.weight.exp_avg"): each lands on the
// parameter of that name. Every problem throws xgrad::Error ("checkpoint <file>: ...").
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "xgrad/data/batch_stream.h"
#include "xgrad/io/checkpoint.h"
#include "xgrad/nn/module.h"
#include "xgrad/optim/lr_scheduler.h"
#include "xgrad/optim/optimizer.h"

namespace xgrad::train {

inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kTrainStateFile = "train_state.safetensors";

// What a checkpoint saves and restores: the model, its optimizer, the optimizer's schedule and
// (optional) the stream of training batches.
struct Run {
  nn::Module& model;
  optim::Optimizer& optimizer;
  optim::LRScheduler& scheduler;
  data::BatchStream* batches = nullptr;
};

// The caller's layout of its metadata: "format" is `name`, "format_version" 1 to `version`
// (written as `version`). From version `headers_checked_from` on, both files must carry io's
// header checksum (a file without one is refused: its checksum key was damaged); 0: never.
struct Format {
  std::string name;
  int version = 1;
  int headers_checked_from = 0;
};

// Writes step `step` of `run` under `root` (io::save_checkpoint, which keeps the newest
// `keep_last`) and returns its directory. The metadata may not use the keys the layout above
// sets.
std::filesystem::path save_checkpoint(const std::filesystem::path& root, int64_t step, const Run& run,
                                      const Format& format, io::Metadata model_metadata,
                                      io::Metadata metadata, int keep_last = 2);

// A checkpoint read and checked against a run, nothing applied yet.
struct Resume {
  const io::Checkpoint& checkpoint;
  int version = 0;  // its format_version
  int64_t step = 0;
  std::vector<uint8_t> rng_default;
  optim::OptimizerState optimizer;                  // the moments, with the run's options and scheduled lrs
  std::optional<data::BatchStream::Position> data;  // none saved: the stream starts again
};

// Checks the format, the version, the header checksums, "step", "rng.default", the batches'
// position (within a pass of run.batches) and the optimizer state's layout (its names and
// parameter indices; the shapes are checked by restore()), and changes nothing.
Resume read_checkpoint(const io::Checkpoint& ck, const Run& run, const Format& format);

// model.safetensors into `model` (strict): throws "checkpoint <file> does not fit the model"
// with load_state_dict's reason, leaving the model unchanged.
void load_model(const io::Checkpoint& ck, nn::Module& model);

// Loads the model's tensors and the optimizer's state, all or nothing (when the optimizer
// refuses its state, the model gets its old values back), then sets the schedule to the step,
// the default generator to its saved state and the batches to their position (rewound to the
// first pass when none was saved). Throws naming the file that does not fit.
void restore(const Resume& resume, const Run& run);

}  // namespace xgrad::train
