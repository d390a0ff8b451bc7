// tests/core/test_linalg.cpp: matmul and linear against PyTorch (tests/fixtures/shape_linalg.txt
// from gen_shape_linalg.py), in every memory layout BLAS is handed (contiguous, transposed
// storage, padded rows, strided columns that must be copied, permuted batch dims), plus the
// errors. Gradient checks are in gradcheck_rows_linalg.cpp.
//
// Adding a case: add it to gen_shape_linalg.py, re-run it, and add its name to a table below.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/shape_linalg.txt");
  return f;
}

// The same values as `x` in another memory layout, as a leaf that requires grad.
enum class Layout { Contiguous, TransposedStorage, PaddedRows, StridedCols, PermutedBatch };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::TransposedStorage:
      return "transposed-storage";
    case Layout::PaddedRows:
      return "padded-rows";
    case Layout::StridedCols:
      return "strided-cols";
    case Layout::PermutedBatch:
      return "permuted-batch";
  }
  return "?";
}

Tensor in_layout(const Tensor& x, Layout l) {
  NoGradGuard guard;
  Tensor v;
  const int64_t last = x.dim() - 1;
  switch (l) {
    case Layout::Contiguous:
      v = x.clone();
      break;
    case Layout::TransposedStorage:  // a (.., c, r) buffer seen transposed; 1-D: every other element
      if (x.dim() < 2) {
        Tensor base = zeros({2 * x.numel()}, x.dtype());
        v = base.slice(0, 0, 2 * x.numel(), 2);
        v.copy_(x);
      } else {
        v = x.transpose(-1, -2).contiguous().transpose(-1, -2);
      }
      break;
    case Layout::PaddedRows: {  // rows further apart than their length
      Shape s = x.shape();
      s[last] += 3;
      v = zeros(s, x.dtype()).narrow(last, 1, x.shape()[last]);
      v.copy_(x);
      break;
    }
    case Layout::StridedCols: {  // unit stride in neither matrix dim: BLAS cannot read it
      Shape s = x.shape();
      s[last] *= 2;
      v = zeros(s, x.dtype()).slice(last, 0, s[last], 2);
      v.copy_(x);
      break;
    }
    case Layout::PermutedBatch:  // batch dim 0 stored innermost but one
      v = x.dim() >= 3 ? x.transpose(0, -2).contiguous().transpose(0, -2) : x.clone();
      break;
  }
  return v.detach().requires_grad_();
}

const Layout kLayouts[] = {Layout::Contiguous, Layout::TransposedStorage, Layout::PaddedRows,
                           Layout::StridedCols, Layout::PermutedBatch};

struct MatmulCase {
  std::string name;
  std::string grad_fn;  // what torch 1.13 reports
  double tol;
};

