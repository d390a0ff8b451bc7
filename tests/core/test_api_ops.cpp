// tests/core/test_api_ops.cpp: ops and method forms with torch's spellings (std, amax/amin, topk,
// gather, scatter_add, masked_select, roll, tril_/triu_, outer, where/split/chunk/
// index_select/relu/argmax as methods) against torch (tests/fixtures/api.txt from
// gen_api.py), and their errors. Finite-difference checks: gradcheck_rows_*.cpp.
//
// Adding a case: add it to gen_api.py, re-run it, and add a row below.
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
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/api.txt");
  return f;
}

// ---------------------------------------------------------------- against torch

using Outs = std::vector<Tensor>;
using V = const std::vector<Tensor>&;

// A fixture case: its input names, the op (outputs: the first is differentiated with the
// loss sum(out * w)), and the grad_fn torch gives the first output ("" for einsum, whose
// grad_fn is the last op of its composition, in xgrad as in torch).
struct OpCase {
  std::string name;
  std::vector<std::string> inputs;
  std::function<Outs(V)> fn;
  std::string grad_fn;
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class OpVsTorch : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpVsTorch, ValuesIndicesAndGradients) {
  const OpCase& c = GetParam();
  std::vector<Tensor> in;
  for (const std::string& k : c.inputs) {
    Tensor t = fx().get(c.name + "." + k).clone();
    if (t.is_floating_point()) t.requires_grad_();
    in.push_back(t);
  }
  Outs outs = c.fn(in);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const std::string key = c.name + (i == 0 ? ".out" : ".out" + std::to_string(i));
    expect_close(outs[i], fx().get(key), 1e-12, 1e-12, key);
  }
  if (!c.grad_fn.empty()) EXPECT_EQ(outs[0].grad_fn_name(), c.grad_fn);
  (outs[0] * fx().get(c.name + ".w")).sum().backward();
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i].requires_grad()) {
      const std::string key = c.name + "." + c.inputs[i] + ".grad";
      expect_close(in[i].grad(), fx().get(key), 1e-12, 1e-12, key);
    }
}

Outs vi(const ValuesIndices& r) { return {r.values, r.indices}; }

