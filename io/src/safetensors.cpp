// io/src/safetensors.cpp: see xgrad/io/safetensors.h. The reader trusts nothing in the
// file: every length and offset is checked before it is used.
#include "xgrad/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::io {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

using xgrad::DType;
using xgrad::Tensor;

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // as the reference implementation

const char* st_dtype(DType d) {
  switch (d) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Bool:
      return "BOOL";
    case DType::BFloat16:
      return "BF16";
  }
  return "?";
}

// A file dtype: the tensor's dtype, and whether the file holds it as F16 (IEEE binary16, not
// an xgrad dtype: read into a float32 tensor, exactly, as each half widens without rounding).
struct FileDType {
  DType dtype;
  bool half = false;
  std::size_t itemsize() const { return half ? 2 : xgrad::itemsize(dtype); }
};

bool parse_dtype(const std::string& s, FileDType& out) {
  out.half = false;
  if (s == "F32") out.dtype = DType::Float32;
  else if (s == "F64") out.dtype = DType::Float64;
  else if (s == "I64") out.dtype = DType::Int64;
  else if (s == "BOOL") out.dtype = DType::Bool;
  else if (s == "BF16") out.dtype = DType::BFloat16;
  else if (s == "F16") out = FileDType{DType::Float32, true};
  else return false;
  return true;
}

// IEEE binary16 bits -> float32 (exact; NaN payloads kept in the top mantissa bits).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -v : v;
  }
  // normal: rebias the exponent from 15 to 127
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

struct Entry {
  std::string name;
  FileDType type;
  xgrad::Shape shape;
  std::uint64_t begin, end;
};

// Reads a non-negative integer that fits in uint64 from a JSON value.
bool as_u64(const nlohmann::json& v, std::uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<std::uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    out = static_cast<std::uint64_t>(v.get<std::int64_t>());
    return true;
  }
  return false;
}

// CRC-32 of the header in canonical form (see safetensors.h): nlohmann::json keeps object
// keys sorted, and dump() writes no whitespace.
std::string header_crc(nlohmann::json header) {
  auto meta = header.find("__metadata__");
  if (meta != header.end() && meta->is_object()) meta->erase(kHeaderChecksumKey);
  const std::string text = header.dump();
  return hex32(crc32(text.data(), text.size()));
}

}  // namespace

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  xgrad::fail("safetensors", "no tensor named '", name, "'");
}

bool SafetensorsFile::contains(const std::string& name) const {
  for (const auto& item : tensors)
    if (item.first == name) return true;
  return false;
}

// ---------------------------------------------------------------- writing
void save_safetensors(const fs::path& path, const NamedTensors& tensors, const Metadata& metadata) {
  const std::string file = path.string();
  std::set<std::string> names;
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      xgrad::fail("save_safetensors", file, ": invalid tensor name '", name, "'");
    if (!names.insert(name).second)
      xgrad::fail("save_safetensors", file, ": tensor name '", name, "' appears twice");
    if (!t.defined()) xgrad::fail("save_safetensors", file, ": tensor '", name, "' is undefined");
    contiguous.push_back(t.detach().contiguous());
  }
  for (const auto& item : metadata)
    if (item.first.rfind("xgrad_", 0) == 0)
      xgrad::fail("save_safetensors", file, ": metadata key ", item.first,
                  " is reserved (keys starting with xgrad_ are the checksums)");

  // Offsets and the checksum of the data section, in the caller's order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  std::uint32_t crc = 0;
  std::vector<std::pair<std::string, nlohmann::ordered_json>> entries;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = contiguous[i];
    std::uint64_t nbytes = static_cast<std::uint64_t>(t.numel()) * xgrad::itemsize(t.dtype());
    if (nbytes > 0) crc = crc32(t.raw_data_ptr(), nbytes, crc);
    entries.emplace_back(tensors[i].first,
                         nlohmann::ordered_json{{"dtype", st_dtype(t.dtype())},
                                                {"shape", t.shape()},
                                                {"data_offsets", {offset, offset + nbytes}}});
    offset += nbytes;
  }
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  meta[kChecksumKey] = hex32(crc);
  header["__metadata__"] = meta;
  for (auto& [name, e] : entries) header[name] = std::move(e);
  header["__metadata__"][kHeaderChecksumKey] = header_crc(nlohmann::json(header));

  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  std::uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));

  write_file_atomic(path, [&](FileWriter& w) {
    w.write(len, 8);
    w.write(text);
    for (const Tensor& t : contiguous) {
      std::size_t nbytes = static_cast<std::size_t>(t.numel()) * xgrad::itemsize(t.dtype());
      if (nbytes > 0) w.write(t.raw_data_ptr(), nbytes);
    }
  });
}

