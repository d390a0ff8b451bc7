// tests/core/test_bf16_ops.cpp: the ops computing on bfloat16 tensors, forward and backward,
// against torch 1.13 (tests/fixtures/bf16_ops.txt from gen_bf16_ops.py); type promotion; the
// composed twin (the float32 op's result rounded once is the bfloat16 op's result); and the
// ops that still refuse bfloat16 naming themselves.
//
// Adding an op: a row in kRows (its name in the fixture, how xgrad computes it from the inputs,
// the fixture inputs, and the largest distance allowed from torch in bfloat16 ulps, forward
// and backward, with the reason when it is not 0) and the same op in gen_bf16_ops.py.
//
// Distances are counted in bfloat16 ulps along the number line (a sign change counts through
// zero), so 0 means the same bits. Where torch rounds differently from "widen, compute in
// float32, round once" the row says how:
//   - silu and gelu(tanh) run torch's Vectorized<BFloat16> arithmetic, which rounds to
//     bfloat16 after every step (neg, exp, add, div, ...); xgrad rounds once;
//   - rsqrt's last (non-vector) elements in torch take the scalar path 1 / sqrt(x) with the
//     sqrt rounded to bfloat16 in between;
//   - reductions accumulate in a different order (and torch's mean, log_softmax, layer_norm,
//     cross_entropy round intermediate results), and backward formulas made of several ops
//     round after each op in both libraries but not at the same places.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "error_message.h"
#include "thread_count.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::Fixture;
using testing::read_fixture;

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/bf16_ops.txt");
  return f;
}

// A fixture tensor as bfloat16 (exact: the fixture holds bfloat16 values written as float32).
Tensor bf(const std::string& name) { return fx().get(name).to(kBFloat16); }

// The position of a bfloat16 value on the number line, in ulps from +0.
int64_t ordinal(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v) >> 16;
  return (u & 0x8000u) ? -static_cast<int64_t>(u & 0x7fffu) : static_cast<int64_t>(u);
}

// How far got (bfloat16) is from want (float32 holding bfloat16 values): the largest distance
// in bfloat16 ulps among the elements that are also further than rel * max|want| apart (so a
// tolerance in ulps is not spent near zero, where a cancellation leaves few significant bits);
// NaN matches NaN only. 0 with rel == 0 means the same bits.
int64_t max_ulps(const Tensor& got, const Tensor& want, const std::string& what, double rel = 0.0) {
  EXPECT_EQ(got.dtype(), kBFloat16) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  if (got.shape() != want.shape()) return INT64_MAX;
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  double scale = 0.0;
  for (float v : w)
    if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  int64_t worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) || std::isnan(w[i])) {
      if (std::isnan(g[i]) != std::isnan(w[i])) return INT64_MAX;
      continue;
    }
    if (std::fabs(static_cast<double>(g[i]) - w[i]) <= rel * scale) continue;
    worst = std::max<int64_t>(worst, std::llabs(ordinal(g[i]) - ordinal(w[i])));
  }
  return worst;
}

// A tolerance: ulps, counted where the elements differ by more than rel * max|want|.
struct Tol {
  int64_t ulps = 0;
  double rel = 0.0;
};

// The tolerances of the rows that are not bit-identical (see the file comment):
//   kOneUlp   one rounding apart (torch's scalar tail, a different summation order)
//   kSteps    torch rounds after each step of a formula, or the backward is a chain of
//             bfloat16 ops rounded at different places in the two libraries
//   kChain    a backward of three or more bfloat16 roundings in torch (pow: dout * e * x^(e-1))
//             against xgrad's one fused rounding
//   kNorm     layer_norm: torch's bfloat16 kernel rounds its statistics and the normalised
//             values, xgrad runs float32 throughout and rounds the results once
constexpr Tol kOneUlp{1, 0.0};
constexpr Tol kSteps{1, 1.0 / 256};
constexpr Tol kChain{2, 1.0 / 256};
constexpr Tol kNorm{2, 1.0 / 64};

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Row {
  const char* name;
  std::vector<const char*> inputs;
  Fn fn;
  Tol fwd{};
  Tol bwd{};
};