INSTANTIATE_TEST_SUITE_P(
    Api, OpVsTorch,
    ::testing::Values(
        OpCase{"amax_m1", {"x"}, [](V x) { return Outs{x[0].amax(-1)}; }, "AmaxBackward0"},
        OpCase{"amin_01",
               {"x"},
               [](V x) {
                 return Outs{x[0].amin({0, 1})};
               },
               "AminBackward0"},
        OpCase{"amin_m1_keep", {"x"}, [](V x) { return Outs{amin(x[0], -1, true)}; }, "AminBackward0"},
        OpCase{"amin_all", {"x"}, [](V x) { return Outs{amin(x[0])}; }, "AminBackward0"},
        OpCase{"max_m1", {"x"}, [](V x) { return vi(x[0].max(-1)); }, "MaxBackward0"},
        OpCase{"min_0_keep", {"x"}, [](V x) { return vi(x[0].min(0, true)); }, "MinBackward0"},
        OpCase{"topk_3", {"x"}, [](V x) { return vi(x[0].topk(3)); }, "TopkBackward0"},
        OpCase{
            "topk_2_dim0_smallest", {"x"}, [](V x) { return vi(topk(x[0], 2, 0, false)); }, "TopkBackward0"},
        OpCase{"topk_noncontig", {"x"}, [](V x) { return vi(x[0].t().topk(2, -1)); }, "TopkBackward0"},
        OpCase{"gather_1", {"x", "i"}, [](V x) { return Outs{x[0].gather(1, x[1])}; }, "GatherBackward0"},
        OpCase{"gather_0", {"x", "i"}, [](V x) { return Outs{gather(x[0], 0, x[1])}; }, "GatherBackward0"},
        OpCase{"scatter_add_0",
               {"x", "i", "s"},
               [](V x) { return Outs{x[0].scatter_add(0, x[1], x[2])}; },
               "ScatterAddBackward0"},
        OpCase{"scatter_add_1",
               {"x", "i", "s"},
               [](V x) { return Outs{scatter_add(x[0], 1, x[1], x[2])}; },
               "ScatterAddBackward0"},
        OpCase{"masked_select_bmask",
               {"x", "m"},
               [](V x) { return Outs{x[0].masked_select(x[1])}; },
               "MaskedSelectBackward0"},
        OpCase{"masked_select_bself",
               {"x", "m"},
               [](V x) { return Outs{masked_select(x[0], x[1])}; },
               "MaskedSelectBackward0"},
        OpCase{"roll_flat", {"x"}, [](V x) { return Outs{x[0].roll(5)}; }, "RollBackward0"},
        OpCase{"roll_0", {"x"}, [](V x) { return Outs{x[0].roll(-1, 0)}; }, "RollBackward0"},
        OpCase{"roll_two",
               {"x"},
               [](V x) {
                 return Outs{roll(x[0], {1, -6}, {0, 1})};
               },
               "RollBackward0"},
        OpCase{"roll_noncontig", {"x"}, [](V x) { return Outs{x[0].t().roll(2, -1)}; }, "RollBackward0"},
        OpCase{"tril_", {"x"}, [](V x) { return Outs{x[0].clone().tril_(-1)}; }, "TrilBackward0"},
        OpCase{"triu_", {"x"}, [](V x) { return Outs{(x[0] * 2.0).triu_(1)}; }, "TriuBackward0"},
        OpCase{"outer", {"a", "b"}, [](V x) { return Outs{outer(x[0], x[1])}; }, "MulBackward0"},
        OpCase{"norm_all", {"x"}, [](V x) { return Outs{x[0].norm()}; }, "NormBackward1"},
        OpCase{"norm_2_1", {"x"}, [](V x) { return Outs{x[0].norm(2, 1)}; }, "NormBackward1"},
        OpCase{"norm_1_m1_keep", {"x"}, [](V x) { return Outs{x[0].norm(1, -1, true)}; }, "NormBackward1"},
        OpCase{"norm_3_dims",
               {"x"},
               [](V x) {
                 return Outs{norm(x[0], 3, {0, 2})};
               },
               "NormBackward1"},
        OpCase{"norm_inf_1", {"x"}, [](V x) { return Outs{x[0].norm(INFINITY, 1)}; }, "NormBackward1"},
        OpCase{"norm_zero_row", {"x"}, [](V x) { return Outs{x[0].norm(2, 1)}; }, "NormBackward1"},
        OpCase{"where_method",
               {"x", "y", "c"},
               [](V x) { return Outs{x[0].where(x[2], x[1])}; },
               "WhereBackward0"},
        OpCase{"where_scalar",
               {"x", "c"},
               [](V x) { return Outs{where(x[1], x[0], 0.5) + where(x[1], -1.5, x[0]) * 2.0}; },
               "AddBackward0"},
        // xgrad's pieces are narrow() views: SliceBackward0 where torch names SplitBackward0
        OpCase{"split_sizes", {"x"}, [](V x) { return Outs{x[0].split({2, 3}, 1)[1]}; }, "SliceBackward0"},
        OpCase{"chunk_m1", {"x"}, [](V x) { return Outs{x[0].chunk(2, -1)[0]}; }, "SliceBackward0"},
        // index_put_ / x[i, j] = v
        OpCase{"index_put_acc",
               {"x", "i", "v"},
               [](V x) { return Outs{x[0].clone().index_put_({x[1]}, x[2], true)}; },
               "IndexPutBackward0"},
        OpCase{"index_put_bcast",
               {"x", "i", "j", "v"},
               [](V x) { return Outs{x[0].clone().index_put_({x[1], x[2]}, x[3])}; },
               "IndexPutBackward0"},
        OpCase{"index_put_neg",
               {"x", "i", "v"},
               [](V x) { return Outs{index_put(x[0] * 1.0, {x[1]}, x[2])}; },
               "IndexPutBackward0"},
        // einsum
        OpCase{"einsum_qk", {"q", "k"}, [](V x) { return Outs{einsum("bhqd,bhkd->bhqk", x[0], x[1])}; }, ""},
        OpCase{"einsum_wv", {"a", "v"}, [](V x) { return Outs{einsum("bhqk,bhkd->bhqd", x[0], x[1])}; }, ""},
        OpCase{"einsum_mm", {"a", "b"}, [](V x) { return Outs{einsum("ij,jk->ik", x[0], x[1])}; }, ""},
        OpCase{"einsum_bmm", {"a", "b"}, [](V x) { return Outs{einsum("bij,bjk->bik", x[0], x[1])}; }, ""},
        OpCase{"einsum_outer", {"a", "b"}, [](V x) { return Outs{einsum("i,j->ij", x[0], x[1])}; }, ""},
        OpCase{"einsum_implicit",
               {"a", "b"},
               [](V x) { return Outs{einsum("ji,kj", x[0].t().contiguous(), x[1].t().contiguous())}; },
               ""},
        OpCase{"einsum_transpose_sum", {"a"}, [](V x) { return Outs{einsum("bij->jb", {x[0]})}; }, ""},
        OpCase{"einsum_chain3",
               {"a", "b", "c"},
               [](V x) { return Outs{einsum("ij,jk,kl->il", x[0], x[1], x[2])}; },
               ""},
        OpCase{"einsum_heads_out",
               {"x", "p"},
               [](V x) { return Outs{einsum("bthd,hde->bte", x[0], x[1])}; },
               ""}),
    [](const ::testing::TestParamInfo<OpCase>& info) { return info.param.name; });

