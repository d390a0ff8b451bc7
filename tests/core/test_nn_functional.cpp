// tests/core/test_nn_functional.cpp: dropout, embedding, layer_norm, cross_entropy, mse_loss
// against PyTorch (tests/fixtures/activation_nn.txt), fused vs composed, and errors.
// Gradient checks are in gradcheck_rows_nn_functional.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing::act_nn {

// defined in test_activation.cpp
void check_fixture_case(const Fixture& fx, const std::string& name, int n_inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& fn, double rtol = 1e-5,
                        double atol = 1e-6);
const Fixture& activation_nn_fixture();
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts);

namespace {

using V = std::vector<Tensor>;

// ---------------------------------------------------------------- dropout
TEST(Dropout, MasksMatchTorchStream) {
  const Fixture& fx = activation_nn_fixture();
  // torch.manual_seed(123); torch.nn.Dropout(0.2)(torch.ones(5, 5))
  manual_seed(123);
  expect_close(dropout(ones({5, 5}), 0.2), fx.get("dropout_ones.out"), 0, 0, "dropout_ones");
  for (const char* name : {"dropout_p03", "dropout_p05_f64"}) {
    SCOPED_TRACE(name);
    const std::string n = name;
    const double p = n == "dropout_p03" ? 0.3 : 0.5;
    Tensor x = fx.get(n + ".in0").detach().requires_grad_();
    Generator g(static_cast<uint64_t>(fx.get(n + ".seed").item()));
    Tensor out = dropout(x, p, true, &g);
    EXPECT_EQ(out.grad_fn_name(), "MulBackward0");
    expect_close(out, fx.get(n + ".out"), 0, 0, n + ".out");  // bit-exact
    out.backward(fx.get(n + ".dout"));
    expect_close(x.grad(), fx.get(n + ".grad0"), 0, 0, n + ".grad0");
  }
}

TEST(Dropout, IdentityZerosAndErrors) {
  Tensor x = randn({3, 4}).requires_grad_();
  Tensor same = dropout(x, 0.5, false);
  EXPECT_EQ(same.unsafe_impl(), x.unsafe_impl());  // no copy
  EXPECT_EQ(dropout(x, 0.0).unsafe_impl(), x.unsafe_impl());
  Tensor z = dropout(x, 1.0);
  for (float v : z.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  z.sum().backward();
  for (float v : x.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
  expect_error([&] { dropout(x, 1.5); }, {"dropout", "1.5"});
  expect_error([&] { dropout(x, -0.1); }, {"dropout", "-0.1"});
  expect_error([&] { dropout(arange(4), 0.5); }, {"dropout", "int64"});
}

TEST(Dropout, NonContiguousInputUsesTheContiguousStream) {
  // torch draws the mask for a contiguous tensor of the input's shape whatever the layout
  Tensor base = randn({4, 5});
  Tensor nc = base.t();
  Generator g1(0), g2(0);
  expect_close(dropout(nc, 0.5, true, &g1), dropout(nc.contiguous(), 0.5, true, &g2), 0, 0, "layout");
}

TEST(Dropout, KeepsAboutOneMinusPAndScales) {
  Generator g(1);
  Tensor y = dropout(ones({100000}), 0.25, true, &g);
  auto v = y.to_vector<float>();
  double kept = 0;
  for (float e : v) {
    EXPECT_TRUE(e == 0.0f || std::fabs(e - 1.0f / 0.75f) < 1e-6);
    kept += e != 0.0f;
  }
  EXPECT_NEAR(kept / v.size(), 0.75, 0.01);
}

// dropout is x * noise: a dropped -1 is -0, a dropped inf or NaN is NaN (torch's product), at
// every position of the SIMD loop and its tail.
TEST(Dropout, EqualsInputTimesNoiseForSpecialValues) {
  const int64_t n = 37;
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) {
    const float v[] = {-1.5f, 2.0f, -0.0f, INFINITY, -INFINITY, NAN, 0.0f};
    xs[i] = v[i % 7];
  }
  Tensor x = from_vector(xs, {n});
  Generator g1(3), g2(3);
  Tensor out = dropout(x, 0.4, true, &g1);
  std::vector<float> noise(n);
  g2.bernoulli(noise.data(), n, 0.6);
  const float scale = 1.0f / static_cast<float>(1.0 - 0.4);
  const std::vector<float> got = out.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float want = xs[i] * (noise[i] * scale);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << i << ": " << got[i];
    }
  }
}

