// tests/core/test_shape.cpp: cat, stack, split, chunk, index_select, masked_fill(_), triu and
// tril against PyTorch (tests/fixtures/shape_linalg.txt from gen_shape_linalg.py), the
// in-place rules of masked_fill_, and the errors. Gradient checks: gradcheck_rows_shape.cpp.
//
// Adding a case: add it to gen_shape_linalg.py, re-run it, and add a table row below.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

// ---------------------------------------------------------------- fixtures

// A fixture case: the named inputs (fresh leaves for float ones), fn, and what to compare.
struct ShapeCase {
  std::string name;
  int n_inputs;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::string grad_fn;
};

class ShapeVsTorch : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(ShapeVsTorch, ValuesAndGradients) {
  const ShapeCase& c = GetParam();
  std::vector<Tensor> in;
  const char* keys = "abcdefgh";
  for (int i = 0; i < c.n_inputs; ++i) {
    Tensor t = fx().get(c.name + "." + keys[i]).clone();
    if (t.is_floating_point()) t.requires_grad_();
    in.push_back(t);
  }
  Tensor out = c.fn(in);
  EXPECT_EQ(out.grad_fn_name(), c.grad_fn);
  expect_close(out, fx().get(c.name + ".out"), 1e-6, 1e-6, c.name + ".out");
  out.backward(fx().get(c.name + ".w"));
  for (int i = 0; i < c.n_inputs; ++i)
    if (in[i].requires_grad())
      expect_close(in[i].grad(), fx().get(c.name + "." + keys[i] + ".grad"), 1e-6, 1e-6,
                   c.name + "." + keys[i] + ".grad");
}

using V = const std::vector<Tensor>&;

INSTANTIATE_TEST_SUITE_P(
    Shape, ShapeVsTorch,
    ::testing::Values(ShapeCase{"cat.dim0", 3,
                                [](V x) {
                                  return cat({x[0], x[1], x[2]}, 0);
                                },
                                "CatBackward0"},
                      ShapeCase{"cat.dim1", 2,
                                [](V x) {
                                  return cat({x[0], x[1]}, 1);
                                },
                                "CatBackward0"},
                      ShapeCase{"cat.dimneg", 2,
                                [](V x) {
                                  return cat({x[0], x[1]}, -1);
                                },
                                "CatBackward0"},
                      ShapeCase{"stack.dim0", 2,
                                [](V x) {
                                  return stack({x[0], x[1]}, 0);
                                },
                                "StackBackward0"},
                      ShapeCase{"stack.dim2", 3, [](V x) { return stack(x, 2); }, "StackBackward0"},
                      ShapeCase{"stack.dimneg", 2, [](V x) { return stack(x, -1); }, "StackBackward0"},
                      ShapeCase{"index_select.dim0", 2, [](V x) { return index_select(x[0], 0, x[1]); },
                                "IndexSelectBackward0"},
                      ShapeCase{"index_select.dim1", 2, [](V x) { return index_select(x[0], 1, x[1]); },
                                "IndexSelectBackward0"},
                      ShapeCase{"index_select.last", 2, [](V x) { return index_select(x[0], -1, x[1]); },
                                "IndexSelectBackward0"},
                      ShapeCase{"masked_fill.same", 2, [](V x) { return x[0].masked_fill(x[1], -1.5); },
                                "MaskedFillBackward0"},
                      ShapeCase{"masked_fill.bcast_mask", 2, [](V x) { return masked_fill(x[0], x[1], 2.0); },
                                "MaskedFillBackward0"},
                      ShapeCase{"masked_fill.ninf", 2, [](V x) { return masked_fill(x[0], x[1], -INFINITY); },
                                "MaskedFillBackward0"},
                      ShapeCase{"masked_fill.bcast_self", 2, [](V x) { return masked_fill(x[0], x[1], 0.5); },
                                "MaskedFillBackward0"},
                      ShapeCase{"triu.dm1", 1, [](V x) { return triu(x[0], -1); }, "TriuBackward0"},
                      ShapeCase{"triu.d0", 1, [](V x) { return triu(x[0]); }, "TriuBackward0"},
                      ShapeCase{"triu.d1", 1, [](V x) { return triu(x[0], 1); }, "TriuBackward0"},
                      ShapeCase{"triu.d2", 1, [](V x) { return triu(x[0], 2); }, "TriuBackward0"},
                      ShapeCase{"tril.dm1", 1, [](V x) { return tril(x[0], -1); }, "TrilBackward0"},
                      ShapeCase{"tril.d0", 1, [](V x) { return tril(x[0]); }, "TrilBackward0"},
                      ShapeCase{"tril.d1", 1, [](V x) { return tril(x[0], 1); }, "TrilBackward0"},
                      ShapeCase{"tril.d2", 1, [](V x) { return tril(x[0], 2); }, "TrilBackward0"},
                      // the seeds' causal attention: scores = q @ k^T, masked_fill_ in place, softmax
                      ShapeCase{"attention.masked_fill_", 2,
                                [](V x) {
                                  const int64_t T = x[0].size(-2);
                                  Tensor scores = matmul(x[0], x[1].transpose(-2, -1));
                                  Tensor causal = triu(ones({T, T}), 1).to(kBool);
                                  scores.masked_fill_(causal.slice(0, 0, T).slice(1, 0, T), -INFINITY);
                                  return softmax(scores / std::sqrt(double(x[1].size(-1))), -1);
                                },
                                "SoftmaxBackward0"}),
    [](const ::testing::TestParamInfo<ShapeCase>& info) {
      std::string s;
      for (char ch : info.param.name) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return s;
    });