TEST(ApiOps, ArgminAndArgmaxMethods) {
  Tensor x = fx().get("max_m1.x");
  expect_close(x.argmin(), fx().get("argmin_flat.out"), 0, 0, "argmin()");
  EXPECT_EQ(x.argmax().item(), argmax(x).item());
  EXPECT_EQ(x.argmin(-1).to_vector<int64_t>(), argmin(x, -1).to_vector<int64_t>());
}

TEST(ApiOps, MethodFormsForwardToTheFreeFunctions) {
  Tensor x = randn({4, 5});
  Tensor idx = tensor({3, 0, 3});
  expect_close(x.index_select(0, idx), index_select(x, 0, idx), 0, 0, "index_select");
  expect_close(x.relu(), relu(x), 0, 0, "relu");
  expect_close(x.tril(1), tril(x, 1), 0, 0, "tril");
  expect_close(x.triu(-1), triu(x, -1), 0, 0, "triu");
  ASSERT_EQ(x.chunk(2, 1).size(), 2u);
  expect_close(x.chunk(2, 1)[1], chunk(x, 2, 1)[1], 0, 0, "chunk");
  expect_close(x.split(std::vector<int64_t>{1, 3}, 0)[1], split(x, {1, 3}, 0)[1], 0, 0, "split");
}

TEST(ApiOps, InPlaceTrianglesOnAStridedTensor) {
  // a (3, 4) view of a (4, 3) buffer, zeroed below the diagonal in place
  Tensor base = arange(0, 12, 1, kFloat64).reshape({3, 4}).t().contiguous();
  Tensor v = base.t();  // the values of arange(12).reshape(3, 4), strides (1, 3)
  const uint64_t before = v.version();
  v.triu_(1);
  expect_close(v, fx().get("triu_noncontig.out"), 0, 0, "triu_");
  EXPECT_GT(v.version(), before);
  EXPECT_EQ(base.to_vector<double>()[1], 0.0);  // the buffer itself was written
}

TEST(ApiOps, StdOfAConstantSliceHasAZeroGradientLikeTorch) {
  Tensor x = fx().get("std_const.x").clone().requires_grad_();
  (x.std(1) * fx().get("std_const.w")).sum().backward();
  auto g = x.grad().to_vector<double>();
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[2], 0.0);
}

TEST(ApiOps, ScatterAddAccumulatesRepeatedIndices) {
  Tensor out = scatter_add(zeros({3}, kInt64), 0, tensor({1, 1, 1, 0}), tensor({1, 2, 3, 4}));
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{4, 6, 0}));
  Tensor g = gather(tensor({10, 20, 30}), 0, tensor({2, 2, 0}));
  EXPECT_EQ(g.to_vector<int64_t>(), (std::vector<int64_t>{30, 30, 10}));
}

TEST(ApiOps, TopkTiesAndNaN) {
  const double nan = std::nan("");
  Tensor x = from_vector(std::vector<double>{1.0, nan, 3.0, 3.0}, {4});
  auto [v, i] = x.topk(2);
  EXPECT_TRUE(std::isnan(v.to_vector<double>()[0]));  // NaN ranks first, as in torch
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(topk(tensor({3, 1, 3}), 2).indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(topk(x, 0).values.shape(), (Shape{0}));
}

TEST(ApiOps, WhereWithANumberKeepsTheTensorsDtype) {
  Tensor c = tensor({true, false, true});
  EXPECT_EQ(where(c, tensor({1, 2, 3}), 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(where(c, tensor({1, 2, 3}), 0.5).dtype(), kFloat32);  // as torch promotes
  EXPECT_EQ(where(c, 2.0, zeros({3}, kFloat64)).dtype(), kFloat64);
}

TEST(ApiOps, OuterAndRollOfIntegers) {
  EXPECT_EQ(outer(tensor({1, 2}), tensor({3, 4, 5})).to_vector<int64_t>(),
            (std::vector<int64_t>{3, 4, 5, 6, 8, 10}));
  EXPECT_EQ(arange(5).roll(-2).to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 4, 0, 1}));
  EXPECT_EQ(masked_select(arange(4), tensor({true, false, false, true})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3}));
}

