// tests/core/test_gemm.cpp: xgrad's own GEMM kernel (core/src/kernels/gemm_kernel.h) through
// matmul, against a plain triple loop in double precision (its composed twin), on the shapes
// where a blocked kernel goes wrong: sizes that are not multiples of the register tile
// (edge rows and columns; at most one vector of columns takes the narrow tile; a last row
// tile of any height), k across the k-panel boundary (256), n across the column-panel
// boundary, operands stored transposed, tiny and empty sizes; and the same bits at 1, 2
// and 3 threads for each, since the kernel promises that by construction.
//
// Adding a case: a row in kShapes (m, n, k, A stored transposed, B stored transposed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "thread_count.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

struct GemmShape {
  int64_t m, n, k;
  bool ta, tb;  // operand stored transposed: a is a (k, m) tensor's .t(), b an (n, k)'s
};

std::ostream& operator<<(std::ostream& os, const GemmShape& s) {
  return os << s.m << "x" << s.n << "x" << s.k << (s.ta ? "_At" : "") << (s.tb ? "_Bt" : "");
}

const GemmShape kShapes[] = {
    {1, 1, 1, false, false},
    {3, 5, 2, true, true},
    {13, 31, 7, false, true},
    {14, 32, 256, false, false},
    {15, 33, 257, true, false},
    {29, 65, 513, false, true},
    {100, 769, 300, true, true},
    {5, 1000, 600, false, false},
    {300, 20, 700, true, false},
    {2048, 64, 256, false, true},
    {256, 64, 2048, true, false},
    {97, 1537, 64, false, false},
    {70, 16, 300, false, false},
    {2048, 16, 64, true, false},
    {43, 17, 9, false, true},
    // A stored transposed with rows far apart (packed per tile), last row tiles of 8 and 13
    {400, 48, 300, true, false},
    {391, 45, 270, true, false},
    // ... in groups of row tiles (72 tiles: two groups of 36), k panels not a multiple of 16
    {1000, 40, 300, true, false},
    // attention's row blocks: 32 rows (two whole tiles and one of 4), K^T transposed by blocks
    {32, 64, 16, false, true},
    {32, 16, 64, true, false},
    {32, 96, 48, false, true},
    // one row tile against B stored transposed (a generated token's linear): slivers packed one
    // at a time; split over threads from 4e6 flops (4001 x 600, 14 x 1000 x 300)
    {1, 4001, 600, false, true},
    {1, 769, 300, true, true},
    {4, 97, 384, true, true},
    {14, 1000, 300, false, true},
    {2, 16, 257, false, true},
    // B packed by all threads at once from 1e8 flops in a column panel (a partial last sliver;
    // a second column panel below the threshold, packed by each thread)
    {600, 400, 300, false, true},
    {520, 1000, 260, true, false},
};

Tensor operand(int64_t rows, int64_t cols, bool transposed, Generator& g, DType dt) {
  // a (rows, cols) matrix, stored as is or as the transpose of a contiguous (cols, rows) one
  return transposed ? randn({cols, rows}, &g, dt).t() : randn({rows, cols}, &g, dt);
}

// sum_k a[i][k] * b[k][j] in double, and sum_k |a[i][k] * b[k][j]| as the error scale
void reference(const Tensor& a, const Tensor& b, std::vector<double>& c, std::vector<double>& mag) {
  const Tensor a64 = a.to(kFloat64).contiguous(), b64 = b.to(kFloat64).contiguous();
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const double* pa = a64.data_ptr<double>();
  const double* pb = b64.data_ptr<double>();
  c.assign(m * n, 0.0);
  mag.assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) {
        c[i * n + j] += pa[i * k + p] * pb[p * n + j];
        mag[i * n + j] += std::fabs(pa[i * k + p] * pb[p * n + j]);
      }
}

class Gemm : public ::testing::TestWithParam<std::tuple<GemmShape, DType>> {};

