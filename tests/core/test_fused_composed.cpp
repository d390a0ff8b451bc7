// tests/core/test_fused_composed.cpp: the two backward paths of every fused op agree.
//
// A fused op's backward calls its kernel in an ordinary backward and computes the same
// gradient from recorded ops under create_graph (so that it can be differentiated again).
// Each case below runs one op forward once, then takes the gradients of <out, w> with respect
// to the op's float inputs twice from the same graph: without create_graph (the kernel) and
// with it (the recorded ops). The weights w are random and require grad themselves, so a
// gradient from the recorded path carries a grad_fn whatever the op: a case fails if
// create_graph still took the kernel path, as well as if the two gradients differ. float64
// must agree to rounding, float32 closely.
//
// Below the table: embedding's recorded gradient is torch's EmbeddingDenseBackwardBackward0,
// and dropout's recorded gradient keeps the forward's mask.
//
// Adding a fused op: add a case (a name, the float inputs' shapes, the op on them) and cover
// its options (dims, strided inputs, reductions) with a case each.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using V = std::vector<Tensor>;

struct ComposedCase {
  std::string name;
  std::vector<Shape> shapes;  // the float leaves, randn from a fixed seed
  std::function<Tensor(const V&)> fn;
};

// a strided view of x with x's shape: the transpose of a copy stored transposed
Tensor strided(const Tensor& x) { return x.transpose(-1, -2).contiguous().transpose(-1, -2); }

