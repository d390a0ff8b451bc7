// tests/core/test_reduce.cpp: values, tie rules, gradients and errors of the reductions,
// compared with torch (tests/fixtures/elementwise_reduce.txt from gen_elementwise_reduce.py).
// Gradients by finite differences are in gradcheck_rows_reduce.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/elementwise_reduce.txt");
  return f;
}

Tensor leaf(const std::string& name) { return fx().get(name).clone().detach().requires_grad_(); }

// The generator's formula input: x[i] = ((i * 7919) % 1000) / 1000 - 0.3 as float32.
Tensor formula(const Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(numel_of(shape)));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<double>((static_cast<int64_t>(i) * 7919) % 1000) / 1000.0 - 0.3);
  return from_vector(v, shape);
}

// ---------------------------------------------------------------- torch fixtures

class VarChain : public ::testing::TestWithParam<std::string> {};

TEST_P(VarChain, AllDimsAndKeepdimMatchTorch) {
  const std::string c = "var." + GetParam();
  const double tol = GetParam() == "f64" ? 1e-12 : 1e-5;
  Tensor x = leaf(c + ".x"), w1 = leaf(c + ".w1"), w2 = leaf(c + ".w2");
  Tensor out =
      x.var() * 2.0 + (x.var({1}, false) * w1).sum() + (x.var({0, -1}, true, true).reshape({5}) * w2).sum();
  expect_close(out, fx().get(c + ".out"), tol, tol, "out");
  out.backward();
  expect_close(x.grad(), fx().get(c + ".x.grad"), tol, tol, "x.grad");
  expect_close(w1.grad(), fx().get(c + ".w1.grad"), tol, tol, "w1.grad");
}
INSTANTIATE_TEST_SUITE_P(Dtypes, VarChain, ::testing::Values("f64", "f32"));

TEST(Reduce, MaxAllSplitsTheGradientAmongTiesLikeTorch) {
  Tensor x = leaf("maxall.x");  // the max 5 appears three times, the min -3 once
  Tensor out = x.max() * 3.0 + min(x);
  expect_close(out, fx().get("maxall.out"), 0, 1e-12, "out");
  EXPECT_EQ(x.max().grad_fn_name(), "MaxBackward1");
  out.backward();
  expect_close(x.grad(), fx().get("maxall.x.grad"), 0, 1e-12, "x.grad");
}

TEST(Reduce, MaxMinAlongADimPickTheFirstIndexLikeTorch) {
  Tensor x = leaf("maxdim.x"), w = leaf("maxdim.w");
  ValuesIndices m1 = max(x, 1);
  ValuesIndices m2 = min(x, -1, true);
  Tensor out = (m1.values * w).sum() + m2.values.sum() * 2.0;
  expect_close(out, fx().get("maxdim.out"), 0, 1e-12, "out");
  expect_close(m1.indices, fx().get("maxdim.out1"), 0, 0, "max indices");
  expect_close(m2.indices, fx().get("maxdim.out2"), 0, 0, "min indices");
  expect_close(m1.values, fx().get("maxdim.out3"), 0, 0, "max values");
  expect_close(m2.values, fx().get("maxdim.out4"), 0, 0, "min values");
  expect_close(argmax(x, 2), fx().get("maxdim.out5"), 0, 0, "argmax(2)");
  expect_close(argmin(x, 0), fx().get("maxdim.out6"), 0, 0, "argmin(0)");
  expect_close(argmax(x), fx().get("maxdim.out7"), 0, 0, "argmax()");
  EXPECT_EQ(m1.indices.dtype(), kInt64);
  EXPECT_EQ(m1.values.grad_fn_name(), "MaxBackward0");
  EXPECT_FALSE(m1.indices.requires_grad());
  out.backward();
  expect_close(x.grad(), fx().get("maxdim.x.grad"), 0, 1e-12, "x.grad");
  expect_close(w.grad(), fx().get("maxdim.w.grad"), 0, 1e-12, "w.grad");
}