Tensor ids() { return fx().get("ids"); }

// (arange(R * C) % 7) * 0.1 - 0.2 in float32, as gen_bf16_ops.py builds its eq_s input.
Tensor fmod_steps() {
  const Shape s = fx().get("x").shape();
  std::vector<float> v(static_cast<std::size_t>(s[0] * s[1]));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.1f - 0.2f;
  return from_vector(v, s);
}

const std::vector<Row>& rows() {
  using V = const std::vector<Tensor>&;
  static const std::vector<Row> r = {
      {"neg", {"x"}, [](V t) { return neg(t[0]); }},
      {"abs", {"x"}, [](V t) { return abs(t[0]); }},
      {"exp", {"x"}, [](V t) { return exp(t[0]); }},
      {"log", {"xp"}, [](V t) { return log(t[0]); }},
      {"sqrt", {"xp"}, [](V t) { return sqrt(t[0]); }},
      {"rsqrt", {"xp"}, [](V t) { return rsqrt(t[0]); }, kOneUlp, kSteps},
      {"tanh", {"x"}, [](V t) { return tanh(t[0]); }},
      {"sigmoid", {"x"}, [](V t) { return sigmoid(t[0]); }},
      {"relu", {"x"}, [](V t) { return relu(t[0]); }},
      {"gelu", {"x"}, [](V t) { return gelu(t[0]); }},
      {"gelu_tanh", {"x"}, [](V t) { return gelu(t[0], "tanh"); }, kSteps, kSteps},
      {"silu", {"x"}, [](V t) { return silu(t[0]); }, kSteps, kSteps},
      {"softplus", {"x"}, [](V t) { return softplus(t[0]); }, {}, kSteps},
      {"sin", {"x"}, [](V t) { return sin(t[0]); }},
      {"cos", {"x"}, [](V t) { return cos(t[0]); }},
      {"log1p", {"xp"}, [](V t) { return log1p(t[0]); }},
      {"expm1", {"x"}, [](V t) { return expm1(t[0]); }},
      {"erf", {"x"}, [](V t) { return erf(t[0]); }},
      {"pow2", {"x"}, [](V t) { return pow(t[0], 2.0); }},
      {"pow1_7", {"xp"}, [](V t) { return pow(t[0], 1.7); }, {}, kChain},
      {"add_s", {"x"}, [](V t) { return t[0] + 0.1; }},
      {"sub_s", {"x"}, [](V t) { return t[0] - 0.3; }},
      {"mul_s", {"x"}, [](V t) { return t[0] * 0.3; }},
      {"div_s", {"x"}, [](V t) { return t[0] / 0.3; }},
      {"rsub_s", {"x"}, [](V t) { return 1.3 - t[0]; }},
      {"rdiv_s", {"xp"}, [](V t) { return 1.3 / t[0]; }, {}, kSteps},
      {"clamp", {"x"}, [](V t) { return clamp(t[0], -0.5, 0.7); }},
      {"masked_fill", {"x"}, [](V t) { return masked_fill(t[0], t[0] > 0.5, -0.1); }},
      {"add", {"x", "y"}, [](V t) { return t[0] + t[1]; }},
      {"sub", {"x", "y"}, [](V t) { return t[0] - t[1]; }},
      {"mul", {"x", "y"}, [](V t) { return t[0] * t[1]; }},
      {"div", {"x", "xp"}, [](V t) { return t[0] / t[1]; }, {}, kSteps},
      {"maximum", {"x", "y"}, [](V t) { return maximum(t[0], t[1]); }},
      {"minimum", {"x", "y"}, [](V t) { return minimum(t[0], t[1]); }},
      {"atan2", {"x", "y"}, [](V t) { return atan2(t[0], t[1]); }, {}, kSteps},
      {"pow_tt", {"xp", "y"}, [](V t) { return pow(t[0], t[1]); }, {}, kChain},
      {"where", {"x", "y"}, [](V t) { return where(t[0] > 0.0, t[0], t[1]); }},
      {"add_bcast", {"x", "y_row"}, [](V t) { return t[0] + t[1]; }},
      {"mul_bcast", {"x", "y_col"}, [](V t) { return t[0] * t[1]; }},
      {"sum", {"x"}, [](V t) { return sum(t[0], {1}); }, kOneUlp, {}},
      {"sum_all", {"x"}, [](V t) { return sum(t[0]); }, kOneUlp, {}},
      {"mean", {"x"}, [](V t) { return mean(t[0], {1}); }, kOneUlp, {}},
      {"amax", {"x"}, [](V t) { return amax(t[0], {1}); }},
      {"max_dim", {"x"}, [](V t) { return max(t[0], 1).values; }},
      {"var", {"x"}, [](V t) { return var(t[0], {1}); }, kOneUlp, kSteps},
      {"logsumexp", {"x"}, [](V t) { return logsumexp(t[0], {1}); }, kOneUlp, kSteps},
      {"cumsum", {"x"}, [](V t) { return cumsum(t[0], 1); }, kOneUlp, kOneUlp},
      {"softmax", {"x"}, [](V t) { return softmax(t[0], 1); }, kOneUlp, kSteps},
      {"log_softmax", {"x"}, [](V t) { return log_softmax(t[0], 1); }, kOneUlp, kSteps},
      {"cross_entropy", {"x"}, [](V t) { return cross_entropy(t[0], fx().get("targets")); }, kOneUlp, kSteps},
      {"gather", {"x"}, [](V t) { return gather(t[0], 1, ids()); }},
      {"index_select", {"x"}, [](V t) { return index_select(t[0], 1, ids().select(0, 0)); }},
      {"layer_norm",
       {"x", "lnw", "lnb"},
       [](V t) { return layer_norm(t[0], {t[0].size(1)}, t[1], t[2], 1e-5); },
       kNorm,
       kNorm},
      {"embedding", {"x"}, [](V t) { return embedding(t[0], fx().get("emb_ids")); }},
      // torch composes silu(a) * b from two bfloat16 ops (its da: silu's backward of the rounded
      // dout * b, rounded again); xgrad's fused op rounds each result once
      {"silu_mul", {"x", "y"}, [](V t) { return silu_mul(t[0], t[1]); }, kSteps, kChain},
      // the book's apply_rope with float32 tables: both compute in float32 and round once
      {"rope",
       {"x"},
       [](V t) { return apply_rotary_emb(t[0], fx().get("rope_cos"), fx().get("rope_sin")); },
       kOneUlp,
       kSteps},
  };
  return r;
}

