// xgrad/io/file.h: the file helpers under xgrad's checkpoints (xgrad/io/safetensors.h):
// crash-safe file writes (temp file + fsync + rename + directory fsync), CRC-32, base64.
//
// Every function throws xgrad::Error naming the file and the failing system call, so a
// command-line tool can print it as is.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace xgrad::io {

namespace fs = std::filesystem;

// An open file being written: write() retries short writes and throws on any error.
class FileWriter {
 public:
  FileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void write(const void* data, std::size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  std::uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
  std::uint64_t written_ = 0;
};

// Writes `path` so that a crash at any moment leaves either the old file or the complete new
// one: `fill` writes into "<path>.tmp.<pid>", which is fsynced, renamed over `path`, and the
// directory is fsynced. If `fill` throws (or any step fails) the temp file is removed, the
// old file is untouched and the exception propagates.
void write_file_atomic(const fs::path& path, const std::function<void(FileWriter&)>& fill);
void write_file_atomic(const fs::path& path, std::string_view contents);

// fsync a directory (after a rename inside it), so the new entry survives a power loss.
void fsync_dir(const fs::path& dir);

// The whole file; throws naming the file when it cannot be read.
std::string read_file(const fs::path& path);

// Test hook: the next writes through FileWriter fail after this many bytes in all (-1 = off).
// Lets tests simulate a full disk or a crash in the middle of a write.
void inject_write_failure_after(std::int64_t bytes);

// CRC-32 (IEEE 802.3, zlib's crc32 / Python's zlib.crc32); chain by passing the last value.
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0);
std::string hex32(std::uint32_t v);  // 8 lower-case hex digits

// Standard base64 (RFC 4648, with padding). decode throws on invalid input.
std::string base64_encode(const std::vector<std::uint8_t>& bytes);
std::vector<std::uint8_t> base64_decode(std::string_view text, const char* what);

}  // namespace xgrad::io
