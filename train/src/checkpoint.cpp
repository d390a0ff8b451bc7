// train/src/checkpoint.cpp: see xgrad/train/checkpoint.h. Saving is one io::save_checkpoint
// of the two files; loading reads and checks everything first (read_checkpoint), then applies
// it (restore).
#include "xgrad/train/checkpoint.h"

#include <charconv>
#include <map>
#include <utility>

#include "xgrad/error.h"
#include "xgrad/io/file.h"
#include "xgrad/random.h"

namespace xgrad::train {

namespace fs = std::filesystem;

namespace {

const std::string& meta_str(const io::Checkpoint& ck, const char* file, const std::string& key) {
  const io::Metadata& m = ck.at(file).metadata;
  const auto it = m.find(key);
  if (it == m.end()) fail("checkpoint", (ck.dir / file).string(), ": metadata has no '", key, "'");
  return it->second;
}

int64_t meta_count(const io::Checkpoint& ck, const char* file, const std::string& key) {
  const std::string& text = meta_str(ck, file, key);
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    fail("checkpoint", (ck.dir / file).string(), ": metadata '", key, "' is not a non-negative integer: '",
         text, "'");
  return v;
}

std::vector<uint8_t> rng_state(const io::Checkpoint& ck, const std::string& key) {
  std::vector<uint8_t> state = io::base64_decode(meta_str(ck, kTrainStateFile, key), key.c_str());
  if (state.size() != Generator::kStateSize)
    fail("checkpoint", (ck.dir / kTrainStateFile).string(), ": an RNG state has ", state.size(),
         " bytes, expected ", Generator::kStateSize);
  return state;
}

// The older layout, "optim.<parameter name>.<key>": each name's flat index is its parameter's
// place in the optimizer's groups.
optim::OptimizerState state_by_name(const io::SafetensorsFile& state, optim::OptimizerState built,
                                    const Run& run, const std::string& file) {
  const std::vector<Tensor> flat = run.optimizer.parameters();
  std::map<std::string, int64_t> index_of;
  for (const auto& [name, p] : run.model.named_parameters())
    for (std::size_t i = 0; i < flat.size(); ++i)
      if (flat[i].impl() == p.impl()) index_of.emplace(name, static_cast<int64_t>(i));
  built.state.clear();
  for (const auto& [name, t] : state.tensors) {
    const auto dot = name.rfind('.');
    const std::string param = name.starts_with("optim.") && dot > 6 ? name.substr(6, dot - 6) : "";
    const auto it = index_of.find(param);
    if (it == index_of.end())
      fail("checkpoint", file, ": tensor '", name, "' is for parameter '", param,
           "', which this model does not have");
    built.state[it->second][name.substr(dot + 1)] = t;
  }
  return built;
}

// The layout by name: it has no "param_groups" (optim's layout always has), or names a parameter.
bool by_name(const io::SafetensorsFile& state) {
  if (!state.metadata.count("param_groups")) return true;
  for (const auto& [name, t] : state.tensors)
    if (name.starts_with("optim.")) return true;
  return false;
}

}  // namespace

fs::path save_checkpoint(const fs::path& root, int64_t step, const Run& run, const Format& format,
                         io::Metadata model_metadata, io::Metadata metadata, int keep_last) {
  const nn::StateDict model = run.model.state_dict();
  model_metadata["format"] = "pt";
  model_metadata["step"] = std::to_string(step);
  optim::OptimizerState opt_state = run.optimizer.state_dict();
  for (optim::ParamGroupState& g : opt_state.param_groups) g.options.clear();  // the run's, not the file's
  metadata["format"] = format.name;
  metadata["format_version"] = std::to_string(format.version);
  metadata["step"] = std::to_string(step);
  metadata["rng.default"] = io::base64_encode(default_generator().get_state());
  if (run.batches) {
    const data::BatchStream::Position at = run.batches->position();
    metadata["data.epoch"] = std::to_string(at.epoch);
    metadata["data.batch"] = std::to_string(at.batch);
    metadata["rng.data"] = io::base64_encode(at.rng);
  }
  io::SafetensorsFile state = opt_state.to_safetensors(metadata, "save_checkpoint");
  return io::save_checkpoint(
      root, step,
      {{kModelFile, io::NamedTensors(model.begin(), model.end()), std::move(model_metadata)},
       {kTrainStateFile, std::move(state.tensors), std::move(state.metadata)}},
      keep_last);
}

Resume read_checkpoint(const io::Checkpoint& ck, const Run& run, const Format& format) {
  const std::string file = (ck.dir / kTrainStateFile).string();
  const std::string& name = meta_str(ck, kTrainStateFile, "format");
  if (name != format.name) fail("checkpoint", file, ": format is '", name, "', expected '", format.name, "'");
  const std::string& version = meta_str(ck, kTrainStateFile, "format_version");
  int v = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), v);
  if (ec != std::errc() || end != version.data() + version.size() || v < 1 || v > format.version)
    fail("checkpoint", file, ": format_version ", version,
         " is not supported (this build reads versions 1 to ", format.version, ")");
  if (format.headers_checked_from > 0 && v >= format.headers_checked_from)
    for (const char* f : {kModelFile, kTrainStateFile})
      if (!ck.at(f).header_verified)
        fail("checkpoint", (ck.dir / f).string(), ": format_version ", v, " but no ", io::kHeaderChecksumKey,
             " (a corrupted checksum key?)");
  Resume r{ck, v, meta_count(ck, kTrainStateFile, "step"), rng_state(ck, "rng.default"), {}, {}};
  if (run.batches && ck.at(kTrainStateFile).metadata.count("data.epoch")) {
    r.data = {meta_count(ck, kTrainStateFile, "data.epoch"), meta_count(ck, kTrainStateFile, "data.batch"),
              rng_state(ck, "rng.data")};
    if (r.data->batch > run.batches->loader().size())
      fail("checkpoint", file, ": data.batch ", r.data->batch, " is past the ", run.batches->loader().size(),
           " batches of an epoch");
  }
  const io::SafetensorsFile& state = ck.at(kTrainStateFile);
  const optim::OptimizerState built = run.optimizer.state_dict();
  r.optimizer =
      by_name(state) ? state_by_name(state, built, run, file) : optim::OptimizerState::from(state, file);
  for (std::size_t g = 0; g < r.optimizer.param_groups.size() && g < built.param_groups.size(); ++g) {
    r.optimizer.param_groups[g].options = built.param_groups[g].options;
    r.optimizer.param_groups[g].options["lr"] = run.scheduler.lr_at(r.step, run.scheduler.base_lrs()[g]);
  }
  return r;
}

void load_model(const io::Checkpoint& ck, nn::Module& model) {
  try {
    model.load_state_dict(nn::StateDict::from(ck.at(kModelFile).tensors));
  } catch (const Error& e) {
    fail("checkpoint", (ck.dir / kModelFile).string(), " does not fit the model: ", e.what());
  }
}

void restore(const Resume& r, const Run& run) {
  const nn::StateDict before = run.model.state_dict().clone();
  load_model(r.checkpoint, run.model);
  try {
    run.optimizer.load_state_dict(r.optimizer);
  } catch (const Error& e) {
    run.model.load_state_dict(before);
    fail("checkpoint", (r.checkpoint.dir / kTrainStateFile).string(),
         ": the optimizer state does not fit: ", e.what());
  }
  run.scheduler.load_state_dict(r.step);  // the lrs read_checkpoint set
  default_generator().set_state(r.rng_default);
  if (run.batches) r.data ? run.batches->seek(*r.data) : run.batches->rewind();
}

}  // namespace xgrad::train