// ---------------------------------------------------------------- errors

TEST(ApiOpsErrors, NameTheOpAndTheShapes) {
  expect_error([] { zeros({2, 3}).std(2); }, {"std", "dimension 2", "[2, 3]"});
  expect_error([] { tensor({1, 2}).std(); }, {"std", "int64"});
  expect_error([] { zeros({2, 0}).amin(1); }, {"amin", "size 0", "[2, 0]"});
  expect_error([] { zeros({2, 3}).topk(4); }, {"topk", "k (4)", "size 3", "[2, 3]"});
  expect_error([] { zeros({2, 3}).topk(1, 2); }, {"topk", "dimension 2", "[2, 3]"});
  expect_error([] { zeros({2, 3}).gather(1, tensor({{0, 3}})); }, {"gather", "index 3", "size 3", "[2, 3]"});
  expect_error([] { zeros({2, 3}).gather(1, tensor({0, 1})); }, {"gather", "[2]", "as many dims", "[2, 3]"});
  expect_error([] { zeros({2, 3}).gather(0, tensor({{0.5, 1.0}})); }, {"gather", "int64", "float32"});
  expect_error(
      [] {
        zeros({2, 3}).gather(1, tensor({{0}, {1}, {0}}));
      },
      {"gather", "[3, 1]", "larger", "[2, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).scatter_add(1, tensor({{0, 1}}), zeros({1, 1}));
      },
      {"scatter_add", "[1, 2]", "src", "[1, 1]"});
  expect_error(
      [] {
        zeros({2, 3}).scatter_add(0, tensor({{0, 1}}), zeros({1, 2}, kFloat64));
      },
      {"scatter_add", "float64", "[1, 2]", "float32", "[2, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).masked_select(tensor({1, 0, 1}));
      },
      {"masked_select", "bool", "int64", "[2, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).masked_select(tensor({true, false}));
      },
      {"masked_select", "[2, 3]", "[2]"});
  expect_error([] { zeros({2, 3}).roll({1, 2}, {0}); }, {"roll", "[1, 2]", "[0]", "same length", "[2, 3]"});
  expect_error([] { zeros({2, 3}).roll(1, 2); }, {"roll", "dimension 2", "[2, 3]"});
  expect_error([] { zeros({3}).triu_(); }, {"triu_", "at least 2", "[3]"});
  expect_error([] { zeros({1, 3}).expand({2, 3}).tril_(); }, {"tril_", "expanded", "[2, 3]"});
  expect_error([] { outer(zeros({2, 2}), zeros({3})); }, {"outer", "1-D", "[2, 2]", "[3]"});
  expect_error([] { tensor({1, 2}).norm(); }, {"norm", "int64", "[2]"});
  expect_error([] { zeros({2, 3}).norm(0.0); }, {"norm", "p must be positive", "[2, 3]"});
  expect_error([] { zeros({2, 3}).norm(2, 2); }, {"norm", "dimension 2", "[2, 3]"});
  expect_error([] { outer(zeros({2}), zeros({3}, kFloat64)); },
               {"outer", "float32", "[2]", "float64", "[3]"});
  Tensor leaf = zeros({3, 3}).requires_grad_();
  expect_error([&] { leaf.tril_(); }, {"tril_", "leaf"});
  // index_put_
  expect_error(
      [] {
        zeros({2, 3}).index_put_({tensor({2})}, zeros({3}));
      },
      {"index_put_", "index 2", "dim 0", "size 2", "[2, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).index_put_({tensor({0, 1}), tensor({0, 1, 2})}, zeros({}));
      },
      {"index_put_", "[2]", "[3]"});
  expect_error(
      [] {
        zeros({2, 3}).index_put_({tensor({0})}, zeros({2}));
      },
      {"index_put_", "values", "[2]", "[1, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).index_put_({tensor({0})}, zeros({3}, kFloat64));
      },
      {"index_put_", "float64", "float32", "[2, 3]"});
  expect_error(
      [] {
        zeros({2, 3}).index_put_({tensor({true, false})}, zeros({3}));
      },
      {"index_put_", "int64", "bool", "masked_fill_"});
  expect_error(
      [] {
        zeros({2}).index_put_({tensor({0}), tensor({0})}, zeros({}));
      },
      {"index_put_", "2 index tensors", "[2]"});
  expect_error([&] { leaf.index_put_({tensor({0})}, zeros({3})); }, {"index_put_", "leaf"});
  expect_error(
      [] {
        zeros({1, 3}).expand({2, 3}).index_put_({tensor({0})}, zeros({3}));
      },
      {"index_put_", "[2, 3]"});
  // einsum
  expect_error(
      [] {
        einsum("ij,jk->ik", zeros({2, 3}), zeros({4, 5}));
      },
      {"einsum", "'j'", "3", "4", "[4, 5]"});
  expect_error([] { einsum("ij,jk->ik", zeros({2, 3})); }, {"einsum", "2 operand", "1 tensor"});
  expect_error([] { einsum("ijk,jk->i", zeros({2, 3}), zeros({3, 4})); }, {"einsum", "\"ijk\"", "[2, 3]"});
  expect_error([] { einsum("ii->i", zeros({3, 3})); }, {"einsum", "'i'", "repeats", "diagonal"});
  expect_error([] { einsum("...ij,jk->...ik", zeros({2, 3}), zeros({3, 4})); }, {"einsum", "ellipsis"});
  expect_error([] { einsum("ij,jk->iz", zeros({2, 3}), zeros({3, 4})); }, {"einsum", "'z'", "no operand"});
  expect_error(
      [] {
        einsum("ij,jk->ik", zeros({2, 3}), zeros({3, 4}, kFloat64));
      },
      {"einsum", "float32", "float64", "[3, 4]"});
}