// Runs one row: inputs from the fixture (bfloat16, requiring grad), the op, backward with the
// fixture's upstream gradient; returns {forward ulps, largest backward ulps}.
std::pair<int64_t, int64_t> run_row(const Row& row) {
  const double fwd_rel = row.fwd.rel, bwd_rel = row.bwd.rel;
  std::vector<Tensor> in;
  for (const char* n : row.inputs) in.push_back(bf(n).requires_grad_());
  Tensor out = row.fn(in);
  const std::string name = row.name;
  const int64_t fwd = max_ulps(out, fx().get(name + ".out"), name + ".out", fwd_rel);
  int64_t bwd = 0;
  out.backward(bf(name + ".g"));
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::string key = name + ".d" + std::to_string(i);
    if (!fx().has(key)) continue;
    EXPECT_TRUE(in[i].grad().defined()) << key;
    if (!in[i].grad().defined()) return {fwd, INT64_MAX};
    bwd = std::max(bwd, max_ulps(in[i].grad(), fx().get(key), key, bwd_rel));
  }
  return {fwd, bwd};
}

TEST(BFloat16Ops, ForwardAndBackwardMatchTorch) {
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.name);
    const auto [fwd, bwd] = run_row(row);
    EXPECT_LE(fwd, row.fwd.ulps) << row.name << " forward";
    EXPECT_LE(bwd, row.bwd.ulps) << row.name << " backward";
  }
}

