// nn/src/module_io.cpp: a module's state dict to and from a safetensors file (the format,
// its checks and the atomic write are xgrad::io's, io/src/safetensors.cpp).
#include "xgrad/nn/module.h"

namespace xgrad::nn {

StateDict StateDict::from(const io::NamedTensors& tensors) {
  StateDict sd;
  for (const auto& [name, t] : tensors) {
    if (sd.contains(name)) fail("StateDict::from", "the name '", name, "' appears twice");
    sd.insert(name, t);
  }
  return sd;
}

LoadResult Module::load_state_dict(const std::filesystem::path& path, bool strict) {
  return load_state_dict(StateDict::from(xgrad::load(path).tensors), strict);
}

}  // namespace xgrad::nn

namespace xgrad {

void save(const nn::StateDict& state, const std::filesystem::path& path, const io::Metadata& metadata) {
  io::save_safetensors(path, io::NamedTensors(state.begin(), state.end()), metadata);
}

}  // namespace xgrad