TEST(Reduce, AmaxSplitsTheGradientAmongTiesLikeTorch) {
  Tensor x = leaf("amax.x"), w = leaf("amax.w");
  Tensor out = (amax(x, {0, 1}) * w).sum() + amax(x, {-1}, true).sum();
  expect_close(out, fx().get("amax.out"), 0, 1e-12, "out");
  EXPECT_EQ(amax(x, {0}).grad_fn_name(), "AmaxBackward0");
  out.backward();
  expect_close(x.grad(), fx().get("amax.x.grad"), 0, 1e-12, "x.grad");
}

TEST(Reduce, SumMeanOverDimsMatchTorch) {
  Tensor x = leaf("sums.x"), w = leaf("sums.w");
  Tensor out = (x.sum({0, -1}) * w).sum() + x.sum({1}, true).mean() + x.sum() * 0.5 + x.mean({0, 2}).sum();
  expect_close(out, fx().get("sums.out"), 1e-12, 1e-12, "out");
  out.backward();
  expect_close(x.grad(), fx().get("sums.x.grad"), 1e-12, 1e-12, "x.grad");
  expect_close(w.grad(), fx().get("sums.w.grad"), 1e-12, 1e-12, "w.grad");
}

TEST(Reduce, LongFloat32RowsMatchTorchClosely) {
  Tensor x = formula({3, 100000});
  expect_close(x.sum({1}), fx().get("longsum.out"), 1e-6, 0, "sum(dim=1)");
  expect_close(x.sum({0}).slice(0, 0, 1000), fx().get("longsum.out1"), 1e-6, 1e-6, "sum(dim=0)");
  expect_close(x.sum(), fx().get("longsum.out2"), 1e-6, 0, "sum()");
  expect_close(x.mean({-1}), fx().get("longsum.out3"), 1e-6, 0, "mean(dim=-1)");
  expect_close(x.var(Shape{1}), fx().get("longsum.out4"), 1e-5, 0, "var(dim=1)");
  Tensor lead = formula({4096, 96});  // the bias-gradient shape (B*T, C) -> (C)
  expect_close(lead.sum({0}), fx().get("leadsum.out"), 1e-6, 1e-5, "leading sum");
  expect_close(lead.mean({0}), fx().get("leadsum.out1"), 1e-6, 1e-8, "leading mean");
}

// Every float32 sum path (short rows, long blocked rows with tails, leading dims with a row
// count that is not a multiple of 8, middle dims) against the same sum done in float64.
TEST(Reduce, Float32SumPathsMatchAFloat64Reference) {
  const std::vector<std::pair<Shape, Shape>> cases{
      {{7, 5}, {1}},       {{3, 256}, {1}}, {{2, 257}, {-1}},     {{2, 1000}, {1}},
      {{1, 70001}, {1}},   {{13, 33}, {0}}, {{1031, 17}, {0}},    {{4, 19, 6}, {1}},
      {{5, 6, 7}, {0, 2}}, {{3, 4, 5}, {}}, {{2, 300, 3}, {0, 1}}};
  for (const auto& [shape, dims] : cases) {
    Tensor x = randn(shape) + 0.25;
    Tensor got = x.sum(dims);
    Tensor want = x.to(kFloat64).sum(dims).to(kFloat32);
    expect_close(got, want, 2e-6, 1e-5, "sum " + shape_str(shape) + " over " + shape_str(dims));
  }
}

// ---------------------------------------------------------------- behaviour