// The checker itself: a wrong op (exp for tanh) is far from torch's tanh.
TEST(BFloat16Ops, TheComparisonCatchesAWrongOp) {
  Row wrong{"tanh", {"x"}, [](const std::vector<Tensor>& t) { return sigmoid(t[0]); }};
  EXPECT_GT(run_row(wrong).first, 8);
}

// The composed twin: for an elementwise op, the bfloat16 op is the float32 op on the widened
// inputs, rounded once (the SIMD path over 512-element blocks and the strided path alike).
TEST(BFloat16Ops, ElementwiseIsFloat32RoundedOnce) {
  const Tensor x = bf("x"), y = bf("y"), xp = bf("xp");
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"exp", [](const Tensor& a, const Tensor&) { return exp(a); }},
      {"tanh", [](const Tensor& a, const Tensor&) { return tanh(a); }},
      {"gelu", [](const Tensor& a, const Tensor&) { return gelu(a); }},
      {"gelu_tanh", [](const Tensor& a, const Tensor&) { return gelu(a, "tanh"); }},
      {"silu", [](const Tensor& a, const Tensor&) { return silu(a); }},
      {"rsqrt", [](const Tensor&, const Tensor& b) { return rsqrt(b); }},
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"softmax", [](const Tensor& a, const Tensor&) { return softmax(a, 1); }},
      {"softmax(dim 0)", [](const Tensor& a, const Tensor&) { return softmax(a, 0); }},
      {"log_softmax(dim 0)", [](const Tensor& a, const Tensor&) { return log_softmax(a, 0); }},
      {"layer_norm", [](const Tensor& a, const Tensor&) { return layer_norm(a, {a.size(1)}, {}, {}, 1e-5); }},
  };
  for (const auto& [name, f] : ops) {
    SCOPED_TRACE(name);
    for (bool strided : {false, true}) {
      const Tensor a = strided ? x.t().contiguous().t() : x;
      const Tensor twin = f(a.to(kFloat32), xp.to(kFloat32)).to(kBFloat16);
      EXPECT_EQ(max_ulps(f(a, xp), twin.to(kFloat32), name), 0);
    }
  }
  (void)y;
}

// torch's promotion: bfloat16 with float32 computes in float32, with float64 in float64, with
// int64 in bfloat16; each gradient comes back in its input's dtype (bfloat16 rounded once).
TEST(BFloat16Ops, PromotionMatchesTorch) {
  const Tensor x = bf("x").requires_grad_();
  const Tensor y32 = (fx().get("y") * 1.001).requires_grad_();
  Tensor out = x + y32;
  EXPECT_EQ(out.dtype(), kFloat32);
  expect_close(out, fx().get("promote_f32.out"), 0.0, 0.0, "promote_f32.out");
  out.backward(fx().get("promote_f32.g"));
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
  EXPECT_EQ(y32.grad().dtype(), kFloat32);
  EXPECT_EQ(max_ulps(x.grad(), fx().get("promote_f32.d0"), "promote_f32.d0"), 0);
  expect_close(y32.grad(), fx().get("promote_f32.d1"), 0.0, 0.0, "promote_f32.d1");

  const Tensor x2 = bf("x").requires_grad_();
  const Tensor y64 = (fx().get("y").to(kFloat64) * 1.001).requires_grad_();
  Tensor out64 = x2 * y64;
  EXPECT_EQ(out64.dtype(), kFloat64);
  out64.backward(fx().get("promote_f64.g").to(kFloat64));
  EXPECT_EQ(x2.grad().dtype(), kBFloat16);
  EXPECT_EQ(max_ulps(x2.grad(), fx().get("promote_f64.d0"), "promote_f64.d0"), 0);

  const Tensor x3 = bf("x");
  const Tensor ar = arange(x3.size(1));
  EXPECT_EQ(max_ulps(x3 + ar, fx().get("promote_i64.out"), "promote_i64.out"), 0);
  EXPECT_EQ((x3 * 2.5).dtype(), kBFloat16);  // a number does not promote
  expect_error([&] { (void)(x3.to(kFloat32) + x3.to(kFloat64)); }, {"add", "dtype mismatch"});
}

