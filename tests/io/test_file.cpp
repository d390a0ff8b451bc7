// tests/io/test_file.cpp: FileWriter, the writer that write_file_atomic hands its `fill`:
// bytes_written() counts the bytes that reached the file, whole writes and partial ones, and
// the file holds exactly those bytes.
#include <gtest/gtest.h>

#include <string>

#include "train/train_test_util.h"
#include "xgrad/io/file.h"

using namespace xgrad;
using namespace xgrad::io;
using train_test::slurp;
using train_test::TempDir;

namespace {

TEST(FileWriter, BytesWrittenCountsEveryWrite) {
  TempDir tmp;
  const fs::path p = tmp / "out.bin";
  std::vector<std::uint64_t> seen;
  write_file_atomic(p, [&](FileWriter& w) {
    seen.push_back(w.bytes_written());
    w.write("header");
    seen.push_back(w.bytes_written());
    const std::string big(70000, 'x');  // larger than one pipe or page: one call, many bytes
    w.write(big.data(), big.size());
    seen.push_back(w.bytes_written());
    w.write("", 0);
    seen.push_back(w.bytes_written());
    w.write(std::string_view("\0\1", 2));  // bytes, not a C string
    seen.push_back(w.bytes_written());
  });
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 6, 70006, 70006, 70008}));
  EXPECT_EQ(fs::file_size(p), 70008u);
  const std::string text = slurp(p);
  EXPECT_EQ(text.substr(0, 6), "header");
  EXPECT_EQ(text.substr(70006), std::string("\0\1", 2));
}

TEST(FileWriter, BytesWrittenStopsWhereAWriteFailed) {
  TempDir tmp;
  const fs::path p = tmp / "out.bin";
  std::uint64_t at_failure = 0;
  std::string path_seen;
  inject_write_failure_after(10);
  EXPECT_THROW(write_file_atomic(p,
                                 [&](FileWriter& w) {
                                   path_seen = w.path();
                                   w.write("0123");
                                   try {
                                     w.write("456789abcdef");  // only "456789" fits under the limit
                                   } catch (const Error&) {
                                     at_failure = w.bytes_written();
                                     throw;
                                   }
                                 }),
               Error);
  inject_write_failure_after(-1);
  EXPECT_EQ(at_failure, 10u);
  EXPECT_NE(path_seen.find(".tmp."), std::string::npos) << path_seen;  // it wrote the temp file
  EXPECT_FALSE(fs::exists(p));
}

}  // namespace