TEST(Reduce, ShapesWithKeepdimAndNegativeDims) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(x.sum({1}).shape(), (Shape{2, 4}));
  EXPECT_EQ(x.sum({-1}, true).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.sum({0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(x.sum().shape(), Shape{});
  EXPECT_EQ(x.mean({-3, -1}).shape(), (Shape{3}));
  EXPECT_EQ(x.var({1}, true, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(max(x, 2).indices.shape(), (Shape{2, 3}));
  EXPECT_EQ(argmax(x, -2, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(amax(x, {0, 1}).shape(), (Shape{4}));
}

TEST(Reduce, NonContiguousAndExpandedInputs) {
  Tensor base = arange(0.0, 12.0, 1.0, kFloat32).view({3, 4});
  Tensor t = base.t();  // (4, 3)
  EXPECT_EQ(t.sum({1}).to_vector<float>(), (std::vector<float>{12, 15, 18, 21}));
  EXPECT_EQ(t.sum({0}).to_vector<float>(), (std::vector<float>{6, 22, 38}));
  EXPECT_EQ(max(t, 0).indices.to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 3}));
  Tensor e = tensor({1.0, 2.0}).view({2, 1}).expand({2, 5});
  EXPECT_EQ(e.sum({1}).to_vector<float>(), (std::vector<float>{5, 10}));
  EXPECT_EQ(e.sum().item(), 15.0);
}

TEST(Reduce, ExpandedDimsAreFoldedInNotCopied) {
  // stride-0 dims, reduced (sum multiplies by their size) or kept (broadcast into the output)
  Tensor e = tensor({1.0, 2.0}).view({2, 1}).expand({2, 5});
  EXPECT_EQ(e.sum({0}).to_vector<float>(), std::vector<float>(5, 3.0f));
  EXPECT_EQ(e.sum({0}, true).shape(), (Shape{1, 5}));
  EXPECT_EQ(e.mean({1}).to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(amax(e, {0}).to_vector<float>(), std::vector<float>(5, 2.0f));
  EXPECT_EQ(max(e).item(), 2.0);
  Tensor s = scalar_tensor(0.5, kFloat64).expand({3, 4, 2});
  EXPECT_EQ(sum_to(s, {4, 1}).to_vector<double>(), std::vector<double>(4, 3.0));
  EXPECT_EQ(s.sum({0, 2}).to_vector<double>(), std::vector<double>(4, 3.0));
  EXPECT_EQ(tensor({3}).expand({4}).sum().item(), 12.0);  // int64
  Tensor mixed = randn({3, 1, 4}).expand({3, 5, 4});      // reduce a real and a broadcast dim
  expect_close(mixed.sum({0, 1}), mixed.contiguous().sum({0, 1}), 1e-6, 1e-6, "mixed");
  expect_close(mixed.var({1, 2}), mixed.contiguous().var({1, 2}), 1e-6, 1e-6, "var");
}

TEST(Reduce, ZeroDimAndEmptyTensors) {
  Tensor s = scalar_tensor(3.0);
  EXPECT_EQ(s.sum().item(), 3.0);
  EXPECT_EQ(s.sum({0}).item(), 3.0);
  EXPECT_EQ(max(s, -1).values.item(), 3.0);
  EXPECT_EQ(max(s, 0).indices.item(), 0.0);
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.sum({0}).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(e.sum({1}).shape(), (Shape{0}));
  EXPECT_TRUE(std::isnan(e.mean().item()));
}

TEST(Reduce, Int64AndBoolSums) {
  Tensor i = fx().get("int64.i");
  EXPECT_EQ(i.sum().dtype(), kInt64);
  expect_close(i.sum(), fx().get("int64.out2"), 0, 0, "sum");
  expect_close(i.sum({0}), fx().get("int64.out3"), 0, 0, "sum(0)");
  Tensor hits = (i == 5.0).sum();  // counting with a bool mask, as in accuracy
  EXPECT_EQ(hits.dtype(), kInt64);
  expect_close(hits, fx().get("int64.out4"), 0, 0, "(i == 5).sum()");
  EXPECT_EQ(max(i).item(), 7.0);
  EXPECT_EQ(argmax(i, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(Reduce, NaNPropagatesThroughMaxAndArgmax) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector(std::vector<double>{1.0, nan, 3.0, nan}, {4});
  EXPECT_TRUE(std::isnan(max(x).item()));
  EXPECT_TRUE(std::isnan(amax(x, {0}).item()));
  EXPECT_EQ(argmax(x, 0).item(), 1.0);  // the first NaN, as torch
  EXPECT_EQ(argmin(x, 0).item(), 1.0);
  Tensor inf = full({3}, -std::numeric_limits<double>::infinity(), kFloat64);
  EXPECT_EQ(max(inf).item(), -std::numeric_limits<double>::infinity());
}

TEST(Reduce, VarOfOneElementIsNaNUnbiased) {
  EXPECT_TRUE(std::isnan(ones({1}).var().item()));
  EXPECT_EQ(ones({1}).var(false).item(), 0.0);
}

TEST(Reduce, BackwardOfSumIsABroadcastOfDout) {
  Tensor x = randn({4, 6}).requires_grad_();
  (x.sum({1}) * tensor({1.0, 2.0, 3.0, 4.0})).sum().backward();
  auto g = x.grad().to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(g[r * 6 + c], r + 1.0f);
}

// The bias-gradient sum (B*T, C) -> (C) must stay a plain loop over the rows, not a permute +
// contiguous copy of its 8 MB input: it allocates little beyond its output. (Its speed is
// measured in bench/, not here: a wall-clock limit depends on the machine's load.)
TEST(Reduce, LeadingDimSumCopiesNothing) {
  Tensor x = randn({8 * 1024, 256});
  const int64_t before = memory_stats().current_bytes;
  reset_peak_memory_stats();
  Tensor r = x.sum({0});
  EXPECT_LE(memory_stats().peak_bytes - before, 64 * 1024)
      << "sum over the leading dim of (8192, 256) allocated " << memory_stats().peak_bytes - before
      << " bytes";
  EXPECT_EQ(r.shape(), (Shape{256}));
}

// ---------------------------------------------------------------- errors

TEST(ReduceErrors, DimOutOfRangeNamesTheOpAndShape) {
  expect_error([] { zeros({2, 3}).sum({2}); }, {"sum", "dimension 2", "[2, 3]", "[-2, 1]"});
  expect_error([] { zeros({2, 3}).mean({-3}); }, {"mean", "-3", "[2, 3]"});
  expect_error([] { max(zeros({2, 3}), 5); }, {"max", "5", "[2, 3]"});
  expect_error([] { argmin(zeros({2}), -2); }, {"argmin", "[2]"});
  expect_error([] { amax(zeros({2}), {1}); }, {"amax", "[2]"});
  expect_error([] { zeros({2}).var(Shape{3}); }, {"var", "[2]"});
}

TEST(ReduceErrors, RepeatedDimsAreRejected) {
  expect_error([] { zeros({2, 3}).sum({1, -1}); }, {"sum", "multiple times", "[2, 3]"});
  expect_error([] { amax(zeros({2, 3}), {0, 0}); }, {"amax", "multiple times"});
}

TEST(ReduceErrors, EmptyReductionsWithoutIdentity) {
  expect_error([] { max(zeros({0})); }, {"max", "non-empty", "[0]"});
  expect_error([] { max(zeros({2, 0}), 1); }, {"max", "size 0", "[2, 0]"});
  expect_error([] { amax(zeros({0, 2}), {0}); }, {"amax", "size 0"});
  expect_error([] { argmax(zeros({0})); }, {"argmax", "[0]"});
}

TEST(ReduceErrors, WrongDtypes) {
  expect_error([] { tensor({1, 2}).mean(); }, {"mean", "int64"});
  expect_error([] { tensor({1, 2}).var(); }, {"var", "int64"});
  expect_error([] { max(tensor({true, false})); }, {"max", "bool"});
}

}  // namespace
}  // namespace xgrad::testing
