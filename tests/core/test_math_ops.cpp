// tests/core/test_math_ops.cpp: silu, softplus, sin, cos, log1p, expm1, erf, atan2, cumsum,
// logsumexp and repeat_interleave against PyTorch (tests/fixtures/math.txt from gen_math.py:
// values, dtypes and gradients in float32 and float64, edge values), their grad_fn names,
// Tensor method spellings, and errors. Gradient checks are in gradcheck_rows_math.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "error_message.h"
#include "fixture_reader.h"
#include "gradcheck_table.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

using V = std::vector<Tensor>;
using Fn = std::function<Tensor(const V&)>;

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/math.txt");
  return f;
}

// One fixture case: inputs name.in<i>, output name.out (its dtype too), upstream gradient
// name.dout and input gradients name.grad<i> where torch wrote them.
void check_case(const std::string& name, int n_inputs, const Fn& fn) {
  SCOPED_TRACE(name);
  V in;
  for (int i = 0; i < n_inputs; ++i) {
    Tensor t = fx().get(name + ".in" + std::to_string(i)).detach();
    if (fx().has(name + ".grad" + std::to_string(i))) t.requires_grad_();
    in.push_back(t);
  }
  const Tensor& want = fx().get(name + ".out");
  const bool f64 = want.dtype() == kFloat64;
  const double rtol = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-14 : 1e-6;
  Tensor out = fn(in);
  EXPECT_EQ(out.dtype(), want.dtype()) << name << ".out dtype";
  expect_close(out, want, rtol, atol, name + ".out");
  if (!fx().has(name + ".dout")) return;
  out.backward(fx().get(name + ".dout"));
  for (int i = 0; i < n_inputs; ++i) {
    const std::string g = name + ".grad" + std::to_string(i);
    if (!fx().has(g)) continue;
    ASSERT_TRUE(in[i].grad().defined()) << g;
    expect_close(in[i].grad(), fx().get(g), rtol, atol, g);
  }
}

// The case in float32 and in float64.
void check_both(const std::string& name, int n_inputs, const Fn& fn) {
  check_case(name + ".f32", n_inputs, fn);
  check_case(name + ".f64", n_inputs, fn);
}

TEST(MathOps, SiluAndSoftplusMatchTorch) {
  check_both("silu", 1, [](const V& x) { return silu(x[0]); });
  check_both("silu_edges", 1, [](const V& x) { return silu(x[0]); });
  check_both("softplus", 1, [](const V& x) { return softplus(x[0]); });
  check_both("softplus_beta2_th5", 1, [](const V& x) { return softplus(x[0], 2.0, 5.0); });
  check_both("softplus_edges", 1, [](const V& x) { return softplus(x[0]); });
}

TEST(MathOps, TrigonometryMatchesTorch) {
  check_both("sin", 1, [](const V& x) { return sin(x[0]); });
  check_both("cos", 1, [](const V& x) { return x[0].cos(); });
  check_both("sin_large", 1, [](const V& x) { return x[0].sin(); });
}

TEST(MathOps, Log1pExpm1ErfMatchTorch) {
  check_both("log1p", 1, [](const V& x) { return log1p(x[0]); });
  check_both("log1p_edges", 1, [](const V& x) { return x[0].log1p(); });
  check_both("expm1", 1, [](const V& x) { return expm1(x[0]); });
  check_both("expm1_edges", 1, [](const V& x) { return x[0].expm1(); });
  check_both("erf", 1, [](const V& x) { return erf(x[0]); });
  check_both("erf_edges", 1, [](const V& x) { return x[0].erf(); });
}

TEST(MathOps, IntegerInputsComputeInFloat32LikeTorch) {
  check_case("sin_int", 1, [](const V& x) { return sin(x[0]); });
  check_case("cos_int", 1, [](const V& x) { return cos(x[0]); });
  check_case("log1p_int", 1, [](const V& x) { return log1p(x[0]); });
  check_case("expm1_int", 1, [](const V& x) { return expm1(x[0]); });
  check_case("erf_int", 1, [](const V& x) { return erf(x[0]); });
  check_case("atan2_int", 2, [](const V& x) { return atan2(x[0], x[1]); });
  check_case("logsumexp_int", 1, [](const V& x) { return logsumexp(x[0], 0); });
  check_case("cumsum_int", 1, [](const V& x) { return cumsum(x[0], 1); });
  check_case("repeat_interleave_int", 1, [](const V& x) { return repeat_interleave(x[0], 2, 0); });
  expect_close(sin(tensor({true, false})), tensor({std::sin(1.0f), 0.0f}), 1e-6, 0, "sin of bool");
  EXPECT_EQ(sin(tensor({true, false})).dtype(), kFloat32);
  EXPECT_EQ(cumsum(tensor({true, false, true}), 0).dtype(), kInt64);
  expect_close(cumsum(tensor({true, false, true}), 0), tensor({1, 1, 2}), 0, 0, "cumsum of bool");
}

TEST(MathOps, Atan2MatchesTorchWithBroadcastingAndSignedZeros) {
  check_both("atan2", 2, [](const V& x) { return atan2(x[0], x[1]); });
  check_both("atan2_zeros", 2, [](const V& x) { return x[0].atan2(x[1]); });
  // expect_close takes -0 for 0: the signs of the zero results separately
  for (const std::string dt : {".f32", ".f64"}) {
    const std::vector<double> got =
        atan2(fx().get("atan2_zeros" + dt + ".in0"), fx().get("atan2_zeros" + dt + ".in1"))
            .to_vector<double>();
    const std::vector<double> want = fx().get("atan2_zeros" + dt + ".out").to_vector<double>();
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << dt << " element " << i;
  }
}

