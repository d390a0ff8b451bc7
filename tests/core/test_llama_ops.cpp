// tests/core/test_llama_ops.cpp: the fused ops a Llama runs, rms_norm, apply_rotary_emb and
// silu_mul (core/src/ops/norm.cpp, rotary.cpp, silu_mul.cpp).
//  - against torch (tests/fixtures/gen_llama_ops.py): outputs and every input's gradient;
//  - against their composition from primitive ops (the formula the fused kernels replace),
//    float64 and float32, forward and backward;
//  - the backward's two paths (the kernel; recorded ops under create_graph) agree;
//  - the same bits at 1 and 2 threads;
//  - bad shapes and dtypes throw naming the op and the shapes.
// Their gradchecks (and gradgradchecks) are rows in gradcheck_rows_llama_ops.cpp.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using V = std::vector<Tensor>;

// The compositions the fused ops replace, from recorded primitive ops.
Tensor rms_norm_composed(const Tensor& x, int64_t k, const Tensor& w, double eps) {
  Dims dims;
  for (int64_t i = -k; i < 0; ++i) dims.push_back(i);
  const Tensor y = x * rsqrt(mean(x * x, dims, true) + eps);
  return w.defined() ? y * w : y;
}

Tensor rotary_composed(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t last = x.dim() - 1, h = x.size(last) / 2;
  return x * cos + cat({neg(x.narrow(last, h, h)), x.narrow(last, 0, h)}, last) * sin;
}

// a strided view of x with x's shape: the transpose of a copy stored transposed
Tensor strided(const Tensor& x) { return x.transpose(-1, -2).contiguous().transpose(-1, -2); }

// ---------------------------------------------------------------- against torch
const Fixture& fixture() {
  static const Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/llama_ops.txt");
  return fx;
}

void check_torch_case(const std::string& name, int n_inputs, const std::function<Tensor(const V&)>& fn) {
  SCOPED_TRACE(name);
  const Fixture& fx = fixture();
  V in;
  for (int i = 0; i < n_inputs; ++i)
    in.push_back(fx.get(name + ".in" + std::to_string(i)).clone().requires_grad_());
  const Tensor out = fn(in);
  const bool f64 = out.dtype() == kFloat64;
  const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-13 : 1e-6;
  expect_close(out, fx.get(name + ".out"), rtol, atol, name + ".out");
  out.backward(fx.get(name + ".dout"));
  for (int i = 0; i < n_inputs; ++i)
    expect_close(in[static_cast<std::size_t>(i)].grad(), fx.get(name + ".grad" + std::to_string(i)), rtol,
                 atol, name + ".grad" + std::to_string(i));
}

TEST(RmsNorm, MatchesTorch) {
  for (const std::string tag : {"f32", "f64"}) {
    check_torch_case("rms_norm.weight." + tag, 2,
                     [](const V& x) { return rms_norm(x[0], {37}, x[1], 1e-5); });
    check_torch_case("rms_norm.default_eps." + tag, 1, [](const V& x) { return rms_norm(x[0], {16}); });
    check_torch_case("rms_norm.two_dims." + tag, 2, [](const V& x) {
      return rms_norm(x[0], {3, 8}, x[1], 1e-6);
    });
    check_torch_case("rms_norm.row_blocks." + tag, 2,
                     [](const V& x) { return rms_norm(x[0], {6}, x[1], 1e-5); });
  }
}

TEST(ApplyRotaryEmb, MatchesTorch) {
  for (const std::string tag : {"f32", "f64"})
    for (const std::string c : {"bhtd", "wide", "3d_tables"})
      check_torch_case("rotary." + c + "." + tag, 3,
                       [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); });
}

TEST(SiluMul, MatchesTorch) {
  for (const std::string tag : {"f32", "f64"})
    check_torch_case("silu_mul." + tag, 2, [](const V& x) { return silu_mul(x[0], x[1]); });
}

// ---------------------------------------------------------------- fused vs composed
struct TwinCase {
  std::string name;
  std::vector<Shape> shapes;  // the float leaves, randn from a fixed seed
  std::function<Tensor(const V&)> fused, composed;
};