class MatmulVsTorch : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulVsTorch, ValuesAndGradientsInEveryLayout) {
  const MatmulCase& c = GetParam();
  const std::string p = "matmul." + c.name;
  const Tensor& a0 = fx().get(p + ".a");
  const Tensor& b0 = fx().get(p + ".b");
  for (Layout la : kLayouts)
    for (Layout lb : kLayouts) {
      SCOPED_TRACE(c.name + " a:" + layout_name(la) + " b:" + layout_name(lb));
      Tensor a = in_layout(a0, la), b = in_layout(b0, lb);
      Tensor out = matmul(a, b);
      EXPECT_EQ(out.grad_fn_name(), c.grad_fn);
      if (out.numel() > 0) {
        EXPECT_TRUE(out.is_contiguous());
      }
      expect_close(out, fx().get(p + ".out"), c.tol, c.tol, p + ".out");
      out.backward(fx().get(p + ".w"));
      expect_close(a.grad(), fx().get(p + ".a.grad"), c.tol, c.tol, p + ".a.grad");
      expect_close(b.grad(), fx().get(p + ".b.grad"), c.tol, c.tol, p + ".b.grad");
      if (::testing::Test::HasFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Linalg, MatmulVsTorch,
    ::testing::Values(
        MatmulCase{"mm", "MmBackward0", 1e-5}, MatmulCase{"dot", "DotBackward0", 1e-5},
        MatmulCase{"vecmat", "SqueezeBackward3", 1e-5}, MatmulCase{"matvec", "MvBackward0", 1e-5},
        MatmulCase{"vec_batched", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"batched_vec", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"bmm", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"bcast_batch", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"fold3d_2d", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"mat_3d", "UnsafeViewBackward0", 1e-5}, MatmulCase{"attn4d", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"bcast_both", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"batch1", "UnsafeViewBackward0", 1e-5},
        MatmulCase{"rowvec_batched", "UnsafeViewBackward0", 1e-5}, MatmulCase{"mm_k1", "MmBackward0", 1e-5},
        MatmulCase{"big", "UnsafeViewBackward0", 1e-4},
        MatmulCase{"tall_batched", "UnsafeViewBackward0", 1e-4},
        MatmulCase{"bcast_a_wide", "UnsafeViewBackward0", 1e-4},
        MatmulCase{"f64_bmm", "UnsafeViewBackward0", 1e-12},
        MatmulCase{"f64_bcast", "UnsafeViewBackward0", 1e-12}, MatmulCase{"empty_m", "MmBackward0", 0},
        MatmulCase{"empty_k", "MmBackward0", 0}, MatmulCase{"empty_batch", "UnsafeViewBackward0", 0}),
    [](const ::testing::TestParamInfo<MatmulCase>& info) { return info.param.name; });

TEST(Matmul, ShapeTable) {
  struct Row {
    Shape a, b, out;
  };
  const Row rows[] = {
      {{3}, {3}, {}},
      {{3}, {3, 5}, {5}},
      {{4, 3}, {3}, {4}},
      {{4, 3}, {3, 5}, {4, 5}},
      {{3}, {7, 3, 5}, {7, 5}},
      {{7, 4, 3}, {3}, {7, 4}},
      {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},
      {{8, 4, 6, 3}, {8, 4, 3, 6}, {8, 4, 6, 6}},
      {{6, 3}, {2, 3, 5}, {2, 6, 5}},
      {{2, 6, 3}, {3, 5}, {2, 6, 5}},
      {{1, 6, 3}, {4, 3, 5}, {4, 6, 5}},
      {{0, 6, 3}, {3, 5}, {0, 6, 5}},
  };
  for (const Row& r : rows)
    EXPECT_EQ(matmul(ones(r.a), ones(r.b)).shape(), r.out) << shape_str(r.a) << " @ " << shape_str(r.b);
  EXPECT_EQ(ones({2, 3}).matmul(ones({3, 4})).shape(), (Shape{2, 4}));
}

TEST(Matmul, ExpandedAndSlicedOperandsAreReadCorrectly) {
  // b is a stride-0 expand (BLAS cannot read it: must be copied), a a column slice (ld > cols)
  Tensor col = tensor({{1.0}, {2.0}, {3.0}}, kFloat64);  // (3, 1)
  Tensor b = col.expand({3, 4});                         // every column is col
  Tensor base = arange(0, 12, 1, kFloat64).reshape({2, 6});
  Tensor a = base.narrow(1, 2, 3);  // [[2,3,4],[8,9,10]]
  EXPECT_EQ(matmul(a, b).to_vector<double>(), (std::vector<double>{20, 20, 20, 20, 56, 56, 56, 56}));
  // a batch broadcast by expand (batch stride 0)
  Tensor a3 = a.unsqueeze(0).expand({3, 2, 3});
  Tensor out = matmul(a3, b);
  EXPECT_EQ(out.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(out.select(0, 2).to_vector<double>(), (std::vector<double>{20, 20, 20, 20, 56, 56, 56, 56}));
}

TEST(Matmul, ZeroSizedInnerDimGivesZeros) {
  Tensor out = matmul(ones({2, 0}), ones({0, 3}));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(matmul(ones({0}), ones({0})).item(), 0.0);
}

TEST(Matmul, SavesOnlyWhatBackwardNeeds) {
  // out = x @ w with only w requiring grad: dw = x^T @ dout needs x, not w; modifying w in
  // place afterwards must not break backward (torch behaves the same)
  Tensor x = ones({2, 3}, kFloat64);
  Tensor w0 = ones({3, 4}, kFloat64).requires_grad_();
  Tensor w = w0.clone();
  Tensor out = matmul(x, w);
  Tensor wc = w;
  wc.masked_fill_(ones({3, 4}, kBool), 2.0);
  EXPECT_NO_THROW(out.backward(ones({2, 4}, kFloat64)));
  // but modifying x (needed for dw) does break it
  Tensor x2 = ones({2, 3}, kFloat64).requires_grad_().clone();
  Tensor out2 = matmul(x2, w0);
  x2.masked_fill_(ones({2, 3}, kBool), 2.0);
  EXPECT_THROW(out2.backward(ones({2, 4}, kFloat64)), Error);
}

TEST(Matmul, Errors) {
  std::string m = error_of([] { matmul(ones({2, 3}), ones({4, 5})); });
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  EXPECT_NE(m.find("3 != 4"), std::string::npos) << m;

  m = error_of([] { matmul(ones({3}), ones({4})); });
  EXPECT_NE(m.find("[3]"), std::string::npos) << m;
  m = error_of([] { matmul(ones({2, 5, 3}), ones({4, 5})); });
  EXPECT_NE(m.find("[2, 5, 3]"), std::string::npos) << m;

  m = error_of([] { matmul(scalar_tensor(2.0), ones({3})); });
  EXPECT_NE(m.find("matmul"), std::string::npos) << m;
  EXPECT_NE(m.find("[]"), std::string::npos) << m;
  EXPECT_THROW(matmul(ones({3}), scalar_tensor(1.0)), Error);

  m = error_of([] { matmul(ones({2, 3, 4}), ones({3, 4, 5})); });  // batch 2 vs 3
  EXPECT_NE(m.find("[2, 3, 4]"), std::string::npos) << m;
  EXPECT_NE(m.find("[3, 4, 5]"), std::string::npos) << m;

  m = error_of([] { matmul(ones({2, 3}), ones({3, 4}, kFloat64)); });
  EXPECT_NE(m.find("float64"), std::string::npos) << m;
  EXPECT_THROW(matmul(ones({2, 3}, kInt64), ones({3, 4}, kInt64)), Error);
  EXPECT_THROW(matmul(Tensor(), ones({3})), Error);
}

// ---------------------------------------------------------------- linear

struct LinearCase {
  std::string name;
  std::string grad_fn;
  bool bias;
};

class LinearVsTorch : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearVsTorch, ValuesAndGradients) {
  const LinearCase& c = GetParam();
  const std::string p = "linear." + c.name;
  const double tol = fx().get(p + ".a").dtype() == kFloat64 ? 1e-12 : 1e-5;
  for (Layout lx : {Layout::Contiguous, Layout::TransposedStorage, Layout::PermutedBatch})
    for (Layout lw : {Layout::Contiguous, Layout::TransposedStorage}) {
      SCOPED_TRACE(c.name + " x:" + layout_name(lx) + " weight:" + layout_name(lw));
      Tensor x = in_layout(fx().get(p + ".a"), lx);
      Tensor w = in_layout(fx().get(p + ".b"), lw);
      Tensor b = c.bias ? in_layout(fx().get(p + ".c"), Layout::Contiguous) : Tensor();
      Tensor out = linear(x, w, b);
      if (lx == Layout::Contiguous) {
        EXPECT_EQ(out.grad_fn_name(), c.grad_fn);
      }
      expect_close(out, fx().get(p + ".out"), tol, tol, p + ".out");
      out.backward(fx().get(p + ".w"));
      expect_close(x.grad(), fx().get(p + ".a.grad"), tol, tol, p + ".x.grad");
      expect_close(w.grad(), fx().get(p + ".b.grad"), tol, tol, p + ".weight.grad");
      if (c.bias) expect_close(b.grad(), fx().get(p + ".c.grad"), tol, tol, p + ".bias.grad");
    }
}

INSTANTIATE_TEST_SUITE_P(Linalg, LinearVsTorch,
                         ::testing::Values(LinearCase{"2d", "AddmmBackward0", true},
                                           LinearCase{"3d", "ViewBackward0", true},
                                           LinearCase{"4d", "AddBackward0", true},
                                           LinearCase{"1d", "AddBackward0", true},
                                           LinearCase{"nobias", "UnsafeViewBackward0", false},
                                           LinearCase{"f64", "ViewBackward0", true}),
                         [](const ::testing::TestParamInfo<LinearCase>& info) { return info.param.name; });

TEST(Linear, EqualsMatmulPlusBias) {
  Generator gen(3);
  Tensor x = randn({2, 5, 7}, &gen, kFloat64).requires_grad_();
  Tensor w = randn({4, 7}, &gen, kFloat64).requires_grad_();
  Tensor b = randn({4}, &gen, kFloat64).requires_grad_();
  Tensor g = randn({2, 5, 4}, &gen, kFloat64);
  Tensor fused = linear(x, w, b);
  fused.backward(g);
  const Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  b.set_grad(Tensor());
  Tensor composed = matmul(x, w.t()) + b;
  composed.backward(g);
  expect_close(fused, composed, 1e-12, 1e-12, "out");
  expect_close(gx, x.grad(), 1e-12, 1e-12, "dx");
  expect_close(gw, w.grad(), 1e-12, 1e-12, "dweight");
  expect_close(gb, b.grad(), 1e-12, 1e-12, "dbias");
}

TEST(Linear, OnlyRequestedGradients) {
  Tensor x = ones({3, 2});
  Tensor w = ones({4, 2}).requires_grad_();
  Tensor out = linear(x, w, zeros({4}));
  out.backward(ones({3, 4}));
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(8, 3.0f));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Linear, Errors) {
  std::string m = error_of([] { linear(ones({2, 3}), ones({4, 5})); });
  EXPECT_NE(m.find("linear"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_NE(m.find("[4, 5]"), std::string::npos) << m;
  m = error_of([] { linear(ones({2, 3}), ones({4, 3}), ones({5})); });
  EXPECT_NE(m.find("[5]"), std::string::npos) << m;
  EXPECT_THROW(linear(ones({2, 3}), ones({3})), Error);
  EXPECT_THROW(linear(scalar_tensor(1.0), ones({4, 1})), Error);
  EXPECT_THROW(linear(ones({2, 3}), ones({4, 3}, kFloat64)), Error);
  EXPECT_THROW(linear(ones({2, 3}), ones({4, 3}), ones({4}, kFloat64)), Error);
}

}  // namespace
}  // namespace xgrad::testing