std::vector<int64_t> piece_sizes(const std::vector<Tensor>& pieces) {
  std::vector<int64_t> out;
  for (const Tensor& p : pieces) out.push_back(p.size(0));
  return out;
}

TEST(Shape, ChunkAndSplitSizesMatchTorch) {
  for (int64_t n = 0; n < 8; ++n) {
    for (int64_t c = 1; c < 6; ++c)
      EXPECT_EQ(piece_sizes(chunk(zeros({n, 2}), c, 0)),
                fx().get("chunk.n" + std::to_string(n) + ".c" + std::to_string(c)).to_vector<int64_t>())
          << "chunk n=" << n << " chunks=" << c;
    for (int64_t s = 1; s < 4; ++s)
      EXPECT_EQ(piece_sizes(split(zeros({n, 2}), s, 0)),
                fx().get("split.n" + std::to_string(n) + ".s" + std::to_string(s)).to_vector<int64_t>())
          << "split n=" << n << " size=" << s;
  }
}

// ---------------------------------------------------------------- values and views

TEST(Shape, SplitAndChunkAreViews) {
  Tensor x = arange(0, 12, 1, kFloat32).reshape({3, 4});
  auto pieces = split(x, std::vector<int64_t>{1, 3}, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1].shape(), (Shape{3, 3}));
  EXPECT_EQ(pieces[1].data_ptr<float>(), x.data_ptr<float>() + 1);
  EXPECT_EQ(pieces[1].to_vector<float>(), (std::vector<float>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  auto c = chunk(x, 2, 0);  // sizes 2, 1
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].to_vector<float>(), (std::vector<float>{8, 9, 10, 11}));
  EXPECT_EQ(c[1].data_ptr<float>(), x.data_ptr<float>() + 8);
  // the seeds' qkv split: chunk(3, -1) of a (B, T, 3C) projection
  auto qkv = chunk(zeros({2, 5, 12}), 3, -1);
  ASSERT_EQ(qkv.size(), 3u);
  for (const Tensor& t : qkv) EXPECT_EQ(t.shape(), (Shape{2, 5, 4}));
}

TEST(Shape, SplitPiecesCarryGradients) {
  Tensor x = arange(0, 6, 1, kFloat64).reshape({2, 3}).requires_grad_();
  auto pieces = split(x, 2, 1);
  ASSERT_EQ(pieces.size(), 2u);
  cat({pieces[1], pieces[0]}, 1).backward(arange(0, 6, 1, kFloat64).reshape({2, 3}));
  // out = [x[:, 2], x[:, 0:2]] so dx[:, 2] = g[:, 0], dx[:, 0:2] = g[:, 1:3]
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 2, 0, 4, 5, 3}));
}