std::vector<TwinCase> twin_cases() {
  std::vector<TwinCase> c;
  c.push_back({"rms_norm/weight",
               {{3, 5, 37}, {37}},
               [](const V& x) { return rms_norm(x[0], {37}, x[1], 1e-5); },
               [](const V& x) { return rms_norm_composed(x[0], 1, x[1], 1e-5); }});
  c.push_back({"rms_norm/no_weight/strided",
               {{6, 32}},
               [](const V& x) { return rms_norm(strided(x[0]), {32}, Tensor(), 1e-6); },
               [](const V& x) { return rms_norm_composed(strided(x[0]), 1, Tensor(), 1e-6); }});
  c.push_back({"rms_norm/two_dims",
               {{2, 4, 3}, {4, 3}},
               [](const V& x) {
                 return rms_norm(x[0], {4, 3}, x[1], 1e-3);
               },
               [](const V& x) { return rms_norm_composed(x[0], 2, x[1], 1e-3); }});
  c.push_back({"rms_norm/row_blocks",
               {{130, 64}, {64}},
               [](const V& x) { return rms_norm(x[0], {64}, x[1], 1e-5); },
               [](const V& x) { return rms_norm_composed(x[0], 1, x[1], 1e-5); }});
  c.push_back({"rotary/bhtd_tables",
               {{2, 3, 5, 8}, {5, 8}, {5, 8}},
               [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); },
               [](const V& x) { return rotary_composed(x[0], x[1], x[2]); }});
  c.push_back({"rotary/wide",
               {{2, 2, 3, 40}, {3, 40}, {3, 40}},
               [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); },
               [](const V& x) { return rotary_composed(x[0], x[1], x[2]); }});
  // the attention's layout: (b, T, H, D) transposed to (b, H, T, D)
  c.push_back({"rotary/transposed_heads",
               {{2, 7, 3, 32}, {7, 32}, {7, 32}},
               [](const V& x) { return apply_rotary_emb(x[0].transpose(1, 2), x[1], x[2]); },
               [](const V& x) { return rotary_composed(x[0].transpose(1, 2), x[1], x[2]); }});
  c.push_back({"rotary/last_dim_strided",
               {{3, 6, 4}, {6, 4}, {6, 4}},
               [](const V& x) { return apply_rotary_emb(strided(x[0]), x[1], x[2]); },
               [](const V& x) { return rotary_composed(strided(x[0]), x[1], x[2]); }});
  c.push_back({"silu_mul",
               {{5, 37}, {5, 37}},
               [](const V& x) { return silu_mul(x[0] * 4.0, x[1]); },
               [](const V& x) { return silu(x[0] * 4.0) * x[1]; }});
  c.push_back({"silu_mul/strided",
               {{6, 9}, {6, 9}},
               [](const V& x) { return silu_mul(strided(x[0]), x[1]); },
               [](const V& x) { return silu(strided(x[0])) * x[1]; }});
  return c;
}

struct TwinParam {
  TwinCase c;
  DType dtype;
};
void PrintTo(const TwinParam& p, std::ostream* os) { *os << p.c.name; }

class FusedTwin : public ::testing::TestWithParam<TwinParam> {};

V leaves_of(const TwinCase& c, DType dt) {
  Generator gen(23);
  V leaves;
  for (const Shape& s : c.shapes) leaves.push_back(randn(s, &gen, dt).requires_grad_());
  return leaves;
}

// the fused op and its composition: the same values and the same gradients of <out, w>
TEST_P(FusedTwin, FusedEqualsComposed) {
  const TwinCase& c = GetParam().c;
  const DType dt = GetParam().dtype;
  const V leaves = leaves_of(c, dt);
  const Tensor fused = c.fused(leaves), composed = c.composed(leaves);
  const bool f64 = dt == kFloat64;
  const double rtol = f64 ? 1e-13 : 2e-6, atol = f64 ? 1e-14 : 1e-6;
  expect_close(fused, composed, rtol, atol, c.name + " out");
  Generator gen(5);
  const Tensor w = randn(fused.shape(), &gen, dt);
  const V gf = autograd::grad({fused}, leaves, {w});
  const V gc = autograd::grad({composed}, leaves, {w});
  for (std::size_t i = 0; i < leaves.size(); ++i)
    expect_close(gf[i], gc[i], 10 * rtol, 10 * atol, c.name + " grad " + std::to_string(i));
}