// The fused float32 + bfloat16 add (the residual add) against its composed twin, to() then
// add: the same bits forward and backward, in both orders and broadcast either way.
TEST(BFloat16Ops, MixedAddIsItsComposedTwin) {
  const Tensor h = fx().get("y") * 1.001;  // float32
  const std::vector<std::pair<Tensor, Tensor>> pairs = {
      {h, bf("x")}, {bf("x"), h}, {h, bf("y_row")}, {bf("y_col"), h}};
  for (const auto& [a0, b0] : pairs) {
    const Tensor a = a0.detach().requires_grad_(), b = b0.detach().requires_grad_();
    const Tensor a2 = a0.detach().requires_grad_(), b2 = b0.detach().requires_grad_();
    const Tensor fused = a + b;
    const Tensor twin = a2.to(kFloat32) + b2.to(kFloat32);
    EXPECT_EQ(fused.grad_fn_name(), "AddBackward0");
    expect_close(fused, twin, 0.0, 0.0, "mixed add");
    const Tensor g = randn(fused.shape());
    fused.backward(g);
    twin.backward(g);
    EXPECT_EQ(a.grad().dtype(), a.dtype());
    EXPECT_EQ(b.grad().dtype(), b.dtype());
    expect_close(a.grad().to(kFloat32), a2.grad().to(kFloat32), 0.0, 0.0, "da");
    expect_close(b.grad().to(kFloat32), b2.grad().to(kFloat32), 0.0, 0.0, "db");
  }
}

// layer_norm's bfloat16 kernels against the float32 op on widened copies, rounded once:
// forward and all three gradients, bit for bit (N = 90 takes the rows' generic path, N = 64 the
// SIMD one; M = 70 rows cross the backward's 64-row blocks).
TEST(BFloat16Ops, LayerNormKernelIsItsFloat32Twin) {
  for (int64_t N : {90, 64}) {
    SCOPED_TRACE(N);
    manual_seed(5);
    const Tensor x0 = randn({70, N}).to(kBFloat16), w0 = randn({N}).to(kBFloat16),
                 b0 = randn({N}).to(kBFloat16);
    const Tensor g = randn({70, N}).to(kBFloat16);
    const Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_(),
                 b = b0.detach().requires_grad_();
    const Tensor out = layer_norm(x, {N}, w, b, 1e-5);
    out.backward(g);
    const Tensor xf = x0.to(kFloat32).requires_grad_(), wf = w0.to(kFloat32).requires_grad_(),
                 bf32 = b0.to(kFloat32).requires_grad_();
    const Tensor twin = layer_norm(xf, {N}, wf, bf32, 1e-5);
    twin.backward(g.to(kFloat32));
    EXPECT_EQ(out.grad_fn_name(), "NativeLayerNormBackward0");
    EXPECT_EQ(max_ulps(out, twin.to(kBFloat16).to(kFloat32), "y"), 0);
    EXPECT_EQ(max_ulps(x.grad(), xf.grad().to(kBFloat16).to(kFloat32), "dx"), 0);
    EXPECT_EQ(max_ulps(w.grad(), wf.grad().to(kBFloat16).to(kFloat32), "dw"), 0);
    EXPECT_EQ(max_ulps(b.grad(), bf32.grad().to(kBFloat16).to(kFloat32), "db"), 0);
  }
}

