// optim/src/optimizer_io.cpp: an optimizer's state dict to and from a safetensors file (the
// layout is documented at xgrad::save in xgrad/optim/optimizer.h; the file format, its checks
// and the atomic write are xgrad::io's).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "xgrad/optim/optimizer.h"

namespace xgrad::optim {

namespace {

constexpr const char* kOp = "load_state_dict";

// The non-negative integer `text` is, all of it; -1 otherwise.
int64_t parse_index(const std::string& text) {
  if (text.empty() || text.size() > 15) return -1;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string format_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool is_reserved_key(const std::string& key) {
  return key == "optimizer" || key == "param_groups" || key.rfind("param_groups.", 0) == 0;
}

}  // namespace

OptimizerState OptimizerState::from(const io::SafetensorsFile& file, const std::string& source) {
  const std::string where = source.empty() ? "optimizer state" : source;
  auto bad = [&](const auto&... parts) { fail(kOp, where, ": ", parts...); };
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      bad("metadata has no '", key, "' (not a file written by xgrad::save(opt.state_dict(), path)?)");
    return it->second;
  };
  OptimizerState sd;
  sd.type = meta("optimizer");
  const int64_t groups = parse_index(meta("param_groups"));
  if (groups < 0 || groups > 1'000'000)
    bad("metadata 'param_groups' is not a group count: '", meta("param_groups"), "'");
  sd.param_groups.resize(static_cast<std::size_t>(groups));
  std::vector<bool> have_params(sd.param_groups.size(), false);
  for (const auto& [key, value] : file.metadata) {
    if (key.rfind("param_groups.", 0) != 0) continue;
    const std::size_t dot = key.find('.', 13);
    const int64_t g = dot == std::string::npos ? -1 : parse_index(key.substr(13, dot - 13));
    if (g < 0 || g >= groups) bad("metadata key '", key, "' names no param group (", groups, " groups)");
    ParamGroupState& pg = sd.param_groups[static_cast<std::size_t>(g)];
    const std::string name = key.substr(dot + 1);
    if (name == "params") {
      have_params[static_cast<std::size_t>(g)] = true;
      std::size_t at = 0;
      while (!value.empty() && at <= value.size()) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        const int64_t index = parse_index(value.substr(at, comma - at));
        if (index < 0) bad("metadata '", key, "' is not a list of parameter indices: '", value, "'");
        pg.params.push_back(index);
        at = comma + 1;
      }
      continue;
    }
    if (name.empty()) bad("metadata key '", key, "' names no option");
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || errno == ERANGE)
      bad("metadata '", key, "' is not a number: '", value, "'");
    pg.options[name] = v;
  }
  for (std::size_t g = 0; g < have_params.size(); ++g)
    if (!have_params[g]) bad("metadata has no 'param_groups.", g, ".params'");
  for (const auto& [name, t] : file.tensors) {
    const std::size_t dot = name.find('.', 6);
    const int64_t index =
        name.rfind("state.", 0) == 0 && dot != std::string::npos ? parse_index(name.substr(6, dot - 6)) : -1;
    if (index < 0 || dot + 1 >= name.size())
      bad("unexpected tensor '", name, "' (expected state.<parameter index>.<name>)");
    sd.state[index][name.substr(dot + 1)] = t;
  }
  return sd;
}

io::SafetensorsFile OptimizerState::to_safetensors(const io::Metadata& metadata,
                                                   const std::string& source) const {
  io::SafetensorsFile file;
  for (const auto& [key, value] : metadata) {
    if (is_reserved_key(key))
      fail("save", source.empty() ? "optimizer state" : source, ": metadata key '", key,
           "' is the optimizer state's own");
    file.metadata[key] = value;
  }
  file.metadata["optimizer"] = type;
  file.metadata["param_groups"] = std::to_string(param_groups.size());
  for (std::size_t g = 0; g < param_groups.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    std::string params;
    for (int64_t i : param_groups[g].params) params += (params.empty() ? "" : ",") + std::to_string(i);
    file.metadata[prefix + "params"] = params;
    for (const auto& [name, v] : param_groups[g].options) file.metadata[prefix + name] = format_double(v);
  }
  for (const auto& [index, named] : state)
    for (const auto& [key, t] : named)
      file.tensors.emplace_back("state." + std::to_string(index) + "." + key, t);
  return file;
}

void Optimizer::load_state_dict(const std::filesystem::path& path) {
  load_state_dict(OptimizerState::from(xgrad::load(path), path.string()));
}

}  // namespace xgrad::optim

namespace xgrad {

void save(const optim::OptimizerState& state, const std::filesystem::path& path,
          const io::Metadata& metadata) {
  const io::SafetensorsFile file = state.to_safetensors(metadata, path.string());
  io::save_safetensors(path, file.tensors, file.metadata);
}

}  // namespace xgrad
