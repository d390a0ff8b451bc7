// tests/interop/test_xtensor.cpp: <xgrad/xtensor.h>, xtensor arrays as tensors and back.
//
// Each way in (shared_ptr, std::move, borrow, copy) and out (to_xtensor) is checked for the
// three things that can go wrong: the values (read through both sides' own indexing, never
// through the same pointer arithmetic), whether memory is shared (a write on one side shows on
// the other, data pointers equal) and lifetime (the tensor or the adaptor outlives the other
// side's handle; ASan in the sanitizer build sees any dangling read). Layouts: row- and
// column-major, transposed, sliced with steps, stride 0, 0-d, negative strides (copied or
// refused). The last tests use xtensor-blas (xt::linalg::dot, OpenBLAS) as an independent
// reference for xgrad's matmul, transposed operands included.
#include <gtest/gtest.h>

#include <xtensor-blas/xlinalg.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xstrided_view.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include "error_message.h"
#include "xgrad/xgrad.h"
#include "xgrad/xtensor.h"

namespace xgrad {
namespace {

using testing::expect_error;

// 0, 1, 2, ... in row-major order
xt::xarray<float> iota_array(std::vector<std::size_t> shape) {
  xt::xarray<float> a = xt::arange<float>(static_cast<float>(xt::compute_size(shape)));
  a.reshape(shape);
  return a;
}

// t's element at a 2-D index, read through xgrad's own strides (select), not xtensor's.
double at(const Tensor& t, int64_t i, int64_t j) { return t.select(0, i).select(0, j).item(); }

// Every element of a 2-D tensor equals e(i, j).
template <class E>
void expect_same_2d(const Tensor& t, const E& e) {
  ASSERT_EQ(t.dim(), 2);
  ASSERT_EQ(static_cast<std::size_t>(t.size(0)), e.shape()[0]);
  ASSERT_EQ(static_cast<std::size_t>(t.size(1)), e.shape()[1]);
  for (int64_t i = 0; i < t.size(0); ++i)
    for (int64_t j = 0; j < t.size(1); ++j)
      EXPECT_EQ(at(t, i, j), static_cast<double>(e(i, j))) << "at (" << i << ", " << j << ")";
}

// ------------------------------------------------------------------ xtensor -> xgrad

TEST(XtensorToTensor, SharedPtrSharesMemoryBothWaysAndKeepsTheArrayAlive) {
  auto a = std::make_shared<xt::xarray<float>>(iota_array({2, 3}));
  const float* p = a->data();
  Tensor t = from_xtensor(a);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.dtype(), kFloat32);
  EXPECT_EQ(t.data_ptr<float>(), p);
  expect_same_2d(t, *a);

  (*a)(1, 2) = 50.f;  // numpy side -> tensor
  EXPECT_EQ(at(t, 1, 2), 50.0);
  t.select(0, 0).fill_(-1.0);  // tensor side -> numpy
  EXPECT_EQ((*a)(0, 1), -1.f);
  EXPECT_EQ((*a)(1, 0), 3.f);

  // a leaf that does not require grad, like torch.from_numpy's
  EXPECT_TRUE(t.is_leaf());
  EXPECT_FALSE(t.requires_grad());

  // the tensor (and a view of it) keeps the array alive after the last shared_ptr is gone
  Tensor row = t.select(0, 1);
  std::weak_ptr<xt::xarray<float>> watch = a;
  a.reset();
  t = Tensor();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{3, 4, 50}));
  row = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(XtensorToTensor, MoveTakesTheArrayOverWithoutACopy) {
  xt::xtensor<double, 2> a = xt::ones<double>({3, 2});
  a(2, 1) = 7.0;
  const double* p = a.data();
  Tensor t = from_xtensor(std::move(a));
  EXPECT_EQ(t.dtype(), kFloat64);
  EXPECT_EQ(t.data_ptr<double>(), p);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 1, 1, 1, 1, 7}));
}