// ---------------------------------------------------------------- reading
SafetensorsFile load_safetensors(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) xgrad::fail("load_safetensors", path.string(), ": no such file");
  return parse_safetensors(read_file(path), path.string());
}

// ---------------------------------------------------------------- parsing, step by step
namespace {

// Throws "load_safetensors: <source>: <parts...>".
struct Reject {
  const std::string& source;
  template <class... Parts>
  [[noreturn]] void operator()(const Parts&... parts) const {
    xgrad::fail("load_safetensors", source, ": ", parts...);
  }
};

// The file is an 8-byte little-endian header length, the JSON header, then the data section.
std::pair<std::string_view, std::string_view> split_header(std::string_view bytes, const Reject& bad) {
  if (bytes.size() < 8) bad("file is too short (", bytes.size(), " bytes) to be a safetensors file");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  if (n > kMaxHeader) bad("header length ", n, " is larger than the 100 MiB limit (corrupted?)");
  if (n > bytes.size() - 8)
    bad("header length ", n, " goes past the end of the file (", bytes.size(),
        " bytes): the file is truncated or not a safetensors file");
  return {bytes.substr(8, n), bytes.substr(8 + n)};
}

// Checks xgrad's header checksum, when the header has one, before anything else in the header
// is believed; returns whether it was there (and matched).
bool verify_header_checksum(const nlohmann::json& header, const Reject& bad) {
  auto meta_it = header.find("__metadata__");
  if (meta_it == header.end() || !meta_it->is_object()) return false;
  for (auto m = meta_it->begin(); m != meta_it->end(); ++m)
    if (m.key().rfind("xgrad_", 0) == 0 && m.key() != kChecksumKey && m.key() != kHeaderChecksumKey)
      bad("unknown metadata key '", m.key(), "' (a corrupted checksum key?)");
  auto h = meta_it->find(kHeaderChecksumKey);
  if (h == meta_it->end()) return false;
  if (!meta_it->contains(kChecksumKey))
    bad("the header has ", kHeaderChecksumKey, " but no ", kChecksumKey, ": the file is corrupted");
  const std::string have = header_crc(header);
  const std::string said = h->is_string() ? h->get<std::string>() : h->dump();
  if (have != said)
    bad("header checksum mismatch (", kHeaderChecksumKey, " says ", said, ", the header has ", have,
        "): its metadata, names, shapes or offsets were changed or corrupted");
  return true;
}

// The string-to-string "__metadata__" object.
void read_metadata(const nlohmann::json& v, Metadata& out, const Reject& bad) {
  if (!v.is_object()) bad("__metadata__ is not an object");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string()) bad("__metadata__ value of '", m.key(), "' is not a string");
    out[m.key()] = m.value().get<std::string>();
  }
}