// the backward's kernel path and its recorded path (create_graph) give one gradient, and the
// recorded one has history
TEST_P(FusedTwin, RecordedBackwardGivesTheKernelsGradient) {
  const TwinCase& c = GetParam().c;
  const DType dt = GetParam().dtype;
  const V leaves = leaves_of(c, dt);
  const Tensor out = c.fused(leaves);
  Generator gen(5);
  const Tensor w = randn(out.shape(), &gen, dt).requires_grad_();
  const V fast = autograd::grad({out}, leaves, {w}, {.retain_graph = true});
  const V recorded = autograd::grad({out}, leaves, {w}, {.retain_graph = true, .create_graph = true});
  const bool f64 = dt == kFloat64;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::string what = c.name + " input " + std::to_string(i);
    EXPECT_TRUE(recorded[i].requires_grad()) << what << ": create_graph gave a gradient without history";
    expect_close(recorded[i].detach(), fast[i], f64 ? 1e-11 : 2e-5, f64 ? 1e-13 : 1e-6, what);
  }
  // x's gradient from the kernel has no history (the tables' gradients are recorded ops)
  EXPECT_FALSE(fast[0].requires_grad()) << c.name << ": the kernel path recorded its gradient";
}

std::vector<TwinParam> twin_params() {
  std::vector<TwinParam> p;
  for (DType dt : {kFloat64, kFloat32})
    for (const TwinCase& c : twin_cases()) p.push_back({c, dt});
  return p;
}

std::string twin_name(const ::testing::TestParamInfo<TwinParam>& info) {
  std::string s = info.param.c.name + (info.param.dtype == kFloat64 ? "_f64" : "_f32");
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Ops, FusedTwin, ::testing::ValuesIn(twin_params()), twin_name);

// ---------------------------------------------------------------- threads
// out and every gradient, at a given thread count
V run_at(int threads, const std::function<Tensor(const V&)>& fn, const V& leaves, const Tensor& w) {
  const int before = get_num_threads();
  set_num_threads(threads);
  const Tensor out = fn(leaves);
  V r = autograd::grad({out}, leaves, {w});
  r.insert(r.begin(), out.detach());
  set_num_threads(before);
  return r;
}

TEST(LlamaOps, SameBitsAtAnyThreadCount) {
  Generator gen(3);
  // enough elements for parallel_rows / parallel_elems to split each pass over two threads
  // (rms_norm's backward: 16 blocks of 64 rows)
  const V norm_in = {randn({1000, 96}, &gen).requires_grad_(), randn({96}, &gen).requires_grad_()};
  const V rot_in = {randn({8, 8, 64, 32}, &gen).transpose(1, 2).requires_grad_(),
                    randn({8, 32}, &gen).requires_grad_(), randn({8, 32}, &gen).requires_grad_()};
  const auto norm = [](const V& x) { return rms_norm(x[0], {96}, x[1], 1e-5); };
  const auto rot = [](const V& x) { return apply_rotary_emb(x[0], x[1], x[2]); };
  const V glu_in = {randn({300, 128}, &gen).requires_grad_(), randn({300, 128}, &gen).requires_grad_()};
  const auto glu = [](const V& x) { return silu_mul(x[0], x[1]); };
  using Fn = std::function<Tensor(const V&)>;
  for (const auto& [fn, in] :
       {std::pair{Fn(norm), norm_in}, std::pair{Fn(rot), rot_in}, std::pair{Fn(glu), glu_in}}) {
    const Tensor w = randn(fn(in).shape(), &gen);
    const V one = run_at(1, fn, in, w), two = run_at(2, fn, in, w);
    for (std::size_t i = 0; i < one.size(); ++i)
      expect_close(two[i], one[i], 0, 0, "result " + std::to_string(i));
  }
}

// ---------------------------------------------------------------- behaviour
TEST(RmsNorm, DefaultEpsIsTheDtypesMachineEpsilon) {
  // a zero row: rstd = 1 / sqrt(eps) shows which eps was used (through weight 1 and x = 0, y
  // is 0 either way, so read it from the gradient: dx = rstd * dy for x = 0)
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = zeros({1, 4}, dt).requires_grad_();
    rms_norm(x, {4}).backward(ones({1, 4}, dt));
    const double eps =
        dt == kFloat32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
    expect_close(x.grad(), full({1, 4}, 1.0 / std::sqrt(eps), dt), 1e-6, 0, "dx at x = 0");
  }
}