// Same bits at any thread count: the bfloat16 paths split work as the float32 ones do, and
// each element's (or row's) arithmetic does not depend on the split.
TEST(BFloat16Ops, SameBitsAtAnyThreadCount) {
  manual_seed(3);
  const Tensor x = randn({96, 768}).to(kBFloat16), y = randn({96, 768}).to(kBFloat16);
  const Tensor w = randn({768}).to(kBFloat16), h = randn({96, 768});
  auto run = [&] {
    std::vector<Tensor> outs;
    const Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_();
    const Tensor a = gelu(xr * y + xr, "tanh"), b = softmax(xr, -1), c = layer_norm(xr, {768}, wr, wr, 1e-5);
    const Tensor d = exp(xr) + h, e = sum(xr * xr, {0});
    for (const Tensor& t : {a, b, c}) outs.push_back(t.to(kFloat32));
    outs.push_back(d);
    outs.push_back(e.to(kFloat32));
    ((a.to(kFloat32) + b.to(kFloat32) + c.to(kFloat32) + d).sum() + e.to(kFloat32).sum()).backward();
    outs.push_back(xr.grad().to(kFloat32));
    outs.push_back(wr.grad().to(kFloat32));
    return outs;
  };
  std::vector<Tensor> one, two;
  {
    testing::ThreadCount t(1);
    one = run();
  }
  {
    testing::ThreadCount t(2);
    two = run();
  }
  for (std::size_t i = 0; i < one.size(); ++i)
    expect_close(two[i], one[i], 0.0, 0.0, "output " + std::to_string(i));
}

TEST(BFloat16Ops, ComparisonsMatchTorch) {
  const Tensor gt_out = gt(bf("x"), bf("y"));
  EXPECT_EQ(gt_out.dtype(), kBool);
  EXPECT_EQ(gt_out.to_vector<bool>(), fx().get("gt.out").to_vector<bool>());
  // the number is rounded to bfloat16 before comparing, as torch casts it
  const Tensor steps = (fmod_steps()).to(kBFloat16);
  EXPECT_EQ((steps == 0.1).to_vector<bool>(), fx().get("eq_s.out").to_vector<bool>());
}

// dropout keeps torch's draws (the mask of a float32 dropout with the same seed) and scales by
// torch's bfloat16 noise value, 1 / bfloat16(1 - p) rounded to bfloat16.
TEST(BFloat16Ops, DropoutScalesLikeTorchsBFloat16Noise) {
  for (double p : {0.1, 0.3}) {
    SCOPED_TRACE(p);
    const Tensor ones16 = ones({64}, kBFloat16);
    manual_seed(7);
    const Tensor d = dropout(ones16, p);
    const float want = fx().get(p == 0.1 ? "dropout_scale_0.1" : "dropout_scale_0.3").item<float>();
    for (float v : d.to_vector<float>()) EXPECT_TRUE(v == 0.0f || v == want) << v;
    // the twin: the same seed's float32 mask, x * scale rounded once; the gradient is dout * noise
    const Tensor x = bf("x").requires_grad_();
    manual_seed(11);
    const Tensor out = dropout(x, p);
    manual_seed(11);
    const Tensor keep = dropout(ones(x.shape()), p) != 0.0;
    const Tensor twin = where(keep, x.detach().to(kFloat32) * static_cast<double>(want), 0.0).to(kBFloat16);
    EXPECT_EQ(max_ulps(out, twin.to(kFloat32), "dropout"), 0);
    out.backward(ones(x.shape(), kBFloat16));
    EXPECT_EQ(max_ulps(x.grad(), where(keep, static_cast<double>(want), 0.0 * ones(x.shape())), "ddropout"),
              0);
  }
}

