// tests/core/test_matmul_bf16.cpp: matmul and linear on bfloat16 tensors (the bfloat16 GEMM,
// accumulated in float32, the result rounded to bfloat16 once), forward and gradients, against
// three references (S: the same product on absolute values, sum |a b| (+ |bias|); K: a bound
// on every contracted length of the case, the larger operand's element count):
//   - torch 1.13's float32 ops on the same bfloat16 values, rounded to bfloat16 once
//     (tests/fixtures/matmul_bf16.txt, *_f32acc, from gen_matmul_bf16.py): the float32 sums
//     differ by at most two rounding chains, each rounded to bfloat16 once, so the results sit
//     at most one bfloat16 step apart: |got - torch| <= 2^-7 max(|got|, |torch|) + (2 K + 8) 2^-24 S;
//   - torch 1.13's own bfloat16 ops: its CPU bfloat16 matmul (oneDNN) does not round once from
//     a float32 sum (its results sit up to about 2^-9 S from the float32 product), so within
//     2^-7 max(|got|, |torch|) + 2^-7 S;
//   - xgrad's float32 ops on the same values (the gradient reaching out being r rounded to
//     bfloat16, as in torch): one rounding to bfloat16 (half a step) after the float32 chains,
//     |got - ref32| <= 2^-8 |ref32| + (2 K + 8) 2^-24 S.
// Also: exact small cases and a tie, the same bits at 1, 2 and 3 threads, mixed dtypes throwing
// with both dtypes named, and a backward with create_graph (recorded bfloat16 matmuls).
//
// Adding a case: a row in gen_matmul_bf16.py's CASES and in kCases here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "thread_count.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::Fixture;
using testing::read_fixture;

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/matmul_bf16.txt");
  return f;
}

struct OpCase {
  const char* name;
  bool linear, bias;
};

const OpCase kCases[] = {{"linear3d", true, true},    {"linear2d", true, false}, {"linear1d", true, true},
                         {"mm_long_k", false, false}, {"batched", false, false}, {"broadcast", false, false},
                         {"vec_mat", false, false},   {"mat_vec", false, false}, {"bmm_bt", false, false}};

Tensor run_op(const OpCase& c, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return c.linear ? linear(a, b, bias) : matmul(a, b);
}

Tensor leaf(const Tensor& t, DType dt) {
  Tensor x = t.to(dt).detach();
  x.requires_grad_();
  return x;
}

// got (bfloat16) against want (float32 values) within rel * |.| + abs_k * scale, elementwise.
void expect_within(const Tensor& got, const Tensor& want, const Tensor& scale, double rel, double abs_k,
                   bool rel_of_max, const std::string& what) {
  ASSERT_EQ(got.dtype(), kBFloat16) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<float> g = got.to(kFloat32).contiguous().to_vector<float>();
  const std::vector<float> w = want.contiguous().to_vector<float>();
  const std::vector<float> s = scale.contiguous().to_vector<float>();
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double mag = rel_of_max ? std::max(std::fabs(g[i]), std::fabs(w[i])) : std::fabs(w[i]);
    const double tol = rel * mag + abs_k * s[i];
    if (!(std::fabs(double(g[i]) - double(w[i])) <= tol) && ++bad <= 3)
      ADD_FAILURE() << what << "[" << i << "]: " << g[i] << " vs " << w[i] << " (tolerance " << tol << ")";
  }
  EXPECT_EQ(bad, 0) << what;
}

class MatmulBf16 : public ::testing::TestWithParam<OpCase> {};