// One tensor's entry {"dtype", "shape", "data_offsets"}, checked against itself and against a
// data section of `data_size` bytes.
Entry read_entry(const std::string& name, const nlohmann::json& v, std::size_t data_size, const Reject& bad) {
  if (!v.is_object()) bad("entry for tensor '", name, "' is not an object");
  for (auto f = v.begin(); f != v.end(); ++f)
    if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
      bad("tensor '", name, "' has an unknown field '", f.key(), "'");
  if (!v.contains("dtype") || !v["dtype"].is_string()) bad("tensor '", name, "' has no dtype");
  if (!v.contains("shape") || !v["shape"].is_array()) bad("tensor '", name, "' has no shape");
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
    bad("tensor '", name, "' has no data_offsets [begin, end]");
  Entry e;
  e.name = name;
  std::string dt = v["dtype"].get<std::string>();
  if (!parse_dtype(dt, e.type))
    bad("tensor '", name, "' has dtype ", dt, ", which is not supported (F32, F64, I64, BOOL, BF16, F16)");
  std::uint64_t numel = 1;
  for (const auto& d : v["shape"]) {
    std::uint64_t s;
    if (!as_u64(d, s) || s > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      bad("tensor '", name, "' has an invalid shape ", v["shape"].dump());
    if (s != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 16 / s)
      bad("tensor '", name, "' shape ", v["shape"].dump(), " is too large");
    numel *= s;
    e.shape.push_back(static_cast<std::int64_t>(s));
  }
  if (!as_u64(v["data_offsets"][0], e.begin) || !as_u64(v["data_offsets"][1], e.end) || e.begin > e.end)
    bad("tensor '", name, "' has invalid data_offsets ", v["data_offsets"].dump());
  if (e.end > data_size)
    bad("tensor '", name, "' data_offsets ", v["data_offsets"].dump(), " go past the end of the",
        " data section (", data_size, " bytes): the file is truncated");
  std::uint64_t want = numel * e.type.itemsize();
  if (e.end - e.begin != want)
    bad("tensor '", name, "' data_offsets ", v["data_offsets"].dump(), " hold ", e.end - e.begin,
        " bytes, but dtype ", dt, " and shape ", xgrad::shape_str(e.shape), " need ", want);
  return e;
}

// Sorts the entries by offset; they must tile the data section exactly: no overlap, no gap,
// nothing after.
void check_tiling(std::vector<Entry>& entries, std::size_t data_size, const Reject& bad) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t expected = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < expected) bad("tensors '", prev->name, "' and '", e.name, "' overlap in the data section");
    if (e.begin > expected)
      bad("gap of ", e.begin - expected, " bytes before tensor '", e.name, "' in the data section");
    expected = e.end;
    prev = &e;
  }
  if (expected != data_size)
    bad("the data section has ", data_size - expected, " bytes after the last tensor (corrupted file?)");
}

// Checks xgrad's data checksum, when the metadata has one; returns whether it was there.
bool verify_data_checksum(const Metadata& metadata, std::string_view data, const Reject& bad) {
  auto crc_it = metadata.find(kChecksumKey);
  if (crc_it == metadata.end()) return false;
  std::string have = hex32(crc32(data.data(), data.size()));
  if (have != crc_it->second)
    bad("checksum mismatch (", kChecksumKey, " says ", crc_it->second, ", the data has ", have,
        "): the file is corrupted");
  return true;
}

// A tensor holding entry e's bytes of the data section (a BOOL byte must be 0 or 1; F16
// widens to float32).
Tensor read_tensor(const Entry& e, std::string_view data, const Reject& bad) {
  Tensor t = xgrad::empty(e.shape, e.type.dtype);
  std::size_t nbytes = e.end - e.begin;
  if (nbytes > 0) {
    const char* src = data.data() + e.begin;
    if (e.type.half) {
      float* out = t.data_ptr<float>();
      for (std::size_t i = 0; i < nbytes / 2; ++i) {
        std::uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      return t;
    }
    if (e.type.dtype == DType::Bool) {
      for (std::size_t i = 0; i < nbytes; ++i)
        if (static_cast<unsigned char>(src[i]) > 1)
          bad("tensor '", e.name, "' (BOOL) holds the byte ", int(static_cast<unsigned char>(src[i])),
              " at element ", i, "; only 0 and 1 are valid");
    }
    std::memcpy(t.raw_data_ptr(), src, nbytes);
  }
  return t;
}

}  // namespace

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source) {
  const Reject bad{source};
  const auto [header_text, data] = split_header(bytes, bad);
  nlohmann::json header = nlohmann::json::parse(header_text, nullptr, false);
  if (header.is_discarded()) bad("the header is not valid JSON (corrupted file?)");
  if (!header.is_object()) bad("the header is not a JSON object");

  SafetensorsFile out;
  out.header_verified = verify_header_checksum(header, bad);
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") read_metadata(it.value(), out.metadata, bad);
    else entries.push_back(read_entry(it.key(), it.value(), data.size(), bad));
  }
  check_tiling(entries, data.size(), bad);
  out.checksum_verified = verify_data_checksum(out.metadata, data, bad);
  for (const Entry& e : entries) out.tensors.emplace_back(e.name, read_tensor(e, data, bad));
  return out;
}

}  // namespace xgrad::io