TEST(Shape, CatStackOtherDtypesAndLayouts) {
  Tensor a = arange(6).reshape({2, 3});          // int64
  Tensor b = arange(6, 12).reshape({3, 2}).t();  // non-contiguous (2, 3)
  EXPECT_EQ(cat({a, b}, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 6, 8, 10, 3, 4, 5, 7, 9, 11}));
  EXPECT_EQ(stack({a, b}, 1).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(stack({a, b}, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 6, 8, 10, 3, 4, 5, 7, 9, 11}));
  // torch skips legacy 1-D empty tensors when concatenating higher-dim ones
  EXPECT_EQ(cat({a, zeros({0}, kInt64), a}, 0).shape(), (Shape{4, 3}));
  // a single scalar list element
  EXPECT_EQ(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).to_vector<float>(), (std::vector<float>{1, 2}));
  Tensor m = tensor({true, false});
  EXPECT_EQ(cat({m, m}).to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
}

TEST(Shape, IndexSelectIsTheEmbeddingLookup) {
  Tensor weight = arange(0, 12, 1, kFloat32).reshape({4, 3}).requires_grad_();
  Tensor ids = tensor({2, 0, 2, 2});
  Tensor out = index_select(weight, 0, ids);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{6, 7, 8, 0, 1, 2, 6, 7, 8, 6, 7, 8}));
  out.backward(ones({4, 3}));
  // token 2 appears three times: its row accumulates three gradients
  EXPECT_EQ(weight.grad().to_vector<float>(), (std::vector<float>{1, 1, 1, 0, 0, 0, 3, 3, 3, 0, 0, 0}));
  // non-contiguous source, int64 source, 0-d index
  Tensor t = arange(0, 12, 1, kFloat32).reshape({3, 4}).t();  // (4, 3)
  EXPECT_EQ(index_select(t, 1, tensor({2, 0})).to_vector<float>(),
            (std::vector<float>{8, 0, 9, 1, 10, 2, 11, 3}));
  EXPECT_EQ(index_select(arange(5), 0, tensor({4, 4})).to_vector<int64_t>(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(index_select(arange(5), 0, scalar_tensor(3, kInt64)).shape(), (Shape{1}));
  EXPECT_EQ(index_select(t, 0, zeros({0}, kInt64)).shape(), (Shape{0, 3}));
}

TEST(Shape, MaskedFillValuesAndDtypes) {
  Tensor x = arange(0, 6, 1, kFloat32).reshape({2, 3});
  Tensor out = masked_fill(x, tensor({true, false, true}), -INFINITY);  // mask broadcast over rows
  auto v = out.to_vector<float>();
  EXPECT_TRUE(std::isinf(v[0]) && v[0] < 0);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_TRUE(std::isinf(v[5]));
  EXPECT_EQ(v[4], 4.0f);
  EXPECT_EQ(x.to_vector<float>()[0], 0.0f);  // out of place
  // int64 and bool tensors, non-contiguous input
  EXPECT_EQ(masked_fill(arange(3), tensor({false, true, false}), 7).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 7, 2}));
  EXPECT_EQ(masked_fill(arange(6).reshape({2, 3}).t(), tensor({true, false}), -1).to_vector<int64_t>(),
            (std::vector<int64_t>{-1, 3, -1, 4, -1, 5}));
  EXPECT_THROW(masked_fill(arange(3), tensor({false, true, false}), -INFINITY), Error);
}

// ---------------------------------------------------------------- masked_fill_ in place