TEST(XtensorToTensor, ExternalMemoryIsNotCountedAsXgradsOwn) {
  const int64_t before = memory_stats().current_bytes;
  Tensor t = from_xtensor(std::make_shared<xt::xarray<float>>(iota_array({256, 256})));
  EXPECT_EQ(memory_stats().current_bytes, before);
}

TEST(XtensorToTensor, ColumnMajorIsSharedWithColumnMajorStrides) {
  auto a = std::make_shared<xt::xarray<double, xt::layout_type::column_major>>(
      xt::xarray<double, xt::layout_type::column_major>::from_shape({3, 4}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) (*a)(i, j) = 10.0 * i + j;
  Tensor t = from_xtensor(a);
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.data_ptr<double>(), a->data());
  expect_same_2d(t, *a);
  // ops read it through its strides: row sums in row-major order
  EXPECT_EQ(t.sum(1).to_vector<double>(), (std::vector<double>{6, 46, 86}));
}

TEST(XtensorToTensor, BorrowTransposedSlicedAndSteppedViews) {
  xt::xarray<float> a = iota_array({4, 6});

  Tensor tt = from_xtensor(xt::transpose(a), borrow);  // (6, 4), strides (1, 6)
  EXPECT_EQ(tt.strides(), (Shape{1, 6}));
  EXPECT_EQ(tt.data_ptr<float>(), a.data());
  expect_same_2d(tt, xt::transpose(a));

  auto rows = xt::view(a, xt::range(1, 4, 2), xt::range(2, 6));  // rows 1, 3; cols 2..5
  Tensor ts = from_xtensor(rows, borrow);
  EXPECT_EQ(ts.shape(), (Shape{2, 4}));
  EXPECT_EQ(ts.strides(), (Shape{12, 1}));
  EXPECT_EQ(ts.data_ptr<float>(), a.data() + 8);
  expect_same_2d(ts, rows);

  auto cols = xt::strided_view(a, {xt::all(), xt::range(1, 6, 2)});  // every other column
  Tensor tc = from_xtensor(cols, borrow);
  EXPECT_EQ(tc.strides(), (Shape{6, 2}));
  expect_same_2d(tc, cols);

  // writes through the borrowed views land in the array
  ts.fill_(-2.0);
  EXPECT_EQ(a(3, 5), -2.f);
  EXPECT_EQ(a(2, 5), 17.f);
  tt.select(0, 0).mul_(10.0);  // column 0 of a
  EXPECT_EQ(a(1, 0), 60.f);
}

TEST(XtensorToTensor, BorrowZeroStridesIsABroadcastTensor) {
  std::vector<float> row = {1, 2, 3, 4};
  // xt::adapt wants the view's element count (12), not the buffer's
  auto wide = xt::adapt(row.data(), 3 * row.size(), xt::no_ownership(), std::vector<std::size_t>{3, 4},
                        std::vector<std::ptrdiff_t>{0, 1});
  Tensor t = from_xtensor(wide, borrow);
  EXPECT_EQ(t.shape(), (Shape{3, 4}));
  EXPECT_EQ(t.strides(), (Shape{0, 1}));
  EXPECT_EQ(t.sum(0).to_vector<float>(), (std::vector<float>{3, 6, 9, 12}));
  row[2] = 30.f;
  EXPECT_EQ(at(t, 2, 2), 30.0);
}

TEST(XtensorToTensor, ZeroDimensional) {
  auto a = std::make_shared<xt::xarray<float>>(3.5f);
  ASSERT_EQ(a->dimension(), 0u);
  Tensor t = from_xtensor(a);
  EXPECT_EQ(t.dim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.item(), 3.5);
  t.fill_(-1.0);
  EXPECT_EQ((*a)(), -1.f);
  EXPECT_EQ(xgrad::tensor(xt::xarray<double>(2.25)).item(), 2.25);
}