std::vector<ComposedCase> cases() {
  std::vector<ComposedCase> c;
  // ---- activation.cpp
  c.push_back({"softmax/last", {{3, 7}}, [](const V& x) { return softmax(x[0], -1); }});
  c.push_back({"softmax/middle", {{2, 5, 3}}, [](const V& x) { return softmax(x[0], 1); }});
  c.push_back({"softmax/causal", {{4, 4}}, [](const V& x) {
                 const Tensor above = triu(ones({4, 4}), 1) > 0.0;  // -inf above the diagonal
                 return softmax(x[0] + zeros({4, 4}, x[0].dtype()).masked_fill(above, -INFINITY), -1);
               }});
  c.push_back({"log_softmax/last", {{3, 7}}, [](const V& x) { return log_softmax(x[0], -1); }});
  c.push_back(
      {"log_softmax/first/strided", {{4, 6}}, [](const V& x) { return log_softmax(strided(x[0]), 0); }});
  c.push_back({"relu", {{5, 6}}, [](const V& x) { return relu(x[0]); }});
  c.push_back({"sigmoid", {{5, 6}}, [](const V& x) { return sigmoid(x[0]); }});
  for (std::string a : {"none", "tanh"}) {
    c.push_back({"gelu/" + a, {{4, 9}}, [a](const V& x) { return gelu(x[0] * 2.0, a); }});
    c.push_back({"gelu/" + a + "/strided", {{4, 9}}, [a](const V& x) { return gelu(strided(x[0]), a); }});
  }
  // ---- elementwise_math.cpp
  c.push_back({"silu", {{5, 6}}, [](const V& x) { return silu(x[0] * 3.0); }});
  c.push_back({"silu/strided", {{4, 9}}, [](const V& x) { return silu(strided(x[0])); }});
  // ---- nn_functional.cpp
  c.push_back({"dropout/p0.3", {{6, 7}}, [](const V& x) {
                 Generator g(5);
                 return dropout(x[0], 0.3, true, &g);
               }});
  c.push_back({"dropout/p1", {{3, 4}}, [](const V& x) { return dropout(x[0], 1.0, true); }});
  c.push_back({"embedding/repeated_ids", {{10, 4}}, [](const V& x) {
                 return embedding(x[0], tensor({{1, 3, 3}, {9, 0, 1}}));
               }});
  c.push_back({"layer_norm/affine", {{3, 8}, {8}, {8}}, [](const V& x) {
                 return layer_norm(x[0], {8}, x[1], x[2]);
               }});
  c.push_back({"layer_norm/two_dims/strided", {{2, 4, 3}, {4, 3}, {4, 3}}, [](const V& x) {
                 return layer_norm(strided(x[0]), {4, 3}, x[1], x[2]);
               }});
  c.push_back({"layer_norm/no_affine/one_row", {{6}}, [](const V& x) {
                 return layer_norm(x[0], {6}, Tensor(), Tensor(), 1e-3);
               }});
  const Tensor t = tensor({2, 0, 4, 4, 1});
  c.push_back({"cross_entropy/mean", {{5, 6}}, [t](const V& x) { return cross_entropy(x[0], t); }});
  c.push_back({"cross_entropy/sum/smoothing", {{5, 6}}, [t](const V& x) {
                 return cross_entropy(x[0], t, {.reduction = "sum", .label_smoothing = 0.2});
               }});
  c.push_back({"cross_entropy/none/ignore_index", {{5, 6}}, [t](const V& x) {
                 return cross_entropy(x[0], t, {.ignore_index = 4, .reduction = "none"});
               }});
  c.push_back({"cross_entropy/mean/ignore_and_smoothing", {{5, 6}}, [t](const V& x) {
                 return cross_entropy(x[0], t, {.ignore_index = 0, .label_smoothing = 0.1});
               }});
  c.push_back({"cross_entropy/classes_in_dim1", {{2, 4, 3}}, [](const V& x) {
                 return cross_entropy(x[0], tensor({{0, 3, 1}, {2, 2, 0}}), {.label_smoothing = 0.05});
               }});
  c.push_back({"cross_entropy_last_dim", {{2, 3, 5}}, [](const V& x) {
                 return cross_entropy_last_dim(x[0], tensor({{0, 4, 1}, {2, 2, -100}}));
               }});
  c.push_back({"mse_loss", {{4, 5}, {4, 5}}, [](const V& x) { return mse_loss(x[0], strided(x[1])); }});
  // ---- linalg.cpp, einsum.cpp
  c.push_back({"matmul/mm", {{3, 4}, {4, 5}}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back(
      {"matmul/broadcast_batch", {{2, 1, 3, 4}, {5, 4, 2}}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul/transposed", {{2, 4, 3}, {2, 5, 4}}, [](const V& x) {
                 return matmul(x[0].transpose(1, 2), x[1].transpose(1, 2));
               }});
  c.push_back({"matmul/vec_mat", {{4}, {2, 4, 3}}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul/mat_vec", {{3, 4}, {4}}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul/dot", {{6}, {6}}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back(
      {"linear/bias/3d", {{2, 3, 4}, {5, 4}, {5}}, [](const V& x) { return linear(x[0], x[1], x[2]); }});
  c.push_back(
      {"linear/no_bias/strided", {{6, 4}, {3, 4}}, [](const V& x) { return linear(strided(x[0]), x[1]); }});
  c.push_back({"linear/vector", {{4}, {3, 4}, {3}}, [](const V& x) { return linear(x[0], x[1], x[2]); }});
  c.push_back({"outer", {{3}, {4}}, [](const V& x) { return outer(x[0], x[1]); }});
  c.push_back({"norm/dim", {{3, 4}}, [](const V& x) { return norm(x[0], 2.0, 1); }});
  c.push_back({"einsum/batched", {{2, 3, 4}, {2, 4, 5}}, [](const V& x) {
                 return einsum("bij,bjk->bik", x[0], x[1]);
               }});
  c.push_back({"einsum/three_operands", {{3, 4}, {4, 5}, {5, 2}}, [](const V& x) {
                 return einsum("ij,jk,kl->li", x[0], x[1], x[2]);
               }});
  return c;
}

struct ComposedParam {
  ComposedCase c;
  DType dtype;
};

// gtest prints a failing case by its name rather than as a byte dump
void PrintTo(const ComposedParam& p, std::ostream* os) { *os << p.c.name; }

class FusedComposed : public ::testing::TestWithParam<ComposedParam> {};

TEST_P(FusedComposed, RecordedBackwardGivesTheKernelsGradient) {
  const ComposedCase& c = GetParam().c;
  const DType dt = GetParam().dtype;
  Generator gen(17);
  V leaves;
  for (const Shape& s : c.shapes) leaves.push_back(randn(s, &gen, dt).requires_grad_());
  const Tensor out = c.fn(leaves);
  const Tensor w = randn(out.shape(), &gen, dt).requires_grad_();  // dloss/dout, itself a leaf

  const V fast = autograd::grad({out}, leaves, {w}, {.retain_graph = true});
  const V composed = autograd::grad({out}, leaves, {w}, {.retain_graph = true, .create_graph = true});

  const bool f64 = dt == kFloat64;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::string what = c.name + " input " + std::to_string(i);
    EXPECT_FALSE(fast[i].requires_grad()) << what << ": the kernel path recorded its gradient";
    EXPECT_TRUE(composed[i].requires_grad()) << what << ": create_graph gave a gradient without history";
    expect_close(composed[i].detach(), fast[i], f64 ? 1e-11 : 2e-5, f64 ? 1e-13 : 1e-6, what);
  }
}

// embedding's gradient is an op of its own under create_graph, named as torch names it, and
// its backward is an embedding lookup of the gradient flowing into it
TEST(FusedComposedEmbedding, GradientIsARecordedEmbeddingDenseBackward) {
  const Tensor ids = tensor({{1, 3, 3}, {4, 0, 1}});
  Tensor weight = randn({5, 2}, nullptr, kFloat64).requires_grad_();
  Tensor dout = randn({2, 3, 2}, nullptr, kFloat64).requires_grad_();
  const Tensor dw = autograd::grad({embedding(weight, ids)}, {weight}, {dout}, {.create_graph = true})[0];
  EXPECT_EQ(dw.grad_fn_name(), "EmbeddingDenseBackwardBackward0");
  const Tensor r = randn({5, 2}, nullptr, kFloat64);
  const Tensor ddout = autograd::grad({dw}, {dout}, {r})[0];
  expect_close(ddout, embedding(r, ids), 0.0, 0.0, "d<dw, r>/ddout");
}

// dropout's recorded gradient multiplies by the forward's mask (no new draw), as does its
// derivative with respect to the incoming gradient
TEST(FusedComposedDropout, RecordedBackwardKeepsTheForwardMask) {
  Generator gen(5);
  Tensor x = (rand({6, 7}, &gen, kFloat64) + 1.0).detach().requires_grad_();  // no zeros
  Tensor w = randn({6, 7}, &gen, kFloat64).requires_grad_();
  const Tensor y = dropout(x, 0.4, true, &gen);
  const Tensor noise = (y != 0.0).to(kFloat64) / 0.6;  // the forward's mask / (1 - p)
  const Tensor dx = autograd::grad({y}, {x}, {w}, {.create_graph = true})[0];
  expect_close(dx, w.detach() * noise, 1e-15, 0.0, "dx");
  const Tensor r = randn({6, 7}, &gen, kFloat64);
  expect_close(autograd::grad({dx}, {w}, {r})[0], r * noise, 1e-15, 0.0, "d<dx, r>/dw");
}

std::vector<ComposedParam> params() {
  std::vector<ComposedParam> p;
  for (DType dt : {kFloat64, kFloat32})
    for (const ComposedCase& c : cases()) p.push_back({c, dt});
  return p;
}

std::string param_name(const ::testing::TestParamInfo<ComposedParam>& info) {
  std::string s = info.param.c.name + (info.param.dtype == kFloat64 ? "_f64" : "_f32");
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Ops, FusedComposed, ::testing::ValuesIn(params()), param_name);

}  // namespace
}  // namespace xgrad::testing