// ---------------------------------------------------------------- embedding
TEST(Embedding, MatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "embedding", 2, [](const V& x) { return embedding(x[0], x[1]); });
  check_fixture_case(
      fx, "embedding_1d_f64", 2, [](const V& x) { return embedding(x[0], x[1]); }, 1e-14, 1e-15);
}

TEST(Embedding, ShapesLayoutsAndErrors) {
  Generator g(2);
  Tensor w = randn({10, 4}, &g).requires_grad_();
  Tensor ids = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor e = embedding(w, ids);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.grad_fn_name(), "EmbeddingBackward0");
  EXPECT_EQ(embedding(w, scalar_tensor(3, kInt64)).shape(), (Shape{4}));
  // a transposed weight and non-contiguous ids give the same rows
  Tensor wt = randn({4, 10}, &g).t();
  Tensor idt = tensor({{1, 2}, {3, 4}, {5, 6}}).t();
  expect_close(embedding(wt, idt), embedding(wt.contiguous(), idt.contiguous()), 0, 0, "layout");
  expect_error(
      [&] {
        embedding(w, tensor({0, 10}));
      },
      {"embedding", "index 10", "num_embeddings 10", "[10, 4]"});
  expect_error([&] { embedding(w, tensor({-1})); }, {"embedding", "index -1"});
  expect_error([&] { embedding(w, tensor({1.0, 2.0})); }, {"embedding", "int64", "float32"});
  expect_error([&] { embedding(randn({10}), tensor({1})); }, {"embedding", "2-D", "[10]"});
}

// ---------------------------------------------------------------- layer_norm
TEST(LayerNorm, MatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(
      fx, "layer_norm", 3, [](const V& x) { return layer_norm(x[0], {8}, x[1], x[2]); }, 1e-5, 1e-5);
  check_fixture_case(
      fx, "layer_norm_2d_f64", 3,
      [](const V& x) {
        return layer_norm(x[0], {3, 8}, x[1], x[2]);
      },
      1e-11, 1e-12);
  check_fixture_case(
      fx, "layer_norm_noaffine", 1,
      [](const V& x) { return layer_norm(x[0], {8}, Tensor(), Tensor(), 1e-3); }, 1e-5, 1e-5);
  check_fixture_case(
      fx, "layer_norm_wide", 3, [](const V& x) { return layer_norm(x[0], {37}, x[1], x[2]); }, 1e-5, 1e-5);
}

// The fused kernel (rows in groups of 8, SIMD batches and a scalar tail) against the composed
// ops, with and without weight and bias, at a row length with and without a tail.
// n 16, 64 and 128 are rows of whole SIMD batches (vec::layer_norm_rows_k, in registers),
// 37 is not (the general loops); float32 at the GPTs' widths, with float32 tolerances.
TEST(LayerNorm, FusedMatchesComposition) {
  for (auto [n, dt] : {std::pair<int64_t, DType>{16, kFloat64},
                       {37, kFloat64},
                       {64, kFloat32},
                       {128, kFloat32},
                       {37, kFloat32}}) {
    const double tol = dt == kFloat64 ? 1e-12 : 2e-5, grad_tol = dt == kFloat64 ? 1e-10 : 1e-4;
    for (bool affine : {true, false}) {
      SCOPED_TRACE("n " + std::to_string(n) + " " + dtype_name(dt) +
                   (affine ? ", affine" : ", no weight or bias"));
      Generator g(4);
      Tensor x = randn({3, 7, n}, &g, dt);
      Tensor w = randn({n}, &g, dt), b = randn({n}, &g, dt);
      Tensor dout = randn({3, 7, n}, &g, dt);
      V f{x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()};
      V c{x.detach().requires_grad_(), w.detach().requires_grad_(), b.detach().requires_grad_()};
      Tensor fused =
          affine ? layer_norm(f[0], {n}, f[1], f[2], 1e-5) : layer_norm(f[0], {n}, Tensor(), Tensor(), 1e-5);
      EXPECT_EQ(fused.grad_fn_name(), "NativeLayerNormBackward0");
      Tensor mu = c[0].mean({-1}, true);
      Tensor var = c[0].var({-1}, false, true);
      Tensor composed = (c[0] - mu) / sqrt(var + 1e-5);
      if (affine) composed = composed * c[1] + c[2];
      expect_close(fused, composed, tol, tol, "value");
      fused.backward(dout);
      composed.backward(dout);
      for (int i = 0; i < (affine ? 3 : 1); ++i)
        expect_close(f[i].grad(), c[i].grad(), grad_tol, grad_tol / 10, "grad" + std::to_string(i));
    }
  }
}