TEST(LlamaOps, GradFnNames) {
  Tensor x = randn({2, 4}).requires_grad_();
  EXPECT_EQ(rms_norm(x, {4}).grad_fn_name(), "RmsNormBackward0");
  EXPECT_EQ(apply_rotary_emb(x, ones({2, 4}), zeros({2, 4})).grad_fn_name(), "RotaryEmbBackward0");
  EXPECT_EQ(silu_mul(x, x).grad_fn_name(), "SiluMulBackward0");
}

// with cos = 1 and sin = 0 the rotation is the identity; with cos = 0, sin = 1 it is
// rotate_half, and applying it twice negates
TEST(ApplyRotaryEmb, IdentityAndQuarterTurns) {
  const Tensor x = randn({2, 3, 6});
  expect_close(apply_rotary_emb(x, ones({3, 6}), zeros({3, 6})), x, 0, 0, "identity");
  const Tensor quarter = apply_rotary_emb(x, zeros({3, 6}), ones({3, 6}));
  expect_close(quarter, cat({neg(x.narrow(2, 3, 3)), x.narrow(2, 0, 3)}, 2), 0, 0, "rotate_half");
  expect_close(apply_rotary_emb(quarter, zeros({3, 6}), ones({3, 6})), neg(x), 0, 0, "two quarter turns");
}

// ---------------------------------------------------------------- errors
TEST(RmsNorm, Errors) {
  const Tensor x = zeros({2, 3, 4});
  expect_error([&] { rms_norm(x, {3}); }, {"rms_norm", "[3]", "[2, 3, 4]"});
  expect_error([&] { rms_norm(x, {2, 3, 4, 5}); }, {"rms_norm", "[2, 3, 4, 5]", "[2, 3, 4]"});
  expect_error([&] { rms_norm(x, {}); }, {"rms_norm", "at least one dim"});
  expect_error([&] { rms_norm(x, {4}, ones({3})); }, {"rms_norm", "weight", "[3]", "[4]"});
  expect_error([&] { rms_norm(x, {4}, ones({4}, kFloat64)); }, {"rms_norm", "float64", "float32"});
  expect_error([&] { rms_norm(zeros({2, 4}, kInt64), {4}); }, {"rms_norm", "int64", "[2, 4]"});
  expect_error([&] { rms_norm(x, {4}, Tensor(), -1.0); }, {"rms_norm", "eps", "-1"});
}

TEST(ApplyRotaryEmb, Errors) {
  const Tensor t = zeros({5, 8});
  expect_error([&] { apply_rotary_emb(zeros({8}), t, t); }, {"apply_rotary_emb", "[8]"});
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 5, 7}), zeros({5, 7}), zeros({5, 7}));
      },
      {"apply_rotary_emb", "even", "[2, 5, 7]"});
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 4, 8}), t, t);
      },
      {"apply_rotary_emb", "[2, 4, 8]", "[5, 8]"});
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 5, 8}), t, zeros({5, 6}));
      },
      {"apply_rotary_emb", "[2, 5, 8]", "[5, 6]"});
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 5, 8}), zeros({1, 5, 8}), zeros({1, 5, 8}));
      },
      {"apply_rotary_emb", "[1, 5, 8]"});
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 5, 8}, kFloat64), t, t);
      },
      {"apply_rotary_emb", "float64", "float32"});
  expect_error([&] { apply_rotary_emb(zeros({2, 5, 8}, kInt64), t, t); }, {"apply_rotary_emb", "int64"});
}

TEST(SiluMul, Errors) {
  expect_error([&] { silu_mul(zeros({2, 3}), zeros({3})); }, {"silu_mul", "[2, 3]", "[3]"});
  expect_error([&] { silu_mul(zeros({2, 3}), zeros({2, 3}, kFloat64)); }, {"silu_mul", "float32", "float64"});
  expect_error([&] { silu_mul(zeros({2, 3}, kInt64), zeros({2, 3}, kInt64)); }, {"silu_mul", "int64"});
}

}  // namespace
}  // namespace xgrad::testing