TEST_P(Gemm, MatchesTheTripleLoopAndHasTheSameBitsAtAnyThreadCount) {
  const auto [s, dt] = GetParam();
  Generator g(7);
  const Tensor a = operand(s.m, s.k, s.ta, g, dt), b = operand(s.k, s.n, s.tb, g, dt);
  ASSERT_EQ(a.is_contiguous(), !s.ta || s.m == 1 || s.k == 1);
  std::vector<double> ref, mag;
  reference(a, b, ref, mag);
  // float32: each product and partial sum rounds once, so |err| <= k * eps * sum |a b|
  const double eps = dt == kFloat32 ? 6e-8 : 1.2e-16;
  std::vector<Tensor> outs;
  for (int threads : {1, 2, 3}) {
    testing::ThreadCount tc(threads);
    outs.push_back(matmul(a, b).contiguous());
  }
  const Tensor c = outs[0].to(kFloat64);
  ASSERT_EQ(c.shape(), (Shape{s.m, s.n}));
  const double* pc = c.data_ptr<double>();
  for (int64_t i = 0; i < s.m * s.n; ++i) {
    const double tol = (double(s.k) + 2) * eps * mag[i] + 1e-30;
    ASSERT_LE(std::fabs(pc[i] - ref[i]), tol)
        << "element (" << i / s.n << ", " << i % s.n << ") of " << s << ": " << pc[i] << " vs " << ref[i];
  }
  const std::size_t bytes = static_cast<std::size_t>(s.m * s.n) * itemsize(dt);
  for (std::size_t t = 1; t < outs.size(); ++t)
    EXPECT_EQ(std::memcmp(outs[0].raw_data_ptr(), outs[t].raw_data_ptr(), bytes), 0)
        << s << ": different bits at " << t + 1 << " threads than at 1";
}

INSTANTIATE_TEST_SUITE_P(Shapes, Gemm,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(kFloat32, kFloat64)),
                         [](const ::testing::TestParamInfo<std::tuple<GemmShape, DType>>& i) {
                           std::ostringstream os;
                           os << std::get<0>(i.param) << "_" << dtype_name(std::get<1>(i.param));
                           return os.str();
                         });

// NaN and inf in an operand reach exactly the outputs whose sums include them (no padding or
// edge-tile value leaks into its neighbours, nothing is dropped).
TEST(Gemm, NonFiniteValuesStayInTheirRowsAndColumns) {
  Generator g(3);
  Tensor a = randn({17, 40}, &g), b = randn({40, 35}, &g);
  a.data_ptr<float>()[5 * 40 + 3] = NAN;        // row 5 of A
  b.data_ptr<float>()[7 * 35 + 34] = INFINITY;  // column 34 of B (the edge sliver)
  const Tensor c = matmul(a, b);
  for (int64_t i = 0; i < 17; ++i)
    for (int64_t j = 0; j < 35; ++j) {
      const float v = c.data_ptr<float>()[i * 35 + j];
      if (i == 5) EXPECT_TRUE(std::isnan(v)) << i << "," << j;
      else if (j == 34) EXPECT_FALSE(std::isfinite(v)) << i << "," << j;
      else EXPECT_TRUE(std::isfinite(v)) << i << "," << j;
    }
}

// linear adds its bias in the GEMM's epilogue (bias + acc): the same bits as the composed
// matmul(x, W^T) + b, on edge tiles, across k panels and at any thread count.
TEST(Gemm, LinearBiasInTheEpilogueEqualsMatmulPlusBias) {
  for (const auto& [rows, in, out] :
       {std::tuple<int64_t, int64_t, int64_t>{29, 7, 33}, {2048, 64, 96}, {100, 300, 769}}) {
    Generator g(11);
    const Tensor x = randn({rows, in}, &g), w = randn({out, in}, &g), b = randn({out}, &g);
    const Tensor composed = matmul(x, w.t()) + b;
    for (int threads : {1, 2}) {
      testing::ThreadCount tc(threads);
      const Tensor fused = linear(x, w, b);
      EXPECT_EQ(std::memcmp(fused.raw_data_ptr(), composed.raw_data_ptr(),
                            static_cast<std::size_t>(rows * out) * sizeof(float)),
                0)
          << rows << "x" << in << " -> " << out << " at " << threads << " threads";
    }
  }
}

// A few rows (a generated token's linear, one row tile) take their own path through the
// kernel, but the same tiles and epilogues: each row has the same bits as inside a product
// of many rows (a prompt's), with and without a bias, at any thread count.
TEST(Gemm, FewRowsHaveTheSameBitsAsTheSameRowsOfABigProduct) {
  for (const auto& [in, out] : {std::pair<int64_t, int64_t>{300, 769}, {64, 96}, {600, 4001}}) {
    Generator g(13);
    const Tensor x = randn({64, in}, &g), w = randn({out, in}, &g), b = randn({out}, &g);
    const Tensor all = linear(x, w, b), all_nb = linear(x, w, Tensor());
    for (int64_t rows : {1, 3, 14}) {
      for (int threads : {1, 2, 3}) {
        testing::ThreadCount tc(threads);
        const Tensor part = x.slice(0, 5, 5 + rows).contiguous();
        const Tensor few = linear(part, w, b), few_nb = linear(part, w, Tensor());
        const std::size_t bytes = static_cast<std::size_t>(rows * out) * sizeof(float);
        EXPECT_EQ(std::memcmp(few.raw_data_ptr(), all.data_ptr<float>() + 5 * out, bytes), 0)
            << rows << " rows, " << in << " -> " << out << " with bias at " << threads << " threads";
        EXPECT_EQ(std::memcmp(few_nb.raw_data_ptr(), all_nb.data_ptr<float>() + 5 * out, bytes), 0)
            << rows << " rows, " << in << " -> " << out << " at " << threads << " threads";
      }
    }
  }
}

