// tests/nn/test_llama_parts.cpp: SiLU, RMSNorm, rotary position embeddings and the SwiGLU
// feed-forward (nn/include/xgrad/nn/llama_layers.h, rope.h) against torch's values in
// tests/fixtures/llama_parts.txt (gen_llama_parts.py: torch 2.4's RMSNorm and the book's
// Llama 3.2 RoPE and FeedForward, written out in torch 1.13): outputs, input and parameter
// gradients, RoPE's cos/sin tables; gradchecks in double precision; RoPE's rotation
// properties; errors naming the op and the shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/fixture_reader.h"
#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::expect_error;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/llama_parts.txt");
  return fx;
}

// Tolerances by dtype: float32 results against torch's float32, float64 against float64.
double rtol_for(const Tensor& t) { return t.dtype() == kFloat64 ? 1e-12 : 1e-5; }
double atol_for(const Tensor& t) { return t.dtype() == kFloat64 ? 1e-13 : 1e-6; }

// Runs `module` on the fixture's <name>.in0 with <name>.dout and compares the output and the
// input's gradient; the parameter gradients are left in the module.
void check_forward_backward(Module& module, const std::string& name) {
  const Fixture& fx = fixture();
  Tensor x = fx.get(name + ".in0").clone().requires_grad_();
  Tensor out = module(x);
  expect_close(out, fx.get(name + ".out"), rtol_for(x), atol_for(x), name + ".out");
  out.backward(fx.get(name + ".dout"));
  expect_close(x.grad(), fx.get(name + ".grad0"), rtol_for(x), atol_for(x), name + ".grad0");
}

GradcheckResult check_module(Module& module, const Tensor& x, const std::string& name) {
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : module.parameters()) inputs.push_back(p);
  return gradcheck([&](const std::vector<Tensor>& in) { return module(in[0]); }, inputs, {.name = name});
}

// ---------------------------------------------------------------- SiLU
TEST(LlamaParts, SiLUIsXTimesSigmoid) {
  SiLU act;
  Tensor x = tensor({-20.0, -2.0, -0.5, 0.0, 0.5, 3.0, 20.0}, kFloat64);
  std::vector<double> y = act(x).to_vector<double>();
  std::vector<double> xs = x.to_vector<double>();
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_NEAR(y[i], xs[i] / (1 + std::exp(-xs[i])), 1e-15) << xs[i];
  EXPECT_TRUE(act.named_parameters().empty());
  Tensor xg = randn({3, 5}, nullptr, kFloat64).requires_grad_();
  auto r = check_module(act, xg, "SiLU");
  EXPECT_TRUE(r.ok) << r.message;
}

// ---------------------------------------------------------------- RMSNorm
TEST(LlamaParts, RMSNormInitAndRepr) {
  RMSNorm norm(8);
  auto params = norm.named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].first, "weight");
  expect_close(norm.weight, ones({8}), 0, 0, "RMSNorm(8).weight");
  EXPECT_FALSE(norm.eps.has_value());
  EXPECT_EQ(norm.extra_repr(), "(8,), eps=None, elementwise_affine=True");
  RMSNorm plain(Shape{3, 4}, 1e-5, false);
  EXPECT_FALSE(plain.weight.defined());
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_EQ(plain.extra_repr(), "(3, 4), eps=1e-05, elementwise_affine=False");
}

TEST(LlamaParts, RMSNormMatchesTorchFloat32) {
  const Fixture& fx = fixture();
  for (auto [name, eps] : {std::pair<std::string, std::optional<double>>{"rmsnorm_f32_affine_eps", 1e-5},
                           {"rmsnorm_f32_affine_default", std::nullopt}}) {
    RMSNorm norm(8, eps);
    norm.weight.detach().copy_(fx.get(name + ".in1"));
    check_forward_backward(norm, name);
    expect_close(norm.weight.grad(), fx.get(name + ".grad1"), 1e-5, 1e-6, name + ".grad1");
  }
  RMSNorm plain(8, std::nullopt, false);
  check_forward_backward(plain, "rmsnorm_f32_noaffine_default");
}

TEST(LlamaParts, RMSNormMatchesTorchFloat64) {
  const Fixture& fx = fixture();
  RMSNorm plain(8, 1e-3, false);
  check_forward_backward(plain, "rmsnorm_f64_noaffine_eps");
  RMSNorm norm(Shape{3, 4});  // over the last two dims, eps = finfo(float64).eps
  norm.to(kFloat64);
  norm.weight.detach().copy_(fx.get("rmsnorm_f64_2d_affine_default.in1"));
  check_forward_backward(norm, "rmsnorm_f64_2d_affine_default");
  expect_close(norm.weight.grad(), fx.get("rmsnorm_f64_2d_affine_default.grad1"), 1e-12, 1e-13,
               "rmsnorm_f64_2d_affine_default.grad1");
}