TEST(XtensorToTensor, EmptyArrays) {
  Tensor t = from_xtensor(std::make_shared<xt::xarray<float>>(xt::xarray<float>::from_shape({0, 3})));
  EXPECT_EQ(t.shape(), (Shape{0, 3}));
  EXPECT_EQ(t.sum().item(), 0.0);
}

TEST(XtensorToTensor, Int64AndBoolAreShared) {
  auto ids = std::make_shared<xt::xarray<int64_t>>(xt::xarray<int64_t>{{4, 0}, {2, 9}});
  Tensor t = from_xtensor(ids);
  EXPECT_EQ(t.dtype(), kInt64);
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{4, 0, 2, 9}));
  EXPECT_EQ(t.data_ptr<int64_t>(), ids->data());

  auto mask = std::make_shared<xt::xarray<bool>>(xt::xarray<bool>{true, false, true});
  Tensor m = from_xtensor(mask);
  EXPECT_EQ(m.dtype(), kBool);
  Tensor x = xgrad::tensor({1.0, 2.0, 3.0});
  EXPECT_EQ(x.masked_fill(m, 0.0).to_vector<float>(), (std::vector<float>{0, 2, 0}));
}

TEST(XtensorToTensor, NegativeStridesAreRefusedWhenSharedAndCopiedOnRequest) {
  xt::xarray<float> a = iota_array({3, 4});
  auto flipped = xt::flip(a, 0);  // a strided view with a negative row stride
  ASSERT_LT(flipped.strides()[0], 0);
  expect_error([&] { from_xtensor(flipped, borrow); },
               {"from_xtensor", "[3, 4]", "[-4, 1]", "negative", "xgrad::tensor"});
  Tensor copy = xgrad::tensor(flipped);
  EXPECT_TRUE(copy.is_contiguous());
  expect_same_2d(copy, flipped);
  a(0, 0) = 100.f;  // a copy: not shared
  EXPECT_EQ(at(copy, 2, 0), 0.0);
}

TEST(XtensorToTensor, CopyEvaluatesLazyExpressionsAndConvertsIntegerTypes) {
  xt::xarray<float> a = iota_array({2, 3});
  Tensor t = xgrad::tensor(2.0f * xt::transpose(a) + 1.0f);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 7, 3, 9, 5, 11}));
  // a long long array is int64 data: copied (or shared) as int64
  xt::xarray<long long> ll = {{1, 2}, {3, 4}};
  EXPECT_EQ(xgrad::tensor(ll).dtype(), kInt64);
  EXPECT_EQ(xgrad::tensor(ll).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  // an explicit cast makes an int32 array usable
  xt::xarray<int32_t> i32 = {5, 6};
  EXPECT_EQ(xgrad::tensor(xt::cast<int64_t>(i32)).to_vector<int64_t>(), (std::vector<int64_t>{5, 6}));
}

TEST(XtensorToTensor, TypesXgradLacksThrowNamingTypeAndShape) {
  xt::xarray<int32_t> i32 = xt::zeros<int32_t>({2, 3});
  expect_error([&] { from_xtensor(i32, borrow); }, {"from_xtensor", "int32", "[2, 3]", "xt::cast"});
  expect_error([&] { from_xtensor(std::make_shared<xt::xarray<int32_t>>(i32)); }, {"int32", "[2, 3]"});
  expect_error([&] { xgrad::tensor(xt::xarray<uint8_t>::from_shape({4})); }, {"tensor", "uint8", "[4]"});
  expect_error([&] { xgrad::tensor(xt::xarray<unsigned long>::from_shape({1, 2})); }, {"uint64", "[1, 2]"});
}

// ------------------------------------------------------------------ xgrad -> xtensor

