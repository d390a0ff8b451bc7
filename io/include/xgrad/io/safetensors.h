// xgrad/io/safetensors.h: saving and loading tensors in the safetensors format, so xgrad's
// checkpoints open in PyTorch (`safetensors.torch.load_file`) and PyTorch's open here.
//
//   xgrad::save(model.state_dict(), "model.safetensors", {{"step", "1000"}});  // nn/module.h
//   model.load_state_dict("model.safetensors");                               // or:
//   xgrad::io::SafetensorsFile f = xgrad::load("model.safetensors");  // tensors + metadata
//   xgrad::save(opt.state_dict(), "optim.safetensors");  opt.load_state_dict("optim.safetensors");
//
// Every write is atomic (xgrad/io/file.h: a crash leaves the old file or the new one), and
// every read checks everything before anything is returned, so a bad file changes nothing.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length N,
// then N bytes of JSON
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "string value", ...}}
// (padded with spaces to a multiple of 8), then the raw little-endian data; offsets are
// relative to the start of the data section. Supported dtypes: F32, F64, I64, BOOL, BF16
// (read and written), and F16 (read only: IEEE half is not an xgrad dtype, so an F16 tensor
// loads as float32, each value widened exactly).
//
// We add two metadata entries, checked on load:
//   "xgrad_crc32"         the CRC-32 of the whole data section;
//   "xgrad_header_crc32"  the CRC-32 of the header in canonical form: the header JSON without
//                         this one entry, keys sorted (byte order = code point order), no
//                         whitespace, non-ASCII as raw UTF-8, i.e. Python's
//                         json.dumps(h, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
//                         (nlohmann::json::dump()). It covers every name, dtype, shape, offset
//                         and metadata value, so one flipped character of a step, vocabulary or
//                         RNG state is caught; other tools still read the header as usual.
// A file without either (written by PyTorch) is accepted unchecked; one with the data
// checksum only is an xgrad file from before the header checksum (header_verified false).
// Any other metadata key starting with "xgrad_" is refused (a flipped checksum key).
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xgrad/io/file.h"
#include "xgrad/tensor.h"

namespace xgrad::io {

// Tensors in file order (our writer keeps the caller's order; the reader returns them in data
// order, which for our files is the same).
using NamedTensors = std::vector<std::pair<std::string, xgrad::Tensor>>;
using Metadata = std::map<std::string, std::string>;

inline constexpr const char* kChecksumKey = "xgrad_crc32";
inline constexpr const char* kHeaderChecksumKey = "xgrad_header_crc32";

struct SafetensorsFile {
  NamedTensors tensors;
  Metadata metadata;
  bool checksum_verified = false;  // false: the file had no xgrad_crc32 (e.g. from PyTorch)
  bool header_verified = false;    // false: the file had no xgrad_header_crc32
  const xgrad::Tensor& at(const std::string& name) const;  // throws naming the missing tensor
  bool contains(const std::string& name) const;
};

// Writes atomically (see write_file_atomic). Names must be unique and non-empty and may not
// be "__metadata__"; `metadata` must not use keys starting with "xgrad_" (the checksums are
// added). Any tensor
// layout is accepted (non-contiguous ones are copied while writing).
void save_safetensors(const fs::path& path, const NamedTensors& tensors, const Metadata& metadata = {});

// Reads and validates the whole file; every problem (too short, header length past the end,
// invalid JSON, unknown dtype, offsets out of range / overlapping / not matching the shape,
// header or data checksum mismatch) throws xgrad::Error naming the file.
SafetensorsFile load_safetensors(const fs::path& path);

// The same, from bytes in memory (`source` names them in messages).
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source);

}  // namespace xgrad::io

namespace xgrad {
// torch.save / torch.load in safetensors (safetensors.torch.save_file / load_file): the
// tensors in order, with string metadata; see io::save_safetensors / io::load_safetensors.
// Overloads for a module's StateDict (xgrad/nn/module.h) and an optimizer's state
// (xgrad/optim/optimizer.h) sit with those types.
inline void save(const io::NamedTensors& tensors, const std::filesystem::path& path,
                 const io::Metadata& metadata = {}) {
  io::save_safetensors(path, tensors, metadata);
}
inline io::SafetensorsFile load(const std::filesystem::path& path) { return io::load_safetensors(path); }
}  // namespace xgrad