TEST(LlamaParts, RMSNormDefaultEpsIsTheDtypesMachineEpsilon) {
  // a row with mean(x^2) ~ 1e-8: eps = 1e-5 and eps = finfo(float32).eps give different rows,
  // and the fixture's two cases differ there
  const Fixture& fx = fixture();
  Tensor x = fx.get("rmsnorm_f32_noaffine_default.in0");
  RMSNorm by_default(8, std::nullopt, false);
  RMSNorm explicit_eps(8, static_cast<double>(std::numeric_limits<float>::epsilon()), false);
  expect_close(by_default(x), explicit_eps(x), 0, 0, "eps None vs finfo(float32).eps");
  RMSNorm book_eps(8, 1e-5, false);
  Tensor diff = (by_default(x) - book_eps(x)).abs().max();
  EXPECT_GT(diff.item<float>(), 1e-2);
}

TEST(LlamaParts, RMSNormGradcheck) {
  manual_seed(5);
  for (auto eps : {std::optional<double>{}, std::optional<double>{1e-2}}) {
    RMSNorm norm(Shape{2, 5}, eps);
    norm.to(kFloat64);
    {
      NoGradGuard g;
      norm.weight.normal_();
    }
    Tensor x = randn({3, 2, 5}, nullptr, kFloat64).requires_grad_();
    auto r = check_module(norm, x, "RMSNorm");
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(LlamaParts, RMSNormErrors) {
  RMSNorm norm(Shape{3, 4});
  expect_error([&] { norm(zeros({2, 4, 3})); }, {"RMSNorm", "[3, 4]", "[2, 4, 3]"});
  expect_error([&] { norm(zeros({4})); }, {"RMSNorm", "[3, 4]", "[4]"});
  expect_error([&] { RMSNorm(Shape{0}); }, {"RMSNorm", "[0]"});
  expect_error([&] { RMSNorm(4, -1.0); }, {"RMSNorm", "eps"});
  expect_error([&] { RMSNorm(4)(zeros({2, 4}, kInt64)); }, {"RMSNorm", "int64", "[2, 4]"});
}

// ---------------------------------------------------------------- RoPE
TEST(LlamaParts, RoPETablesMatchTheBook) {
  const Fixture& fx = fixture();
  RoPEFreqConfig scaled{
      .factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_context_length = 256};
  struct Case {
    std::string name;
    RoPEParams rope;
  };
  std::vector<Case> cases = {
      {"rope_plain", compute_rope_params(8, 10000, 16)},
      {"rope_llama3", compute_rope_params(32, 500000, 24, scaled)},
      {"rope_llama32", compute_rope_params(16, 500000, 256, RoPEFreqConfig{})},  // Llama 3.2's defaults
      {"rope_f64", compute_rope_params(8, 10000, 12, scaled, kFloat64)},
  };
  for (const Case& c : cases) {
    // cos and sin of float32 angles up to 255 rad: torch's and libm's cos/sin differ by an ulp
    expect_close(c.rope.cos, fx.get(c.name + ".cos"), 1e-5, 2e-6, c.name + ".cos");
    expect_close(c.rope.sin, fx.get(c.name + ".sin"), 1e-5, 2e-6, c.name + ".sin");
  }
}

TEST(LlamaParts, RoPEScalingChangesOnlyTheLowerFrequencies) {
  // head_dim 32, theta 500000: wavelengths 6.3, 14, 32 (kept), 74, 167 (blended), 379, ... (/ 8)
  RoPEFreqConfig scaled{
      .factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_context_length = 256};
  RoPEParams plain = compute_rope_params(32, 500000, 2, std::nullopt, kFloat64);
  RoPEParams llama3 = compute_rope_params(32, 500000, 2, scaled, kFloat64);
  // row 1 holds cos and sin of the angles at position 1: atan2 gives the inverse frequencies back
  auto frequencies = [](const RoPEParams& r) {
    std::vector<double> c = r.cos.select(0, 1).to_vector<double>(),
                        s = r.sin.select(0, 1).to_vector<double>();
    std::vector<double> f(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) f[i] = std::atan2(s[i], c[i]);
    return f;
  };
  std::vector<double> a = frequencies(plain), b = frequencies(llama3);
  for (int i = 0; i < 16; ++i) {
    double f = a[i], g = b[i];
    if (i < 3) EXPECT_DOUBLE_EQ(g, f) << i;
    else if (i < 5) EXPECT_TRUE(g < f && g > f / 8) << i;
    else EXPECT_NEAR(g, f / 8, 1e-6 * f) << i;  // float32 inverse frequencies
    EXPECT_DOUBLE_EQ(a[i], a[i + 16]) << "cat(angles, angles) at " << i;
  }
}

TEST(LlamaParts, ApplyRoPEMatchesTheBook) {
  const Fixture& fx = fixture();
  struct Case {
    std::string name, table;
    int64_t offset;
  };
  for (const Case& c : {Case{"rope_plain_off0", "rope_plain", 0}, Case{"rope_plain_off7", "rope_plain", 7},
                        Case{"rope_plain_full", "rope_plain", 0}, Case{"rope_llama3_off3", "rope_llama3", 3},
                        Case{"rope_f64_off5", "rope_f64", 5}}) {
    // the book's tables, so that only apply_rope is compared here
    Tensor cos = fx.get(c.table + ".cos"), sin = fx.get(c.table + ".sin");
    Tensor x = fx.get(c.name + ".in0").clone().requires_grad_();
    Tensor out = apply_rope(x, cos, sin, c.offset);
    EXPECT_EQ(out.dtype(), x.dtype());
    expect_close(out, fx.get(c.name + ".out"), rtol_for(x), atol_for(x), c.name + ".out");
    out.backward(fx.get(c.name + ".dout"));
    expect_close(x.grad(), fx.get(c.name + ".grad0"), rtol_for(x), atol_for(x), c.name + ".grad0");
  }
}

TEST(LlamaParts, ApplyRoPEFloat64InputWithFloat32Tables) {
  // the book promotes x * cos to float64: the same as taking the float32 tables as float64
  RoPEParams rope = compute_rope_params(8, 10000, 10);
  Tensor x = randn({1, 2, 4, 8}, nullptr, kFloat64);
  Tensor y = apply_rope(x, rope.cos, rope.sin, 2);
  EXPECT_EQ(y.dtype(), kFloat64);
  expect_close(y, apply_rope(x, rope.cos.to(kFloat64), rope.sin.to(kFloat64), 2), 0, 0, "promoted tables");
}

TEST(LlamaParts, ApplyRoPEOnTheAttentionsTransposedView) {
  // queries arrive as (b, T, H, D).transpose(1, 2): a non-contiguous view
  RoPEParams rope = compute_rope_params(8, 10000, 16);
  Tensor q = randn({2, 5, 3, 8}).transpose(1, 2);  // (b, H, T, D)
  ASSERT_FALSE(q.is_contiguous());
  expect_close(apply_rope(q, rope.cos, rope.sin, 4), apply_rope(q.contiguous(), rope.cos, rope.sin, 4), 0, 0,
               "view vs contiguous");
}

TEST(LlamaParts, RoPERotatesPairsAndDependsOnRelativePositionOnly) {
  manual_seed(11);
  RoPEParams rope = compute_rope_params(16, 10000, 32, std::nullopt, kFloat64);
  Tensor q = randn({1, 1, 1, 16}, nullptr, kFloat64);
  Tensor k = randn({1, 1, 1, 16}, nullptr, kFloat64);
  // a rotation keeps the norm of every pair (x1[i], x2[i])
  Tensor rq = apply_rope(q, rope.cos, rope.sin, 9);
  auto pair_norms = [](const Tensor& t) {
    return (t.narrow(3, 0, 8).pow(2) + t.narrow(3, 8, 8).pow(2)).contiguous();
  };
  expect_close(pair_norms(rq), pair_norms(q), 1e-12, 1e-12, "pair norms");
  // <rope(q)_m, rope(k)_n> depends on m - n only
  auto score = [&](int64_t m, int64_t n) {
    return (apply_rope(q, rope.cos, rope.sin, m) * apply_rope(k, rope.cos, rope.sin, n)).sum().item<double>();
  };
  EXPECT_NEAR(score(5, 2), score(20, 17), 1e-12);
  EXPECT_NEAR(score(0, 0), (q * k).sum().item<double>(), 1e-12);  // position 0 is the identity
  EXPECT_GT(std::abs(score(5, 2) - score(5, 3)), 1e-6);
}

TEST(LlamaParts, ApplyRoPEGradcheck) {
  manual_seed(7);
  RoPEParams rope =
      compute_rope_params(6, 10000, 12, RoPEFreqConfig{.original_context_length = 16}, kFloat64);
  Tensor x = randn({2, 3, 4, 6}, nullptr, kFloat64).requires_grad_();
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return apply_rope(in[0], rope.cos, rope.sin, 5); },
                     {x}, {.name = "apply_rope"});
  EXPECT_TRUE(r.ok) << r.message;
  // and with respect to the tables
  Tensor cos = rope.cos.clone().requires_grad_(), sin = rope.sin.clone().requires_grad_();
  r = gradcheck([&](const std::vector<Tensor>& in) { return apply_rope(in[0], in[1], in[2], 3); },
                {x.detach().clone().requires_grad_(), cos, sin}, {.name = "apply_rope tables"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LlamaParts, RoPEErrors) {
  RoPEParams rope = compute_rope_params(8, 10000, 6);
  expect_error([&] { compute_rope_params(7, 10000, 6); }, {"compute_rope_params", "head_dim", "7"});
  expect_error([&] { compute_rope_params(8, 10000, 0); }, {"compute_rope_params", "context_length"});
  expect_error([&] { compute_rope_params(8, -1.0, 6); }, {"compute_rope_params", "theta_base"});
  expect_error(
      [&] { compute_rope_params(8, 10000, 6, RoPEFreqConfig{.low_freq_factor = 4, .high_freq_factor = 4}); },
      {"compute_rope_params", "low_freq_factor"});
  expect_error([&] { compute_rope_params(8, 10000, 6, std::nullopt, kInt64); },
               {"compute_rope_params", "int64"});
  // an odd head_dim
  RoPEParams odd{zeros({6, 7}), zeros({6, 7})};
  expect_error(
      [&] {
        apply_rope(zeros({1, 2, 3, 7}), odd.cos, odd.sin);
      },
      {"apply_rope", "even", "[1, 2, 3, 7]"});
  // positions 4 .. 7 beyond a table of 6 positions
  expect_error(
      [&] {
        apply_rope(zeros({1, 2, 4, 8}), rope.cos, rope.sin, 4);
      },
      {"apply_rope", "[1, 2, 4, 8]", "[6, 8]", "context_length 6"});
  expect_error(
      [&] {
        apply_rope(zeros({1, 2, 7, 8}), rope.cos, rope.sin);
      },
      {"apply_rope", "[1, 2, 7, 8]", "[6, 8]"});
  expect_error([&] { apply_rope(zeros({1, 2, 3, 8}), rope.cos, rope.sin, -1); }, {"apply_rope", "offset -1"});
  // head_dim of x and of the tables differ; not 4-D
  expect_error(
      [&] {
        apply_rope(zeros({1, 2, 3, 4}), rope.cos, rope.sin);
      },
      {"apply_rope", "[1, 2, 3, 4]", "[6, 8]"});
  expect_error([&] { apply_rope(zeros({2, 3, 8}), rope.cos, rope.sin); }, {"apply_rope", "[2, 3, 8]"});
  expect_error(
      [&] {
        apply_rope(zeros({1, 2, 3, 8}), rope.cos, rope.sin.narrow(0, 0, 5));
      },
      {"apply_rope", "[6, 8]", "[5, 8]"});
}

// ---------------------------------------------------------------- LlamaFeedForward
TEST(LlamaParts, FeedForwardInitAndNamesMatchTheBook) {
  const Fixture& fx = fixture();
  manual_seed(123);
  LlamaFeedForward ff(8, 12);
  auto params = ff.named_parameters();
  ASSERT_EQ(params.size(), 3u);
  const char* names[] = {"fc1.weight", "fc2.weight", "fc3.weight"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(params[i].first, names[i]);
    expect_close(params[i].second, fx.get(std::string("swiglu.init.") + names[i]), 0, 0, names[i]);
  }
  EXPECT_EQ(ff.fc1->weight.shape(), (Shape{12, 8}));
  EXPECT_EQ(ff.fc3->weight.shape(), (Shape{8, 12}));
  EXPECT_FALSE(ff.fc1->bias.defined() || ff.fc2->bias.defined() || ff.fc3->bias.defined());
}

TEST(LlamaParts, FeedForwardMatchesTorch) {
  const Fixture& fx = fixture();
  LlamaFeedForward ff(8, 12);
  for (auto& [name, p] : ff.named_parameters()) p.detach().copy_(fx.get("swiglu.init." + name));
  check_forward_backward(ff, "swiglu");
  for (auto& [name, p] : ff.named_parameters())
    expect_close(p.grad(), fx.get("swiglu.grad." + name), 1e-5, 1e-6, "swiglu.grad." + name);
}

TEST(LlamaParts, FeedForwardGradcheckAndErrors) {
  manual_seed(9);
  LlamaFeedForward ff(5, 7);
  ff.to(kFloat64);
  Tensor x = randn({2, 3, 5}, nullptr, kFloat64).requires_grad_();
  auto r = check_module(ff, x, "LlamaFeedForward");
  EXPECT_TRUE(r.ok) << r.message;
  expect_error([&] { LlamaFeedForward(0, 4); }, {"LlamaFeedForward", "0"});
  expect_error([&] { ff(zeros({2, 4}, kFloat64)); }, {"[2, 4]"});
}

}  // namespace
}  // namespace xgrad::nn