TEST(TensorToXtensor, SharesMemoryWithAnyStrides) {
  Tensor t = arange(12, kFloat32).view({3, 4});
  auto v = to_xtensor<float>(t.t());  // (4, 3), strides (1, 4)
  ASSERT_EQ(v.dimension(), 2u);
  EXPECT_EQ(v.shape()[0], 4u);
  EXPECT_EQ(v.shape()[1], 3u);
  EXPECT_EQ(v.data(), t.data_ptr<float>());
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_EQ(v(i, j), at(t, j, i));
  v(3, 1) = -5.f;  // xtensor side -> tensor
  EXPECT_EQ(at(t, 1, 3), -5.0);
  t.fill_(2.0);  // tensor side -> xtensor
  EXPECT_EQ(v(0, 0), 2.f);

  Tensor s = arange(20, kFloat64).view({4, 5}).slice(1, 1, 5, 2);  // cols 1, 3
  auto vs = to_xtensor<double>(s);
  xt::xarray<double> copy = vs;  // a copy in row-major order
  EXPECT_EQ(copy, (xt::xarray<double>{{1, 3}, {6, 8}, {11, 13}, {16, 18}}));
}

TEST(TensorToXtensor, ExpandedAndSizeOneDimsBroadcastCorrectlyInXtensor) {
  // a (1, 3) view whose row stride is 5: xtensor must see stride 0 there to broadcast it
  Tensor base = arange(10, kFloat32).view({2, 5});
  Tensor row = base.slice(0, 1, 2).slice(1, 0, 3);  // [[5, 6, 7]], strides (5, 1)
  auto r = to_xtensor<float>(row);
  xt::xarray<float> sum = r + xt::xarray<float>{{0, 0, 0}, {10, 20, 30}};
  EXPECT_EQ(sum, (xt::xarray<float>{{5, 6, 7}, {15, 26, 37}}));

  Tensor wide = row.expand({4, 3});  // stride 0
  auto w = to_xtensor<float>(wide);
  EXPECT_EQ(xt::xarray<float>(xt::sum(w, {0})), (xt::xarray<float>{20, 24, 28}));
}

TEST(TensorToXtensor, KeepsTheStorageAliveAndHandlesZeroD) {
  auto v = [] {
    Tensor t = full({2, 2}, 1.5);
    return to_xtensor<float>(t);  // the tensor is gone after this
  }();
  EXPECT_EQ(xt::xarray<float>(v), (xt::xarray<float>{{1.5, 1.5}, {1.5, 1.5}}));

  auto s = to_xtensor<double>(scalar_tensor(4.0, kFloat64));
  EXPECT_EQ(s.dimension(), 0u);
  EXPECT_EQ(s(), 4.0);
}

TEST(TensorToXtensor, RefusesWrongDtypeAndTensorsThatRequireGrad) {
  Tensor t = ones({2, 3});
  expect_error([&] { to_xtensor<double>(t); }, {"data_ptr", "float64", "float32", "[2, 3]"});
  Tensor w = ones({2, 3}).requires_grad_();
  expect_error([&] { to_xtensor<float>(w); }, {"to_xtensor", "requires grad", "[2, 3]", "detach"});
  EXPECT_EQ(to_xtensor<float>(w.detach())(1, 2), 1.f);
  expect_error([&] { to_xtensor<float>(Tensor()); }, {"undefined"});
}

TEST(RoundTrip, XtensorTensorXtensorIsTheSameMemoryAndValues) {
  auto a = std::make_shared<xt::xarray<float>>(iota_array({2, 3, 4}));
  Tensor t = from_xtensor(a);
  auto back = to_xtensor<float>(t.permute({2, 0, 1}));
  EXPECT_EQ(back, xt::transpose(*a, {2, 0, 1}));
  EXPECT_EQ(back.data(), a->data());

  Tensor u = randn({3, 5});
  Tensor again = from_xtensor(xt::xarray<float>(to_xtensor<float>(u)));
  EXPECT_NE(again.data_ptr<float>(), u.data_ptr<float>());  // xarray(...) copied
  EXPECT_EQ(again.to_vector<float>(), u.to_vector<float>());
}