TEST(ApiOps, IndexPutRepeatsAndViews) {
  // accumulate adds every repeat; without it the last write wins
  Tensor x = zeros({3});
  x.index_put_({tensor({0, 0, 2})}, tensor({1.0, 2.0, 5.0}), true);
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{3.0f, 0.0f, 5.0f}));
  x.index_put_({tensor({1, 1})}, tensor({7.0, 9.0}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{3.0f, 9.0f, 5.0f}));
  // through a view: the base sees the writes, and gradients flow back to the base's source
  Tensor src = arange(12).to(kFloat64).reshape({3, 4}).requires_grad_();
  Tensor base = src * 1.0;
  Tensor col = base.t();  // (4, 3) view
  Tensor v = tensor({10.0, 20.0}, kFloat64).requires_grad_();
  col.index_put_({tensor({1, 3}), tensor({2, 0})}, v);  // base[2][1] = 10, base[0][3] = 20
  EXPECT_EQ(base.to_vector<double>()[2 * 4 + 1], 10.0);
  EXPECT_EQ(base.to_vector<double>()[0 * 4 + 3], 20.0);
  base.sum().backward();
  std::vector<double> expect(12, 1.0);
  expect[2 * 4 + 1] = expect[3] = 0.0;
  EXPECT_EQ(src.grad().to_vector<double>(), expect);
  EXPECT_EQ(v.grad().to_vector<double>(), (std::vector<double>{1.0, 1.0}));
  // the out-of-place form leaves its input alone
  Tensor y = ones({2, 2});
  Tensor z = y.index_put({tensor({1})}, full({2}, 4.0));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>(4, 1.0f)));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{1.0f, 1.0f, 4.0f, 4.0f}));
}

TEST(ApiOps, EinsumAttentionEqualsMatmul) {
  Generator g(5);
  Tensor q = randn({2, 3, 4, 8}, &g), k = randn({2, 3, 6, 8}, &g);
  expect_close(einsum("bhqd,bhkd->bhqk", q, k), matmul(q, k.transpose(2, 3)), 1e-6, 1e-6, "scores");
  Tensor dot = einsum("i,i->", q.flatten(), q.flatten());
  EXPECT_EQ(dot.dim(), 0);
  expect_close(dot, (q * q).sum(), 1e-5, 1e-4, "dot");
}

}  // namespace
}  // namespace xgrad::testing