// linear's backward takes the bias gradient (dY's column sums) from the weight gradient's GEMM
// (dW = dY^T X reads dY packed; the sums come from the copy) where it can, else from a pass of
// its own (also when the weight wants no gradient): either way the sums of its composed twin, dY's columns
// added in double in row order, to the bit, and dW the same bits as without a bias; dY^T packed (out >= 384,
// or 192 with the sums) or not, in groups of row tiles (1000 rows of dY^T), over two column panels of dW (in
// = 800), at 1, 2 and 3 threads.
TEST(Gemm, LinearBiasGradFromTheWeightGradGemmEqualsColumnSums) {
  for (const auto& [batch, rows, in, out] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 300, 20, 400},
                                             {3, 100, 20, 400},
                                             {2, 150, 33, 1000},
                                             {1, 70, 800, 391},
                                             {2, 100, 20, 200},
                                             {4, 64, 64, 96}}) {
    Generator g(17);
    const Tensor x = randn({batch, rows, in}, &g), w = randn({out, in}, &g), b = randn({out}, &g);
    const Tensor dy = randn({batch, rows, out}, &g);
    std::vector<double> acc(static_cast<std::size_t>(out), 0.0);
    const float* pdy = dy.data_ptr<float>();
    for (int64_t r = 0; r < batch * rows; ++r)
      for (int64_t j = 0; j < out; ++j) acc[j] += static_cast<double>(pdy[r * out + j]);
    std::vector<float> want(acc.begin(), acc.end());
    for (int threads : {1, 2, 3}) {
      testing::ThreadCount tc(threads);
      const Tensor xl = x.detach().requires_grad_(), wl = w.detach().requires_grad_(),
                   bl = b.detach().requires_grad_();
      linear(xl, wl, bl).backward(dy);
      const Tensor wn = w.detach().requires_grad_();
      linear(x, wn, Tensor()).backward(dy);
      const Tensor bo = b.detach().requires_grad_();  // no weight gradient: the sums' own pass
      linear(x, w, bo).backward(dy);
      const std::string at = std::to_string(batch) + "x" + std::to_string(rows) + "x" + std::to_string(in) +
                             " -> " + std::to_string(out) + " at " + std::to_string(threads) + " threads";
      EXPECT_EQ(std::memcmp(bl.grad().raw_data_ptr(), want.data(), want.size() * sizeof(float)), 0) << at;
      EXPECT_EQ(std::memcmp(bo.grad().raw_data_ptr(), want.data(), want.size() * sizeof(float)), 0) << at;
      EXPECT_EQ(std::memcmp(wl.grad().raw_data_ptr(), wn.grad().raw_data_ptr(),
                            static_cast<std::size_t>(out * in) * sizeof(float)),
                0)
          << at;
    }
  }
  // float64: the packed tile's sums by the portable loop
  Generator g(19);
  const Tensor x = randn({300, 20}, &g, kFloat64), dy = randn({300, 400}, &g, kFloat64);
  const Tensor w = randn({400, 20}, &g, kFloat64).requires_grad_(),
               b = randn({400}, &g, kFloat64).requires_grad_();
  linear(x, w, b).backward(dy);
  std::vector<double> want(400, 0.0);
  for (int64_t r = 0; r < 300; ++r)
    for (int64_t j = 0; j < 400; ++j) want[j] += dy.data_ptr<double>()[r * 400 + j];
  EXPECT_EQ(std::memcmp(b.grad().raw_data_ptr(), want.data(), want.size() * sizeof(double)), 0);
}

TEST(Gemm, BackendIsNamed) {
  EXPECT_NE(gemm_backend().find("xgrad"), std::string::npos) << gemm_backend();
  EXPECT_FALSE(simd_level().empty());
}

}  // namespace
}  // namespace xgrad
