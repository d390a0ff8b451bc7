// io/src/file.cpp: see xgrad/io/file.h.
#include "xgrad/io/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "xgrad/error.h"

namespace xgrad::io {
namespace {

std::atomic<std::int64_t> g_fail_after{-1};  // inject_write_failure_after

std::string errno_text() { return std::strerror(errno); }

// Closes an fd on scope exit unless released.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void inject_write_failure_after(std::int64_t bytes) { g_fail_after = bytes; }

void FileWriter::write(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  std::int64_t limit = g_fail_after.load();
  if (limit >= 0 && written_ + n > static_cast<std::uint64_t>(limit)) {
    std::size_t allowed = limit > static_cast<std::int64_t>(written_)
                              ? static_cast<std::size_t>(limit - static_cast<std::int64_t>(written_))
                              : 0;
    if (allowed > 0) write(p, allowed);
    xgrad::fail("write", "cannot write ", path_, ": injected failure after ", limit, " bytes");
  }
  while (n > 0) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      xgrad::fail("write", "cannot write ", path_, ": ", errno_text());
    }
    p += k;
    n -= static_cast<std::size_t>(k);
    written_ += static_cast<std::uint64_t>(k);
  }
}

void fsync_dir(const fs::path& dir) {
  fs::path d = dir.empty() ? fs::path(".") : dir;
  int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) xgrad::fail("fsync", "cannot open directory ", d.string(), ": ", errno_text());
  FdCloser closer{fd};
  if (::fsync(fd) != 0 && errno != EINVAL)  // some file systems cannot fsync directories
    xgrad::fail("fsync", "cannot fsync directory ", d.string(), ": ", errno_text());
}

void write_file_atomic(const fs::path& path, const std::function<void(FileWriter&)>& fill) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) xgrad::fail("write", "cannot create ", tmp.string(), ": ", errno_text());
  try {
    FdCloser closer{fd};
    FileWriter writer(fd, tmp.string());
    fill(writer);
    if (::fsync(fd) != 0) xgrad::fail("write", "cannot fsync ", tmp.string(), ": ", errno_text());
    closer.fd = -1;
    if (::close(fd) != 0) xgrad::fail("write", "cannot close ", tmp.string(), ": ", errno_text());
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      xgrad::fail("write", "cannot rename ", tmp.string(), " to ", path.string(), ": ", errno_text());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_dir(path.parent_path());
}

void write_file_atomic(const fs::path& path, std::string_view contents) {
  write_file_atomic(path, [&](FileWriter& w) { w.write(contents); });
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) xgrad::fail("read", path.string(), " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) xgrad::fail("read", "cannot open ", path.string(), ": ", errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) xgrad::fail("read", "error while reading ", path.string());
  return std::move(ss).str();
}

// ---------------------------------------------------------------- CRC-32 (slicing by 8)
// reference: the reflected polynomial 0xEDB88320, as zlib's crc32(); slicing-by-8 tables
// let one iteration consume 8 bytes.
namespace {
struct Crc32Tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  Crc32Tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
const Crc32Tables& crc_tables() {
  static const Crc32Tables tables;
  return tables;
}
}  // namespace

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc) {
  const auto& t = crc_tables().t;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  while (n >= 8) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);  // little-endian host (checked in safetensors.cpp)
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string hex32(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// ---------------------------------------------------------------- base64
namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string base64_encode(const std::vector<std::uint8_t>& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = bytes[i] << 16;
    if (rest == 2) v |= bytes[i + 1] << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += rest == 2 ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::vector<std::uint8_t> base64_decode(std::string_view text, const char* what) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) xgrad::fail("base64", what, ": length ", text.size(), " is not a multiple of 4");
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int pad = 0;
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      int d;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        d = 0;
        ++pad;
      } else {
        d = value(c);
        if (d < 0 || pad > 0) xgrad::fail("base64", what, ": invalid character at offset ", i + k);
      }
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<std::uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<std::uint8_t>(v));
  }
  return out;
}

}  // namespace xgrad::io