TEST(LayerNorm, NonContiguousAndPartialAffine) {
  Generator g(6);
  Tensor base = randn({8, 5}, &g);
  Tensor nc = base.t();  // (5, 8)
  Tensor w = randn({8}, &g);
  expect_close(layer_norm(nc, {8}, w, Tensor()), layer_norm(nc.contiguous(), {8}, w, Tensor()), 0, 0, "nc");
  Tensor x = randn({2, 8}, &g).requires_grad_();
  Tensor wr = w.detach().requires_grad_();
  layer_norm(x, {8}, wr, Tensor()).sum().backward();
  EXPECT_TRUE(wr.grad().defined());
  EXPECT_EQ(wr.grad().shape(), (Shape{8}));
}

TEST(LayerNorm, Errors) {
  Tensor x = randn({2, 3, 8});
  expect_error([&] { layer_norm(x, {4}, Tensor(), Tensor()); }, {"layer_norm", "[4]", "[2, 3, 8]"});
  expect_error([&] { layer_norm(x, {2, 3, 8, 1}, Tensor(), Tensor()); }, {"layer_norm", "[2, 3, 8]"});
  expect_error([&] { layer_norm(x, {8}, ones({7}), Tensor()); }, {"layer_norm", "weight", "[7]", "[8]"});
  expect_error([&] { layer_norm(x, {8}, Tensor(), ones({8}, kFloat64)); }, {"layer_norm", "bias", "float64"});
  expect_error([&] { layer_norm(x, {}, Tensor(), Tensor()); }, {"layer_norm", "normalized_shape"});
}

// ---------------------------------------------------------------- cross_entropy
TEST(CrossEntropy, MatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  // torch's reference flattened (B, T, C) to (B*T, C); the class-last spelling needs no flatten
  check_fixture_case(fx, "cross_entropy_btc", 2,
                     [](const V& x) { return cross_entropy(x[0].flatten(0, 1), x[1].flatten()); });
  check_fixture_case(fx, "cross_entropy_btc", 2,
                     [](const V& x) { return cross_entropy_last_dim(x[0], x[1]); });
  check_fixture_case(
      fx, "cross_entropy_nc_f64", 2, [](const V& x) { return cross_entropy(x[0], x[1]); }, 1e-13, 1e-14);
  check_fixture_case(fx, "cross_entropy_ignore3", 2,
                     [](const V& x) { return cross_entropy(x[0], x[1], {.ignore_index = 3}); });
  check_fixture_case(fx, "cross_entropy_wide", 2, [](const V& x) { return cross_entropy(x[0], x[1]); });
}

TEST(CrossEntropy, ClassDimOneReductionSmoothingMatchTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "ce_nct_ignore", 2, [](const V& x) { return cross_entropy(x[0], x[1]); });
  check_fixture_case(fx, "ce_ncd1d2_none", 2,
                     [](const V& x) { return cross_entropy(x[0], x[1], {.reduction = "none"}); });
  check_fixture_case(fx, "ce_sum_smooth_ignore1", 2, [](const V& x) {
    return cross_entropy(x[0], x[1], {.ignore_index = 1, .reduction = "sum", .label_smoothing = 0.1});
  });
  check_fixture_case(
      fx, "ce_mean_smooth_f64", 2,
      [](const V& x) { return cross_entropy(x[0], x[1], {.label_smoothing = 0.2}); }, 1e-13, 1e-14);
  check_fixture_case(fx, "ce_none_smooth", 2, [](const V& x) {
    return cross_entropy(x[0], x[1], {.reduction = "none", .label_smoothing = 0.3});
  });
  check_fixture_case(fx, "ce_1d", 2, [](const V& x) { return cross_entropy(x[0], x[1]); });
}