TEST(MathOps, CumsumMatchesTorch) {
  check_both("cumsum_dim0", 1, [](const V& x) { return cumsum(x[0], 0); });
  check_both("cumsum_dim1", 1, [](const V& x) { return x[0].cumsum(1); });
  check_both("cumsum_dim-1", 1, [](const V& x) { return cumsum(x[0], -1); });
  check_both("cumsum_long", 1, [](const V& x) { return cumsum(x[0], 0); });
  // a transposed input reads the same numbers as its contiguous copy
  const Tensor x = fx().get("cumsum_dim1.f64.in0");
  expect_close(cumsum(x.transpose(0, 2), 1), cumsum(x.transpose(0, 2).contiguous(), 1), 0, 0, "strided");
}

TEST(MathOps, LogsumexpMatchesTorch) {
  check_both("logsumexp_dim1", 1, [](const V& x) { return logsumexp(x[0], 1); });
  check_both("logsumexp_dim0_keep", 1, [](const V& x) { return x[0].logsumexp(0, true); });
  check_both("logsumexp_dims02", 1, [](const V& x) { return logsumexp(x[0], {0, 2}); });
  check_both("logsumexp_large", 1, [](const V& x) { return logsumexp(x[0], 1); });
  check_both("logsumexp_inf_rows", 1, [](const V& x) { return logsumexp(x[0], -1); });
}

TEST(MathOps, RepeatInterleaveMatchesTorch) {
  check_both("repeat_interleave_dim1", 1, [](const V& x) { return repeat_interleave(x[0], 2, 1); });
  check_both("repeat_interleave_dim0", 1, [](const V& x) { return x[0].repeat_interleave(3, 0); });
  check_both("repeat_interleave_flat", 1, [](const V& x) { return x[0].repeat_interleave(2); });
  check_both("repeat_interleave_zero", 1, [](const V& x) { return repeat_interleave(x[0], 0, 1); });
  check_both("repeat_interleave_0d_flat", 1, [](const V& x) { return repeat_interleave(x[0], 3); });
}

TEST(MathOps, GradFnNamesAreTorchs) {
  Tensor x = inputs({{3, 4}})[0], y = inputs({{4}})[0];
  const std::vector<std::pair<Tensor, std::string>> cases{
      {silu(x), "SiluBackward0"},
      {softplus(x), "SoftplusBackward0"},
      {sin(x), "SinBackward0"},
      {cos(x), "CosBackward0"},
      {log1p(x.abs()), "Log1PBackward0"},
      {expm1(x), "Expm1Backward0"},
      {erf(x), "ErfBackward0"},
      {atan2(x, y), "Atan2Backward0"},
      {cumsum(x, 0), "CumsumBackward0"},
      {logsumexp(x, 1), "LogsumexpBackward0"},
      {repeat_interleave(x, 2, 1), "IndexSelectBackward0"},  // torch 1.13 composes it so
      {repeat_interleave(x, 2), "IndexSelectBackward0"}};
  for (const auto& [t, name] : cases) EXPECT_EQ(t.grad_fn_name(), name);
}

TEST(MathOps, SoftplusIsLinearAboveTheThreshold) {
  // beta x > threshold returns x itself (not log1p(exp(beta x)) / beta, which overflows)
  const Tensor x = tensor({30.0, 1000.0, 1e30});
  expect_close(softplus(x), x, 0, 0, "softplus above threshold");
  expect_close(softplus(x.to(kFloat64), 0.5, 10.0), x.to(kFloat64), 0, 0, "beta 0.5, threshold 10");
}

TEST(MathOps, Errors) {
  const Tensor ints = tensor({1, 2, 3});
  const Tensor x = zeros({2, 3});
  // torch: "silu_cpu" / "softplus_cpu" not implemented for 'Long'
  expect_error([&] { silu(ints); }, {"silu", "int64", "[3]"});
  expect_error([&] { softplus(ints); }, {"softplus", "int64", "[3]"});
  expect_error([&] { atan2(x, zeros({2, 3}, kFloat64)); }, {"atan2", "float32", "float64", "[2, 3]"});
  expect_error([&] { atan2(x, zeros({4})); }, {"atan2", "[2, 3]", "[4]"});
  expect_error([&] { cumsum(x, 2); }, {"cumsum", "2", "[2, 3]"});
  expect_error([&] { logsumexp(x, -3); }, {"logsumexp", "-3", "[2, 3]"});
  expect_error([&] { logsumexp(x, {1, 1}); }, {"logsumexp", "multiple times", "[2, 3]"});
  expect_error([&] { repeat_interleave(x, -1, 0); }, {"repeat_interleave", "negative", "-1", "[2, 3]"});
  expect_error([&] { repeat_interleave(x, 2, 2); }, {"repeat_interleave", "2", "[2, 3]"});
  expect_error([&] { repeat_interleave(scalar_tensor(1.0), 2, 0); }, {"repeat_interleave", "[]"});
}

}  // namespace
}  // namespace xgrad::testing