TEST(Shape, MaskedFillInPlaceOnANonLeafGivesTheOutOfPlaceGradients) {
  Generator gen(5);
  Tensor q = randn({2, 4, 3}, &gen, kFloat64).requires_grad_();
  Tensor k = randn({2, 4, 3}, &gen, kFloat64).requires_grad_();
  Tensor g = randn({2, 4, 4}, &gen, kFloat64);
  Tensor mask = triu(ones({4, 4}, kBool), 1);
  Tensor scores = matmul(q, k.transpose(1, 2));
  const uint64_t v0 = scores.version();
  Tensor& same = scores.masked_fill_(mask, -1e9);
  EXPECT_EQ(&same, &scores);
  EXPECT_EQ(scores.version(), v0 + 1);
  EXPECT_EQ(scores.grad_fn_name(), "MaskedFillBackward0");
  scores.backward(g);
  const Tensor gq = q.grad(), gk = k.grad();
  q.set_grad(Tensor());
  k.set_grad(Tensor());
  masked_fill(matmul(q, k.transpose(1, 2)), mask, -1e9).backward(g);
  expect_close(gq, q.grad(), 1e-12, 1e-12, "dq");
  expect_close(gk, k.grad(), 1e-12, 1e-12, "dk");
}

TEST(Shape, MaskedFillInPlaceOnASavedTensorMakesBackwardThrow) {
  Tensor w = ones({3, 2}, kFloat64).requires_grad_();
  Tensor x = ones({2, 3}, kFloat64).requires_grad_().clone();  // non-leaf
  Tensor y = matmul(x, w);                                     // saves x for dw
  x.masked_fill_(tensor({true, false, false}), 0.0);
  std::string m = error_of([&] { y.backward(ones({2, 2}, kFloat64)); });
  EXPECT_MESSAGE_HAS(m, "modified by an in-place operation");
}

TEST(Shape, MaskedFillInPlaceRules) {
  Tensor leaf = ones({2, 2}).requires_grad_();
  std::string m = error_of([&] { leaf.masked_fill_(ones({2, 2}, kBool), 0.0); });
  EXPECT_MESSAGE_HAS(m, "masked_fill_");
  EXPECT_MESSAGE_HAS(m, "leaf");
  EXPECT_EQ(leaf.to_vector<float>(), std::vector<float>(4, 1.0f));  // untouched
  {
    NoGradGuard guard;  // allowed without recording
    leaf.masked_fill_(tensor({true, false}), 5.0);
  }
  EXPECT_EQ(leaf.to_vector<float>(), (std::vector<float>{5, 1, 5, 1}));
  // a view is written through to its base
  Tensor base = zeros({2, 3});
  base.t().masked_fill_(tensor({false, true}), 2.0);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{0, 0, 0, 2, 2, 2}));
  // the mask must broadcast to the tensor's shape, not the other way round
  Tensor small = zeros({3});
  m = error_of([&] { small.masked_fill_(ones({2, 3}, kBool), 1.0); });
  EXPECT_MESSAGE_HAS(m, "masked_fill_");
  EXPECT_MESSAGE_HAS(m, "[2, 3]");
  EXPECT_MESSAGE_HAS(m, "[3]");
  Tensor expanded = zeros({1, 3}).expand({2, 3});
  EXPECT_THROW(expanded.masked_fill_(ones({2, 3}, kBool), 1.0), Error);
}

// ---------------------------------------------------------------- triu / tril