TEST_P(MatmulBf16, ForwardAndGradsMatchTorchAndTheFloat32Ops) {
  const OpCase& c = GetParam();
  const std::string n = c.name;
  const Tensor a32 = fx().get(n + ".a"), b32 = fx().get(n + ".b"), r = fx().get(n + ".r");
  const Tensor bias32 = c.bias ? fx().get(n + ".bias") : Tensor();
  const double k_bound = double(std::max(a32.numel(), b32.numel()));
  const double abs_k = (2 * k_bound + 8) * std::ldexp(1.0, -24);

  // bfloat16: out = op(a, b), loss = sum(out.float() * r)
  const Tensor a = leaf(a32, kBFloat16), b = leaf(b32, kBFloat16);
  const Tensor bias = c.bias ? leaf(bias32, kBFloat16) : Tensor();
  const Tensor out = run_op(c, a, b, bias);
  ASSERT_EQ(out.dtype(), kBFloat16);
  sum(mul(out.to(kFloat32), r)).backward();

  // float32 on the same values, with the gradient r rounded to bfloat16 as it reaches out;
  // the scales: the same products on absolute values
  const Tensor dout = r.to(kBFloat16).to(kFloat32);
  const Tensor fa = leaf(a32, kFloat32), fb = leaf(b32, kFloat32);
  const Tensor fbias = c.bias ? leaf(bias32, kFloat32) : Tensor();
  const Tensor out32 = run_op(c, fa, fb, fbias);
  sum(mul(out32, dout)).backward();
  const Tensor sa = leaf(abs(a32), kFloat32), sb = leaf(abs(b32), kFloat32);
  const Tensor sbias = c.bias ? leaf(abs(bias32), kFloat32) : Tensor();
  const Tensor s_out = run_op(c, sa, sb, sbias);
  sum(mul(s_out, abs(dout))).backward();

  const double step = std::ldexp(1.0, -7), half_step = std::ldexp(1.0, -8);
  for (const char* ref : {"_f32acc", ""}) {  // torch's float32 product, then torch's bfloat16 op
    const double abs_ref = *ref ? abs_k : step;
    const std::string t = *ref ? " vs torch float32" : " vs torch bfloat16";
    expect_within(out, fx().get(n + ".out" + ref), s_out.detach(), step, abs_ref, true, n + ".out" + t);
    expect_within(a.grad(), fx().get(n + ".a.grad" + ref), sa.grad(), step, abs_ref, true, n + ".a.grad" + t);
    expect_within(b.grad(), fx().get(n + ".b.grad" + ref), sb.grad(), step, abs_ref, true, n + ".b.grad" + t);
    if (c.bias)
      expect_within(bias.grad(), fx().get(n + ".bias.grad" + ref), sbias.grad(), step, abs_ref, true,
                    n + ".bias.grad" + t);
  }
  expect_within(out, out32.detach(), s_out.detach(), half_step, abs_k, false, n + ".out vs float32");
  expect_within(a.grad(), fa.grad(), sa.grad(), half_step, abs_k, false, n + ".a.grad vs float32");
  expect_within(b.grad(), fb.grad(), sb.grad(), half_step, abs_k, false, n + ".b.grad vs float32");
  if (c.bias) {
    expect_within(bias.grad(), fx().get(n + ".bias.grad"), sbias.grad(), step, abs_k, true,
                  n + ".bias.grad vs torch");
    expect_within(bias.grad(), fbias.grad(), sbias.grad(), half_step, abs_k, false,
                  n + ".bias.grad vs float32");
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MatmulBf16, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return std::string(info.param.name);
                         });

// A result that is exact in float32 and in bfloat16 (small integers) comes out exactly.
TEST(MatmulBf16Exact, SmallIntegersAreExact) {
  const Tensor a = tensor({1.0f, 2.0f, -3.0f, 4.0f, 0.5f, -1.0f}).view({2, 3}).to(kBFloat16);
  const Tensor b = tensor({2.0f, -1.0f, 0.0f, 3.0f, 1.0f, 1.0f}).view({3, 2}).to(kBFloat16);
  const Tensor out = matmul(a, b);
  ASSERT_EQ(out.dtype(), kBFloat16);
  // [1 2 -3; 4 .5 -1] @ [2 -1; 0 3; 1 1] = [-1 2; 7 -3.5]
  EXPECT_EQ(out.to(kFloat32).to_vector<float>(), (std::vector<float>{-1.0f, 2.0f, 7.0f, -3.5f}));
  // sums that are not bfloat16s, rounded once from float32 to nearest (bfloat16's step at 1
  // is 2^-7), ties to even
  const Tensor x = tensor({1.0f, 1.0f}).view({1, 2}).to(kBFloat16);
  auto dot_with = [&](float w1) {
    return matmul(x, tensor({1.0f, w1}).view({2, 1}).to(kBFloat16)).to(kFloat32).item<float>();
  };
  EXPECT_EQ(dot_with(0x1p-9f), 1.0f);                      // below the midpoint
  EXPECT_EQ(dot_with(0x1p-8f + 0x1p-9f), 1.0f + 0x1p-7f);  // above it
  EXPECT_EQ(dot_with(0x1p-8f), 1.0f);                      // a tie, to the even 1
  EXPECT_EQ(dot_with(0x1p-7f + 0x1p-8f), 1.0f + 0x1p-6f);  // a tie, to the even 1 + 2^-6
}

