// tests/core/test_shape_overflow.cpp: shapes whose element count, byte count or strides do
// not fit in int64 throw xgrad::Error naming the shape instead of wrapping around (a wrapped
// zeros({2^32, 2^32}) would have numel() == 0); the views check the same arithmetic (view,
// reshape, flatten, expand, slice, unsqueeze).
#include <gtest/gtest.h>

#include <string>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::error_of;

constexpr int64_t k32 = int64_t{1} << 32;

TEST(ShapeOverflow, CreationThrowsNamingTheShape) {
  std::string m = error_of([] { zeros({k32, k32}); });
  EXPECT_MESSAGE_HAS(m, "[4294967296, 4294967296]");
  EXPECT_MESSAGE_HAS(m, "overflow");
  // three factors, the product wraps to a small positive number without the check
  m = error_of([] { empty({int64_t{1} << 40, int64_t{1} << 40, 16}, kFloat32); });
  EXPECT_MESSAGE_HAS(m, "[1099511627776, 1099511627776, 16]");
  // the element count fits, the byte count does not (2^62 float64 = 2^65 bytes)
  m = error_of([] { empty({int64_t{1} << 62}, kFloat64); });
  EXPECT_MESSAGE_HAS(m, "[4611686018427387904]");
  EXPECT_MESSAGE_HAS(m, "bytes");
  // a zero anywhere makes the product 0 whatever the other sizes: no overflow, no error
  EXPECT_EQ(zeros({0, k32, k32}).numel(), 0);
  EXPECT_EQ(numel_of({k32, 0, k32}), 0);
  EXPECT_MESSAGE_HAS(error_of([] { numel_of({k32, k32}); }), "[4294967296, 4294967296]");
  EXPECT_MESSAGE_HAS(error_of([] { contiguous_strides({3, k32, k32}); }), "[3, 4294967296, 4294967296]");
}

TEST(ShapeOverflow, AllocationFailureNamesTheShape) {
#if defined(XGRAD_ADDRESS_SANITIZER)
  GTEST_SKIP() << "AddressSanitizer aborts on a 4 PiB request instead of returning null";
#endif
  // 2^50 float32 elements (4 PiB): the element and byte counts fit, the allocation cannot
  std::string m = error_of([] { empty({int64_t{1} << 25, int64_t{1} << 25}, kFloat32); });
  EXPECT_MESSAGE_HAS(m, "[33554432, 33554432]");
  EXPECT_MESSAGE_HAS(m, "float32");
  EXPECT_MESSAGE_HAS(m, "out of memory");
}

TEST(ShapeOverflow, ViewsCheckTheirArithmetic) {
  Tensor x = zeros({1, 1});
  // expand to a shape whose element count overflows
  std::string m = error_of([&] { x.expand({k32, k32}); });
  EXPECT_MESSAGE_HAS(m, "[4294967296, 4294967296]");
  // view/reshape with a -1 next to sizes whose product overflows
  Tensor y = zeros({4});
  m = error_of([&] { y.view({k32, k32, -1}); });
  EXPECT_MESSAGE_HAS(m, "4294967296");
  m = error_of([&] { y.reshape({k32, k32, 0, -1}); });  // 0 with -1: not inferable, no crash
  EXPECT_NE(m, "<no error>");
  // expand then flatten: the merged size overflows
  Tensor e = zeros({1, 1, 1}).expand({k32, 2, 3});
  EXPECT_EQ(e.numel(), 6 * k32);
  EXPECT_MESSAGE_HAS(error_of([&] { e.expand({k32, k32, 2, 3}); }), "overflow");
  // a slice with a huge step has one element and keeps a valid stride
  Tensor a = arange(0, 10, 1, kFloat32);
  Tensor s = a.slice(0, 3, 10, int64_t{1} << 62);
  ASSERT_EQ(s.shape(), (Shape{1}));
  EXPECT_EQ(s.item(), 3.0);
  Tensor s2 = a.slice(0, 1, 10, 4);  // 1, 5, 9
  EXPECT_EQ(s2.to_vector<float>(), (std::vector<float>{1, 5, 9}));
  EXPECT_EQ(s2.stride(0), 4);
  // an empty view may have sizes whose strides do not fit: no element is addressed
  // (found by fuzz/fuzz_shapes: expand to [7, 5, 0], then view as [2, 2^32, 2^32, 0, 0])
  Tensor z = zeros({1, 1}).expand({7, 5, 0});
  Tensor zv = z.view({2, k32, k32, 0, 0});
  EXPECT_EQ(zv.numel(), 0);
  EXPECT_EQ(zv.shape(), (Shape{2, k32, k32, 0, 0}));
  EXPECT_EQ(zv.contiguous().numel(), 0);  // the copy kernels skip it before any stride product
  EXPECT_EQ(zv.reshape({0}).numel(), 0);
  EXPECT_EQ(zv.slice(1, k32, k32).numel(), 0);  // start * stride = 2^64: not addressed
  EXPECT_EQ(zv.select(0, 1).shape(), (Shape{k32, k32, 0, 0}));
  // negative sizes in a hand-made view are refused
  EXPECT_MESSAGE_HAS(error_of([&] { make_view(a, {-2}, {1}, 0); }), "[-2]");
}

}  // namespace
}  // namespace xgrad