TEST(Shape, TriangleOfACausalMask) {
  Tensor mask = triu(ones({3, 3}), 1);
  EXPECT_EQ(mask.to_vector<float>(), (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(tril(ones({2, 3}, kBool)).to_vector<bool>(),
            (std::vector<bool>{true, false, false, true, true, false}));
  EXPECT_EQ(tril(arange(6).reshape({3, 2}).t(), -1).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(triu(ones({2, 2}), 5).to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(triu(ones({2, 2}), -5).to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(triu(ones({0, 3})).shape(), (Shape{0, 3}));
}

// ---------------------------------------------------------------- errors

TEST(Shape, CatErrors) {
  std::string m = error_of([] { cat({ones({2, 3}), ones({2, 4}), ones({2, 3})}, 0); });
  EXPECT_MESSAGE_HAS(m, "cat");
  EXPECT_MESSAGE_HAS(m, "[2, 3], [2, 4], [2, 3]");
  EXPECT_MESSAGE_HAS(m, "dimension 0");
  m = error_of([] { cat({ones({2, 3}), ones({2, 3, 1})}, 1); });
  EXPECT_MESSAGE_HAS(m, "[2, 3, 1]");
  m = error_of([] { cat({ones({2}), ones({2}, kFloat64)}); });
  EXPECT_MESSAGE_HAS(m, "dtype");
  EXPECT_MESSAGE_HAS(m, "float64");
  m = error_of([] { cat({}); });
  EXPECT_MESSAGE_HAS(m, "non-empty");
  m = error_of([] { cat({ones({2}), ones({2})}, 1); });
  EXPECT_MESSAGE_HAS(m, "out of range");
  EXPECT_THROW(cat({scalar_tensor(1.0), scalar_tensor(1.0)}), Error);
  EXPECT_THROW(cat({ones({2}), Tensor()}), Error);
}

TEST(Shape, StackSplitChunkErrors) {
  std::string m = error_of([] { stack({ones({2, 3}), ones({3, 2})}); });
  EXPECT_MESSAGE_HAS(m, "stack");
  EXPECT_MESSAGE_HAS(m, "[2, 3], [3, 2]");
  EXPECT_THROW(stack({}), Error);
  EXPECT_THROW(stack({ones({2}), ones({2})}, 2), Error);
  m = error_of([] { chunk(ones({4}), 0); });
  EXPECT_MESSAGE_HAS(m, "chunk");
  EXPECT_MESSAGE_HAS(m, "greater than 0");
  EXPECT_THROW(chunk(ones({4}), -2), Error);
  EXPECT_THROW(chunk(scalar_tensor(1.0), 2), Error);
  m = error_of([] { split(ones({5, 2}), std::vector<int64_t>{2, 2}, 0); });
  EXPECT_MESSAGE_HAS(m, "[2, 2]");
  EXPECT_MESSAGE_HAS(m, "[5, 2]");
  EXPECT_THROW(split(ones({4}), 0), Error);
  EXPECT_THROW(split(ones({4}), -1), Error);
  EXPECT_THROW(split(ones({4}), std::vector<int64_t>{5, -1}), Error);
  EXPECT_THROW(split(ones({4}), 2, 1), Error);
}

TEST(Shape, IndexSelectMaskedFillTriangleErrors) {
  std::string m = error_of([] { index_select(ones({5, 3}), 0, tensor({1, 5})); });
  EXPECT_MESSAGE_HAS(m, "index_select");
  EXPECT_MESSAGE_HAS(m, "index 5");
  EXPECT_MESSAGE_HAS(m, "[5, 3]");
  EXPECT_THROW(index_select(ones({5, 3}), 0, tensor({-1})), Error);
  m = error_of([] { index_select(ones({5, 3}), 0, tensor({1.0, 2.0})); });
  EXPECT_MESSAGE_HAS(m, "int64");
  EXPECT_THROW(index_select(ones({5, 3}), 0, zeros({2, 2}, kInt64)), Error);
  EXPECT_THROW(index_select(ones({5, 3}), 2, tensor({0})), Error);

  m = error_of([] { masked_fill(ones({2, 3}), ones({2, 3}), 0.0); });
  EXPECT_MESSAGE_HAS(m, "masked_fill: expected a bool mask");
  EXPECT_MESSAGE_HAS(m, "use mask.to(kBool)");
  m = error_of([] { masked_fill(ones({2, 3}), ones({4}, kBool), 0.0); });
  EXPECT_MESSAGE_HAS(m, "[2, 3]");
  EXPECT_MESSAGE_HAS(m, "[4]");
  Tensor t = ones({2});
  m = error_of([&] { t.masked_fill_(ones({2}, kInt64), 0.0); });
  EXPECT_MESSAGE_HAS(m, "use mask.to(kBool)");

  m = error_of([] { triu(ones({3})); });
  EXPECT_MESSAGE_HAS(m, "triu");
  EXPECT_MESSAGE_HAS(m, "[3]");
  EXPECT_THROW(tril(scalar_tensor(1.0)), Error);
}

}  // namespace
}  // namespace xgrad::testing