TEST(Autograd, ATensorFromXtensorIsALeafThatCanBeTrained) {
  auto a = std::make_shared<xt::xarray<float>>(xt::xarray<float>{{1, -2}, {3, 0.5}});
  Tensor w = from_xtensor(a).requires_grad_();
  Tensor loss = (w * w).sum();
  loss.backward();
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(xt::xarray<float>(to_xtensor<float>(w.grad())), 2.0f * *a);
}

// ------------------------------------------------------------------ matmul vs xtensor-blas

struct MatmulCase {
  std::size_t m, k, n;
  bool a_transposed, b_transposed;  // operand stored (k, m) / (n, k) and seen transposed
};

class MatmulVsXtensorBlas : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulVsXtensorBlas, SameProductAsLinalgDot) {
  const MatmulCase c = GetParam();
  xt::random::seed(7 + c.m + 31 * c.k + 977 * c.n);
  // stored layouts; A and B are what gets multiplied
  auto a_store = std::make_shared<xt::xarray<float>>(xt::random::randn<float>(
      c.a_transposed ? std::vector<std::size_t>{c.k, c.m} : std::vector<std::size_t>{c.m, c.k}));
  auto b_store = std::make_shared<xt::xarray<float>>(xt::random::randn<float>(
      c.b_transposed ? std::vector<std::size_t>{c.n, c.k} : std::vector<std::size_t>{c.k, c.n}));
  xt::xarray<float> A = c.a_transposed ? xt::xarray<float>(xt::transpose(*a_store)) : *a_store;
  xt::xarray<float> B = c.b_transposed ? xt::xarray<float>(xt::transpose(*b_store)) : *b_store;
  xt::xarray<float> expected = xt::linalg::dot(A, B);  // OpenBLAS sgemm on contiguous copies

  Tensor a = from_xtensor(a_store), b = from_xtensor(b_store);
  if (c.a_transposed) a = a.t();  // xgrad sees the transposed strides, no copy
  if (c.b_transposed) b = b.t();
  Tensor got = matmul(a, b);
  ASSERT_EQ(got.shape(), (Shape{int64_t(c.m), int64_t(c.n)}));
  auto g = to_xtensor<float>(got);
  const float tol = 1e-5f * static_cast<float>(c.k);  // inputs ~N(0,1): sums of k terms
  EXPECT_TRUE(xt::allclose(g, expected, 1e-5, tol)) << "max |diff| = " << xt::amax(xt::abs(g - expected))();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulVsXtensorBlas,
    ::testing::Values(MatmulCase{3, 4, 5, false, false}, MatmulCase{1, 7, 1, false, false},
                      MatmulCase{64, 33, 17, false, false}, MatmulCase{64, 33, 17, true, false},
                      MatmulCase{17, 100, 29, false, true}, MatmulCase{40, 128, 96, true, true},
                      MatmulCase{130, 65, 3, true, true}),
    [](const ::testing::TestParamInfo<MatmulCase>& info) {
      const MatmulCase& c = info.param;
      return std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) +
             (c.a_transposed ? "_At" : "") + (c.b_transposed ? "_Bt" : "");
    });

TEST(MatmulVsXtensorBlasDouble, Float64MatrixVector) {
  xt::random::seed(3);
  auto a = std::make_shared<xt::xarray<double>>(xt::random::randn<double>({9, 12}));
  auto x = std::make_shared<xt::xarray<double>>(xt::random::randn<double>({12}));
  xt::xarray<double> expected = xt::linalg::dot(*a, *x);
  Tensor got = matmul(from_xtensor(a), from_xtensor(x));
  EXPECT_TRUE(xt::allclose(to_xtensor<double>(got), expected, 1e-12, 1e-12));
}

}  // namespace
}  // namespace xgrad