TEST(CrossEntropy, LastDimEqualsClassDimOneMoved) {
  Generator g(3);
  Tensor logits = randn({2, 5, 7}, &g, kFloat64);  // (B, T, C)
  Tensor targets = tensor({{0, 6, 3, -100, 2}, {1, 1, 5, 4, -100}});
  Tensor a = logits.detach().requires_grad_(), b = logits.detach().requires_grad_();
  Tensor la = cross_entropy_last_dim(a, targets, {.label_smoothing = 0.1});
  Tensor lb = cross_entropy(b.transpose(1, 2), targets, {.label_smoothing = 0.1});  // (B, C, T)
  EXPECT_EQ(la.item(), lb.item());
  la.backward();
  lb.backward();
  expect_close(a.grad(), b.grad(), 0, 0, "grad");
  Tensor none = cross_entropy_last_dim(logits, targets, {.reduction = "none"});
  EXPECT_EQ(none.shape(), (Shape{2, 5}));
  EXPECT_EQ(none.to_vector<double>()[3], 0.0);  // ignored
  expect_close(none.sum(), cross_entropy_last_dim(logits, targets, {.reduction = "sum"}), 1e-14, 1e-14,
               "sum");
}

TEST(CrossEntropy, FusedMatchesNegativeLogSoftmaxGathered) {
  Generator g(8);
  Tensor logits = randn({2, 5, 7}, &g, kFloat64);
  Tensor targets = tensor({{0, 6, 3, -100, 2}, {1, 1, 5, 4, -100}});
  Tensor a = logits.detach().requires_grad_(), b = logits.detach().requires_grad_();
  Tensor loss = cross_entropy_last_dim(a, targets);
  EXPECT_EQ(loss.grad_fn_name(), "NllLossBackward0");
  // one-hot of the targets (zero rows for ignored ones), then -sum(onehot * log_softmax) / 8
  std::vector<double> hot(2 * 5 * 7, 0.0);
  auto t = targets.to_vector<int64_t>();
  for (std::size_t r = 0; r < t.size(); ++r)
    if (t[r] >= 0) hot[r * 7 + t[r]] = 1.0;
  Tensor onehot = from_vector(hot, {2, 5, 7});
  Tensor composed = -(log_softmax(b, -1) * onehot).sum() / 8.0;
  expect_close(loss, composed, 1e-13, 1e-14, "value");
  loss.backward();
  composed.backward();
  expect_close(a.grad(), b.grad(), 1e-12, 1e-14, "grad");
}

// float32 runs its exps on a polynomial (vec::exp_nonpositive): a -inf logit still gets
// exactly zero probability and gradient, the loss is the one without it, and NaN propagates.
TEST(CrossEntropy, Float32InfiniteAndNanLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(3 * 40);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7f * static_cast<float>(i)) * 5.0f;
  v[3] = v[50] = v[117] = -inf;  // one in each row (rows of 40: 32 in batches, 8 in the tail)
  v[77] = -200.0f;               // far below the row's max: exp gives exactly 0 too
  Tensor x = from_vector(v, {3, 40}).requires_grad_();
  Tensor t = tensor({int64_t{0}, int64_t{12}, int64_t{39}});
  Tensor loss = cross_entropy(x, t);
  // the same rows without those logits, through the float64 composition
  Tensor x64 = x.detach().to(kFloat64);
  Tensor ref = -gather(log_softmax(x64, -1), 1, t.unsqueeze(1)).mean();
  expect_close(loss.to(kFloat64), ref, 1e-6, 1e-6, "loss");
  loss.backward();
  std::vector<float> gx = x.grad().to_vector<float>();
  for (int i : {3, 50, 117, 77}) EXPECT_EQ(gx[i], 0.0f) << "element " << i;
  std::vector<double> hot(3 * 40, 0.0);
  hot[0] = hot[40 + 12] = hot[80 + 39] = 1.0;
  Tensor g64 = (softmax(x64, -1) - from_vector(hot, {3, 40})) / 3.0;
  expect_close(x.grad().to(kFloat64), g64, 1e-5, 1e-7, "grad");
  v[41] = std::nanf("");
  EXPECT_TRUE(std::isnan(cross_entropy(from_vector(v, {3, 40}), t).item()));
  v[41] = 0.0f;
  v[45] = std::nanf("");  // in a row's SIMD part and in its tail
  v[118] = std::nanf("");
  Tensor none = cross_entropy(from_vector(v, {3, 40}), t, {.reduction = "none"});
  std::vector<float> per_row = none.to_vector<float>();
  EXPECT_FALSE(std::isnan(per_row[0]));
  EXPECT_TRUE(std::isnan(per_row[1]));
  EXPECT_TRUE(std::isnan(per_row[2]));
}