// In-place ops and gradient accumulation on bfloat16 (a leaf used twice sums its gradients).
TEST(BFloat16Ops, InPlaceAndAccumulation) {
  Tensor a = bf("x").clone();
  const Tensor b = bf("y");
  const Tensor want = (a + b) * 0.3;
  a.add_(b);
  a.mul_(0.3);
  EXPECT_EQ(max_ulps(a, want.to(kFloat32), "add_ mul_"), 0);
  Tensor c = bf("x").clone();
  c.masked_fill_(c > 0.0, 0.25);
  EXPECT_EQ(max_ulps(c, masked_fill(bf("x"), bf("x") > 0.0, 0.25).to(kFloat32), "masked_fill_"), 0);

  const Tensor x = bf("x").requires_grad_();
  (x * bf("y") + tanh(x)).backward(bf("mul.g"));
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
  const Tensor g = bf("mul.g");
  const Tensor want_grad = g * bf("y") + g * (1.0 - tanh(bf("x")) * tanh(bf("x")));
  EXPECT_LE(max_ulps(x.grad(), want_grad.to(kFloat32), "accumulated", kSteps.rel), kSteps.ulps);
}

// The remaining ops that take bfloat16, each against its float32 result rounded once (they
// move elements, pick one, or reduce in float32).
TEST(BFloat16Ops, MoreOpsAreTheirFloat32Twins) {
  const Tensor x = bf("x"), xf = x.to(kFloat32);
  auto same = [](const Tensor& got, const Tensor& want32, const char* what) {
    EXPECT_EQ(max_ulps(got, want32.to(kBFloat16).to(kFloat32), what), 0);
  };
  same(tril(x, 1), tril(xf, 1), "tril");
  same(triu(x), triu(xf), "triu");
  same(amin(x, {1}), amin(xf, {1}), "amin");
  same(min(x, 0).values, min(xf, 0).values, "min(dim)");
  same(std(x, {1}), std(xf, {1}), "std");
  same(x.clone().clamp_(-0.2, 0.4), xf.clamp(-0.2, 0.4), "clamp_");
  same(x.clone().fill_(0.1), full(x.shape(), 0.1), "fill_");
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), argmax(xf, 1).to_vector<int64_t>());
  EXPECT_EQ(logical_not(x > 0.0).to_vector<bool>(), logical_not(xf > 0.0).to_vector<bool>());
}

// The recorded backward (create_graph) computes the same gradients as the fused one.
TEST(BFloat16Ops, RecordedBackwardAgreesWithFused) {
  for (const char* name : {"gelu", "softmax", "relu", "sigmoid", "silu", "mul", "tanh"}) {
    SCOPED_TRACE(name);
    const Row* row = nullptr;
    for (const Row& r : rows())
      if (std::string(r.name) == name) row = &r;
    ASSERT_NE(row, nullptr);
    std::vector<Tensor> in;
    for (const char* n : row->inputs) in.push_back(bf(n).requires_grad_());
    const Tensor g = bf(std::string(name) + ".g");
    const std::vector<Tensor> fused = autograd::grad({row->fn(in)}, in, {g});
    const std::vector<Tensor> recorded = autograd::grad({row->fn(in)}, in, {g}, {.create_graph = true});
    for (std::size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(recorded[i].dtype(), kBFloat16);
      EXPECT_LE(max_ulps(recorded[i], fused[i].to(kFloat32), name, kChain.rel), kChain.ulps);
    }
  }
}

// Ops without a bfloat16 path still throw naming themselves and the dtype.
TEST(BFloat16Ops, StillRefusedOpsNameThemselves) {
  const Tensor b = ones({2, 3}, kBFloat16);
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"scatter_add",
       [&] {
         (void)scatter_add(b, 1, zeros({2, 1}, kInt64), b);
       }},
      {"mse_loss", [&] { (void)mse_loss(b, b); }},
      {"topk", [&] { (void)topk(b, 1); }},
      {"masked_select", [&] { (void)masked_select(b, b > 0.0); }},
      {"arange", [&] { (void)arange(0.0, 4.0, 1.0, kBFloat16); }},
      {"linspace", [&] { (void)linspace(0, 1, 5, kBFloat16); }},
      {"randn", [&] { (void)randn({3}, nullptr, kBFloat16); }},
  };
  for (const auto& [op, fn] : cases) {
    SCOPED_TRACE(op);
    expect_error(fn, {op, "bfloat16"});
  }
}

}  // namespace
}  // namespace xgrad
