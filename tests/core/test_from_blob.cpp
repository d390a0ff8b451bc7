// tests/core/test_from_blob.cpp: from_blob (tensor.h), memory xgrad did not allocate seen as a
// tensor without a copy: values through the given strides, writes shared both ways, the owner
// kept alive exactly as long as a tensor uses the memory, clear errors for bad geometry.
// <xgrad/xtensor.h> builds on it (tests/interop/).
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <vector>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_error;

TEST(FromBlob, SharesMemoryThroughTheGivenStridesAndKeepsTheOwnerAlive) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{0, 1, 2, 3, 4, 5});
  const int64_t before = memory_stats().current_bytes;
  // the (2, 3) buffer seen transposed: (3, 2) with strides (1, 3)
  Tensor t = from_blob(buffer->data(), {3, 2}, {1, 3}, kFloat32, buffer);
  EXPECT_EQ(memory_stats().current_bytes, before);  // not xgrad's memory
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(t.requires_grad());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.contiguous().sum(0).to_vector<float>(), (std::vector<float>{3, 12}));

  (*buffer)[4] = 40.f;
  EXPECT_EQ(t.select(0, 1).select(0, 1).item(), 40.0);
  t.select(1, 0).fill_(-1.0);  // the first row of the buffer
  EXPECT_EQ((*buffer)[2], -1.f);
  const uint64_t version = t.version();
  t.mul_(2.0);
  EXPECT_GT(t.version(), version);

  std::weak_ptr<std::vector<float>> watch = buffer;
  Tensor column = t.select(1, 1);  // a view shares the storage, and so the owner
  buffer.reset();
  t = Tensor();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(column.to_vector<float>(), (std::vector<float>{6, 80, 10}));
  column = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(FromBlob, BorrowedMemoryZeroDAndStrideZero) {
  double value = 2.5;
  Tensor s = from_blob(&value, {}, {}, kFloat64);  // no owner: borrowed
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), 2.5);
  int64_t ids[3] = {7, 8, 9};
  Tensor wide = from_blob(ids, {2, 3}, {0, 1}, kInt64);
  EXPECT_EQ(wide.to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(from_blob(nullptr, {0, 4}, {4, 1}, kFloat32).numel(), 0);  // nothing addressed
}

TEST(FromBlob, BadGeometryThrowsNamingShapeAndStrides) {
  float data[4] = {};
  expect_error(
      [&] {
        from_blob(data, {2, 2}, {-2, 1}, kFloat32);
      },
      {"from_blob", "negative stride", "[-2, 1]", "[2, 2]"});
  expect_error([&] { from_blob(data, {2, 2}, {2}, kFloat32); }, {"from_blob", "[2, 2]", "[2]", "rank"});
  expect_error([&] { from_blob(data, {2, -1}, {1, 1}, kFloat32); }, {"from_blob", "negative size"});
  expect_error([&] { from_blob(nullptr, {2}, {1}, kFloat32); }, {"from_blob", "null", "[2]"});
  const int64_t huge = std::numeric_limits<int64_t>::max();
  expect_error([&] { from_blob(data, {2, 2}, {huge, 1}, kFloat32); }, {"from_blob", "overflows"});
  expect_error([&] { from_blob(data, {2}, {int64_t(1) << 61}, kFloat32); }, {"from_blob", "2^63 bytes"});
}

}  // namespace
}  // namespace xgrad