TEST(CrossEntropy, AllIgnoredIsNanLikeTorch) {
  EXPECT_TRUE(std::isnan(cross_entropy(randn({2, 3}), tensor({-100, -100})).item()));
}

TEST(CrossEntropy, Errors) {
  Tensor logits = randn({2, 6, 4});  // (N, C, T): 6 classes
  expect_error(
      [&] {
        cross_entropy(logits, tensor({{0, 1, 6, 2}, {0, 0, 0, 0}}));
      },
      {"cross_entropy", "target 6", "6 classes"});
  expect_error(
      [&] {
        cross_entropy(logits, tensor({{0, 1, -1, 2}, {0, 0, 0, 0}}));
      },
      {"cross_entropy", "target -1"});
  expect_error(
      [&] {
        cross_entropy(logits, tensor({0, 1}));
      },
      {"cross_entropy", "[2]", "[2, 6, 4]", "[2, 4]"});
  // class-last (B, T, C) logits with (B, T) targets: torch's layout rejects them, with a hint
  expect_error(
      [&] {
        cross_entropy(randn({2, 4, 6}), zeros({2, 4}, kInt64));
      },
      {"cross_entropy", "[2, 4, 6]", "[2, 6]", "cross_entropy_last_dim"});
  expect_error(
      [&] {
        cross_entropy_last_dim(randn({2, 6, 4}), zeros({2, 4}, kInt64));
      },
      {"cross_entropy_last_dim", "[2, 6, 4]", "[2, 6]", "last dim"});
  expect_error([&] { cross_entropy(randn({6}), tensor({1})); }, {"cross_entropy", "[6]", "[]"});
  expect_error([&] { cross_entropy(randn({2, 6}), tensor({1.0, 2.0})); }, {"cross_entropy", "int64"});
  expect_error(
      [&] {
        cross_entropy(randn({2, 6}), tensor({1, 2}), {.reduction = "avg"});
      },
      {"cross_entropy", "reduction", "avg"});
  expect_error(
      [&] {
        cross_entropy(randn({2, 6}), tensor({1, 2}), {.label_smoothing = 1.5});
      },
      {"cross_entropy", "label_smoothing", "1.5"});
  expect_error([&] { cross_entropy(scalar_tensor(1.0), scalar_tensor(0, kInt64)); }, {"cross_entropy", "[]"});
}

// ---------------------------------------------------------------- mse_loss
TEST(MseLoss, MatchesTorchAndErrors) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "mse_loss", 2, [](const V& x) { return mse_loss(x[0], x[1]); });
  Tensor a = randn({3, 4}).requires_grad_();
  EXPECT_EQ(mse_loss(a, zeros({3, 4})).grad_fn_name(), "MseLossBackward0");
  expect_error([&] { mse_loss(a, zeros({3, 1})); }, {"mse_loss", "[3, 4]", "[3, 1]"});
  expect_error([&] { mse_loss(a, zeros({3, 4}, kFloat64)); }, {"mse_loss", "float32", "float64"});
}

// ---------------------------------------------------------------- a GPT-like chain
TEST(NnFunctional, ChainMatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "chain", 5, [](const V& x) {
    Tensor h = gelu(layer_norm(embedding(x[0], x[3]), {6}, x[1], x[2]), "tanh");
    return cross_entropy_last_dim(h * 3.0, x[4]);
  });
}

}  // namespace
}  // namespace xgrad::testing::act_nn