// Views (transposed, expanded, sliced) run the same GEMM chains as their contiguous copies,
// and empty contractions give zeros (or the bias).
TEST(MatmulBf16Exact, ViewsMatchContiguousCopiesAndEmptySizesWork) {
  Generator g(4);
  const Tensor a = randn({3, 40, 24}, &g).to(kBFloat16), b = randn({30, 40}, &g).to(kBFloat16);
  const Tensor w = randn({24, 18}, &g).to(kBFloat16);
  auto same = [](const Tensor& x, const Tensor& y) {
    ASSERT_EQ(x.dtype(), kBFloat16);
    EXPECT_EQ(x.to(kFloat32).contiguous().to_vector<float>(), y.to(kFloat32).contiguous().to_vector<float>());
  };
  same(matmul(a.transpose(1, 2), b.t()), matmul(a.transpose(1, 2).contiguous(), b.t().contiguous()));
  same(matmul(b.expand({3, 30, 40}), a), matmul(b.expand({3, 30, 40}).contiguous(), a));
  same(matmul(a.slice(1, 5, 25), w), matmul(a.slice(1, 5, 25).contiguous(), w));
  same(linear(a, w.t(), ones({18}).to(kBFloat16)), linear(a, w.t().contiguous(), ones({18}).to(kBFloat16)));
  const Tensor e = matmul(zeros({3, 0}).to(kBFloat16), zeros({0, 4}).to(kBFloat16));
  ASSERT_EQ(e.dtype(), kBFloat16);
  EXPECT_EQ(e.to(kFloat32).to_vector<float>(), std::vector<float>(12, 0.0f));
  const Tensor bias = tensor({1.5f, -2.0f}).to(kBFloat16);
  const Tensor l = linear(zeros({3, 0}).to(kBFloat16), zeros({2, 0}).to(kBFloat16), bias);
  EXPECT_EQ(l.to(kFloat32).to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f, 1.5f, -2.0f}));
}

TEST(MatmulBf16Threads, SameBitsAtOneTwoAndThreeThreads) {
  Generator g(5);
  const Tensor x = randn({4, 50, 96}, &g).to(kBFloat16), w = randn({200, 96}, &g).to(kBFloat16);
  const Tensor bias = randn({200}, &g).to(kBFloat16);
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    testing::ThreadCount tc(threads);
    outs.push_back(linear(x, w, bias).to(kFloat32).to_vector<float>());
    const std::vector<float> m = matmul(x, w.t()).to(kFloat32).to_vector<float>();
    outs.back().insert(outs.back().end(), m.begin(), m.end());
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(MatmulBf16Errors, MixedDtypesThrowNamingTheOpAndBothDtypes) {
  const Tensor a = ones({2, 3}).to(kBFloat16), b = ones({3, 2});
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  for (const std::string& m : {message([&] { matmul(a, b); }), message([&] { matmul(b.t(), a.t()); }),
                               message([&] { linear(a, b.t()); })}) {
    EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
    EXPECT_TRUE(m.find("matmul") != std::string::npos || m.find("linear") != std::string::npos) << m;
  }
  const Tensor bias32 = ones({2});
  const std::string m = message([&] { linear(a, ones({2, 3}).to(kBFloat16), bias32); });
  EXPECT_NE(m.find("bias dtype float32"), std::string::npos) << m;
}

// backward with create_graph runs the backward in recorded ops (matmul on bfloat16 again): the
// gradients equal the fused path's, and carry a graph.
TEST(MatmulBf16CreateGraph, RecordedBackwardEqualsTheFusedOne) {
  Generator g(9);
  const Tensor a0 = randn({6, 20}, &g), b0 = randn({20, 7}, &g), r = randn({6, 7}, &g);
  std::vector<Tensor> grads[2];
  for (bool create : {false, true}) {
    const Tensor a = leaf(a0, kBFloat16), b = leaf(b0, kBFloat16);
    const Tensor loss = sum(mul(matmul(a, b).to(kFloat32), r));
    autograd::GradOptions opts;
    opts.create_graph = create;
    grads[create] = autograd::grad({loss}, {a, b}, {}, opts);
    ASSERT_EQ(grads[create].size(), 2u);
    EXPECT_EQ(grads[create][0].requires_grad(), create);
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(grads[1][i].dtype(), kBFloat16);
    EXPECT_EQ(grads[0][i].to(kFloat32).to_vector<float>(), grads[1][i].to(kFloat32).to_vector<float>());
  }
}

// The same for linear without a bias (x (2, 3, 20) folded into 6 rows for dW).
TEST(MatmulBf16CreateGraph, LinearRecordedBackwardEqualsTheFusedOne) {
  Generator g(10);
  const Tensor x0 = randn({2, 3, 20}, &g), w0 = randn({7, 20}, &g), r = randn({2, 3, 7}, &g);
  std::vector<Tensor> grads[2];
  for (bool create : {false, true}) {
    const Tensor x = leaf(x0, kBFloat16), w = leaf(w0, kBFloat16);
    autograd::GradOptions opts;
    opts.create_graph = create;
    grads[create] = autograd::grad({sum(mul(linear(x, w).to(kFloat32), r))}, {x, w}, {}, opts);
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(grads[1][i].dtype(), kBFloat16);
    EXPECT_EQ(grads[0][i].to(kFloat32).to_vector<float>(), grads[1][i].to(kFloat32).to_vector<float>());
  }
}

}  // namespace
}  // namespace xgrad
