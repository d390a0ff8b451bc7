// tests/core/test_attention.cpp: scaled_dot_product_attention against the composed ops it
// stands for (matmul, masked_fill, softmax, dropout, matmul) -- forward and all three input
// gradients, float32 and float64, with and without dropout from the same seed, at the GPT
// bench shapes -- with attn_mask (bool, float, broadcast) and enable_gqa against the chain
// with repeat_interleave, against torch (tests/fixtures/sdpa.txt and sdpa_mask_gqa.txt, from
// gen_sdpa.py and gen_sdpa_mask_gqa.py), its memory layouts (no copies around it in the MHA),
// its two backward paths (fused, and recorded under create_graph: the same gradients, and
// second derivatives against finite differences) and its errors. Gradients vs finite
// differences are rows in gradcheck_rows_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {

namespace {

// The composed chain the fused op stands for (matmul, mask, scale, softmax, dropout, matmul),
// for any L, S (causal: key j > query i masked).
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, double p, bool causal,
                          Generator* gen) {
  const int64_t L = q.size(-2), S = k.size(-2);
  Tensor scores = matmul(q, k.transpose(-2, -1));  // (..., L, S)
  if (causal) scores = masked_fill(scores, triu(ones({L, S}), 1).to(kBool), -INFINITY);
  Tensor w = softmax(scores * (1.0 / std::sqrt(double(q.size(-1)))), -1);
  w = dropout(w, p, true, gen);
  return matmul(w, v);  // (..., L, Ev)
}

struct Case {
  Shape q, k, v;  // (B, H, L, E), (B, H, S, E), (B, H, S, Ev)
  bool causal;
  bool mha_views;  // pass (B, T, H, D) leaves transposed, as the MHA does
};

// Runs both with the same seed and upstream gradient; compares out and q/k/v grads.
void expect_equivalent(const Case& c, DType dt, double p, double rtol, double atol, int64_t block = 64) {
  SCOPED_TRACE(::testing::Message() << "q " << shape_str(c.q) << " k " << shape_str(c.k) << " v "
                                    << shape_str(c.v) << " causal " << c.causal << " " << dtype_name(dt)
                                    << " p " << p << " block " << block);
  Generator init(2024);
  auto leaf = [&](const Shape& s) {
    Shape st = s;
    if (c.mha_views) std::swap(st[1], st[2]);
    return randn(st, &init, dt).requires_grad_();
  };
  Tensor q = leaf(c.q), k = leaf(c.k), v = leaf(c.v);
  auto view = [&](const Tensor& t) { return c.mha_views ? t.transpose(1, 2) : t; };
  Shape out_shape = c.q;
  out_shape.back() = c.v.back();
  Tensor g = randn(out_shape, &init, dt);

  Generator g1(77), g2(77);
  Tensor fused = detail::scaled_dot_product_attention_blocked(view(q), view(k), view(v), p, c.causal,
                                                              std::nullopt, &g1, block);
  fused.backward(g);
  Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
  q.set_grad(Tensor());
  k.set_grad(Tensor());
  v.set_grad(Tensor());
  Tensor composed = composed_attention(view(q), view(k), view(v), p, c.causal, &g2);
  composed.backward(g);
  // the generator left exactly where dropout() leaves it (causal: the draws of the masked
  // keys are skipped, not left out), so the next random op draws what torch's would
  EXPECT_EQ(g1.get_state(), g2.get_state()) << "the two drew a different number of values";
  EXPECT_EQ(g1.random(), g2.random());
  expect_close(fused, composed, rtol, atol, "out");
  expect_close(dq, q.grad(), rtol, atol, "dq");
  expect_close(dk, k.grad(), rtol, atol, "dk");
  expect_close(dv, v.grad(), rtol, atol, "dv");
}

std::vector<Case> cases() {
  return {
      {{2, 4, 64, 16}, {2, 4, 64, 16}, {2, 4, 64, 16}, true, true},     // tiny GPT (B 32)
      {{2, 4, 128, 32}, {2, 4, 128, 32}, {2, 4, 128, 32}, true, true},  // small GPT (B 16)
      {{1, 6, 256, 64}, {1, 6, 256, 64}, {1, 6, 256, 64}, true, true},  // medium GPT (B 8)
      {{2, 2, 130, 8}, {2, 2, 130, 8}, {2, 2, 130, 8}, true, false},    // 3 blocks, ragged end
      {{2, 3, 37, 8}, {2, 3, 50, 8}, {2, 3, 50, 5}, false, false},      // L != S
      {{2, 3, 50, 8}, {2, 3, 37, 8}, {2, 3, 37, 5}, true, false},       // causal, L > S
      {{1, 2, 37, 8}, {1, 2, 150, 8}, {1, 2, 150, 6}, true, false},     // causal, L < S
      // head dims of whole vectors (scores in rows, out and dq rows written straight), a ragged
      // last block of 2 rows, keys not a multiple of the vector
      {{2, 2, 50, 32}, {2, 2, 50, 32}, {2, 2, 50, 48}, true, true},
      {{1, 3, 45, 48}, {1, 3, 70, 48}, {1, 3, 70, 32}, true, false},  // causal, L < S
      {{1, 2, 33, 24}, {1, 2, 20, 24}, {1, 2, 20, 40}, false, false},
  };
}

// expect_close, and exactly zero wherever expected is exactly zero (a weight that should be 0
// but is exp(-80) ~ 1.8e-35 passes any tolerance)
void expect_close_and_zeros(const Tensor& actual, const Tensor& expected, const std::string& what) {
  expect_close(actual, expected, 1e-4, 2e-5, what);
  const std::vector<float> a = actual.to_vector<float>(), e = expected.to_vector<float>();
  int reported = 0;
  for (std::size_t i = 0; i < a.size() && i < e.size(); ++i)
    if (e[i] == 0.0f && a[i] != 0.0f && reported++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected exactly 0";
}

// float32 sdpa and the composed ops from leaves q, k, v (modified in place by `edit` first):
// out and the three gradients agree, NaN for NaN, exact zeros for exact zeros. The float
// softmax's exp is a clamped polynomial (vec::exp_clamped): NaN must stay NaN on every ISA
// (the clamp made it exp(-80), or exp(80) under AVX-512DQ), and a -inf score must weigh
// exactly 0, not exp(-80). Head dim 20 (a whole vector and a tail), 37 queries, 45 keys.
void expect_special_scores_like_composed(bool causal, bool grads, void (*edit)(float* q, float* k)) {
  SCOPED_TRACE(::testing::Message() << "causal " << causal);
  Generator init(31);
  Tensor q = randn({1, 2, 37, 20}, &init), k = randn({1, 2, 45, 20}, &init), v = randn({1, 2, 45, 20}, &init);
  edit(q.data_ptr<float>(), k.data_ptr<float>());
  q.requires_grad_();
  k.requires_grad_();
  v.requires_grad_();
  Tensor g = randn({1, 2, 37, 20}, &init);
  Tensor fused = scaled_dot_product_attention(q, k, v, 0.0, causal);
  Tensor composed = composed_attention(q, k, v, 0.0, causal, nullptr);
  expect_close_and_zeros(fused, composed, "out");
  if (!grads) return;
  fused.backward(g);
  Tensor dq = q.grad(), dk = k.grad(), dv = v.grad();
  q.set_grad(Tensor());
  k.set_grad(Tensor());
  v.set_grad(Tensor());
  composed.backward(g);
  expect_close_and_zeros(dq, q.grad(), "dq");
  expect_close_and_zeros(dk, k.grad(), "dk");
  expect_close_and_zeros(dv, v.grad(), "dv");
}

// The composed chain of torch 2.x's math attention with attn_mask and enable_gqa: key and
// value repeated over each group of query heads (repeat_interleave), a bool mask as
// masked_fill(-inf) where false, a float mask added to the scaled scores.
Tensor composed_masked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                                 double p, bool causal, Generator* gen) {
  const int64_t L = q.size(-2), S = k.size(-2);
  const int64_t group = q.dim() >= 3 ? q.size(-3) / k.size(-3) : 1;
  const Tensor kk = group > 1 ? repeat_interleave(k, group, -3) : k;
  const Tensor vv = group > 1 ? repeat_interleave(v, group, -3) : v;
  Tensor scores = matmul(q, kk.transpose(-2, -1)) * (1.0 / std::sqrt(double(q.size(-1))));  // (..., L, S)
  if (mask.defined())
    scores = mask.dtype() == kBool ? masked_fill(scores, logical_not(mask), -INFINITY) : scores + mask;
  if (causal) scores = masked_fill(scores, triu(ones({L, S}), 1).to(kBool), -INFINITY);
  return matmul(dropout(softmax(scores, -1), p, true, gen), vv);  // (..., L, Ev)
}

struct MaskCase {
  Shape q, k, v;     // (B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)
  Shape mask;        // broadcast to (B, Hq, L, S); {} for none
  DType mask_dtype;  // kBool or the inputs' dtype
  bool causal;
};

// fused (options spelling, small blocks) against the composed chain from the same seed: out,
// the q/k/v gradients and a float mask's gradient (the mask requires grad when float)
void expect_masked_equivalent(const MaskCase& c, DType dt, double p, double rtol, double atol,
                              int64_t block) {
  SCOPED_TRACE(::testing::Message() << "q " << shape_str(c.q) << " k " << shape_str(c.k) << " mask "
                                    << shape_str(c.mask) << " " << dtype_name(c.mask_dtype) << " causal "
                                    << c.causal << " " << dtype_name(dt) << " p " << p << " block " << block);
  Generator init(2025);
  Tensor q = randn(c.q, &init, dt).requires_grad_(), k = randn(c.k, &init, dt).requires_grad_();
  Tensor v = randn(c.v, &init, dt).requires_grad_();
  Tensor mask;
  if (c.mask_dtype == kBool) {
    // about one key in four masked, never a whole row (key 0 always takes part)
    mask = gt(rand(c.mask, &init, dt), 0.25).contiguous();
    auto* keep = static_cast<uint8_t*>(mask.raw_data_ptr());
    for (int64_t i = 0; i < mask.numel(); i += c.mask.back()) keep[i] = 1;
  } else if (!c.mask.empty()) {
    mask = randn(c.mask, &init, dt).requires_grad_();
  }
  Shape out_shape = c.q;
  out_shape.back() = c.v.back();
  Tensor g = randn(out_shape, &init, dt);
  Generator g1(77), g2(77);
  Tensor fused = detail::scaled_dot_product_attention_blocked(
      q, k, v,
      {.attn_mask = mask, .dropout_p = p, .is_causal = c.causal, .enable_gqa = true, .generator = &g1},
      block);
  fused.backward(g);
  std::vector<Tensor> got{q.grad(), k.grad(), v.grad()};
  const bool mask_grad = mask.defined() && mask.requires_grad();
  if (mask_grad) got.push_back(mask.grad());
  for (Tensor* t : {&q, &k, &v, &mask})
    if (t->defined() && t->requires_grad()) t->set_grad(Tensor());
  Tensor composed = composed_masked_attention(q, k, v, mask, p, c.causal, &g2);
  composed.backward(g);
  EXPECT_EQ(g1.get_state(), g2.get_state()) << "the two drew a different number of values";
  expect_close(fused, composed, rtol, atol, "out");
  expect_close(got[0], q.grad(), rtol, atol, "dq");
  expect_close(got[1], k.grad(), rtol, atol, "dk");
  expect_close(got[2], v.grad(), rtol, atol, "dv");
  if (mask_grad) expect_close(got[3], mask.grad(), rtol, atol, "dmask");
}

std::vector<MaskCase> mask_cases(DType dt) {
  return {
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {2, 3, 9, 11}, kBool, false},  // full bool mask
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {9, 11}, kBool, false},        // (L, S), broadcast
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {2, 1, 1, 11}, kBool, false},  // padding mask
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {11}, kBool, false},           // (S)
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {2, 3, 9, 11}, dt, false},     // additive float
      {{2, 3, 9, 4}, {2, 3, 11, 4}, {2, 3, 11, 5}, {3, 9, 1}, dt, false},         // last dim broadcast
      {{2, 6, 9, 4}, {2, 2, 11, 4}, {2, 2, 11, 5}, {}, dt, false},                // GQA, groups of 3
      {{2, 6, 9, 4}, {2, 2, 9, 4}, {2, 2, 9, 5}, {}, dt, true},                   // GQA, causal
      {{1, 4, 9, 4}, {1, 1, 9, 4}, {1, 1, 9, 3}, {}, dt, true},                   // GQA, one kv head
      {{2, 4, 9, 4}, {2, 2, 11, 4}, {2, 2, 11, 5}, {2, 1, 9, 11}, kBool, false},  // GQA and a mask
      {{2, 4, 9, 4}, {2, 2, 11, 4}, {2, 2, 11, 5}, {4, 9, 11}, dt, false},        // GQA, float mask
      {{2, 2, 40, 32}, {2, 1, 37, 32}, {2, 1, 37, 48}, {40, 37}, dt, false},      // whole vectors
  };
}

}  // namespace

TEST(ScaledDotProductAttention, MaskAndGqaEqualComposedOps) {
  for (DType dt : {kFloat32, kFloat64})
    for (const MaskCase& c : mask_cases(dt))
      for (int64_t block : {int64_t{64}, int64_t{3}}) {
        const double rtol = dt == kFloat64 ? 1e-10 : 1e-4, atol = dt == kFloat64 ? 1e-12 : 2e-5;
        expect_masked_equivalent(c, dt, 0.0, rtol, atol, block);
        expect_masked_equivalent(c, dt, 0.3, rtol, atol, block);  // the composed chain's dropout mask
      }
}

TEST(ScaledDotProductAttention, EqualsComposedOpsFloat32) {
  for (const Case& c : cases()) expect_equivalent(c, kFloat32, 0.0, 1e-4, 2e-5);
}

TEST(ScaledDotProductAttention, EqualsComposedOpsFloat64) {
  for (const Case& c : cases()) expect_equivalent(c, kFloat64, 0.0, 1e-10, 1e-12);
}

TEST(ScaledDotProductAttention, DropoutEqualsComposedWithTheSameSeed) {
  for (const Case& c : cases()) {
    expect_equivalent(c, kFloat32, 0.1, 1e-4, 2e-5);
    expect_equivalent(c, kFloat64, 0.3, 1e-10, 1e-12);
  }
  expect_equivalent(cases()[0], kFloat32, 1.0, 0, 0);  // everything dropped, nothing drawn
}

TEST(ScaledDotProductAttention, SmallBlocksEqualComposedOps) {
  for (const Case& c : cases()) {
    expect_equivalent(c, kFloat64, 0.2, 1e-10, 1e-12, 16);
    expect_equivalent(c, kFloat64, 0.0, 1e-10, 1e-12, 7);
  }
}

TEST(ScaledDotProductAttention, NanScoresGiveNanRowsLikeComposedOps) {
  // head 0: query row 5 and key row 11 NaN (non-causal: every row of head 0 is NaN; causal:
  // row 5 and the rows from 11 on); head 1 untouched. Causal, only out is compared: the
  // composed softmax makes a NaN row's masked weights NaN too, so its dk and dv are NaN for
  // keys 37..44, which no query sees and the kernel skips (leaving 0).
  for (bool causal : {false, true})
    expect_special_scores_like_composed(causal, !causal, [](float* q, float* k) {
      q[5 * 20 + 3] = NAN;
      k[11 * 20 + 7] = NAN;
    });
}

TEST(ScaledDotProductAttention, MinusInfScoresWeighExactlyZeroLikeComposedOps) {
  // q[..., 0] = 2 and k[..., 13, 0] = -3e38: key 13's scores overflow to -inf in both heads
  // (from finite inputs, so every gradient is finite) and its weight is exactly 0: dv's and
  // dk's rows 13 are exact zeros, and dq, where that weight meets -3e38, is off by ~1e3 if it
  // is exp(-80) instead (with the causal mask's -inf as well)
  for (bool causal : {false, true})
    expect_special_scores_like_composed(causal, true, [](float* q, float* k) {
      for (int64_t r = 0; r < 2 * 37; ++r) q[r * 20] = 2.0f;
      for (int64_t h = 0; h < 2; ++h) k[(h * 45 + 13) * 20] = -3e38f;
    });
}

TEST(ScaledDotProductAttention, OnlyTheInputsThatRequireGradGetOne) {
  Generator init(3);
  Tensor q = randn({2, 2, 9, 4}, &init, kFloat64), k = randn({2, 2, 9, 4}, &init, kFloat64);
  Tensor v = randn({2, 2, 9, 3}, &init, kFloat64).requires_grad_();
  Tensor g = randn({2, 2, 9, 3}, &init, kFloat64);
  Generator g1(5), g2(5);
  detail::scaled_dot_product_attention_blocked(q, k, v, 0.4, true, std::nullopt, &g1, 4).backward(g);
  Tensor dv = v.grad();
  v.set_grad(Tensor());
  composed_attention(q, k, v, 0.4, true, &g2).backward(g);
  EXPECT_FALSE(q.grad().defined());
  expect_close(dv, v.grad(), 1e-10, 1e-12, "dv");

  k.requires_grad_();  // k only (q and v are read, v saved)
  v.requires_grad_(false);
  scaled_dot_product_attention(q, k, v, 0.0, true).backward(g);
  Tensor dk = k.grad();
  k.set_grad(Tensor());
  composed_attention(q, k, v, 0.0, true, nullptr).backward(g);
  expect_close(dk, k.grad(), 1e-10, 1e-12, "dk");
}

TEST(ScaledDotProductAttention, NoGradModeAndDefaultScale) {
  Generator init(4);
  Tensor q = randn({3, 6, 5}, &init), k = randn({3, 7, 5}, &init), v = randn({3, 7, 2}, &init);
  Tensor a, b;
  {
    NoGradGuard ng;
    a = scaled_dot_product_attention(q, k, v);
  }
  b = scaled_dot_product_attention(q, k, v, 0.0, false, 1.0 / std::sqrt(5.0));
  expect_close(a, b, 0, 0, "scale = 1/sqrt(E) by default");
  expect_close(a, composed_attention(q, k, v, 0.0, false, nullptr), 1e-5, 1e-6, "3-D");
  Tensor c = scaled_dot_product_attention(q, k, v, 0.0, false, 0.25);
  Tensor d = matmul(softmax(matmul(q, k.transpose(1, 2)) * 0.25, -1), v);
  expect_close(c, d, 1e-5, 1e-6, "explicit scale");
}

// The output is a (B, H, L, Ev) view of a (B, L, H, Ev) buffer, so the MHA's
// transpose(1, 2).contiguous() copies nothing; the q/k/v gradients of transpose(1, 2) views
// come back contiguous in (B, T, H, D).
// The forward that keeps W (and the dropout lane masks) for the backward and the one that keeps
// nothing (no grad) give the same bits, at the GPT shapes, with and without dropout.
TEST(ScaledDotProductAttention, NoGradForwardHasTheSameBits) {
  for (const Shape& s : {Shape{2, 4, 64, 16}, Shape{2, 4, 128, 32}, Shape{1, 2, 70, 48}})
    for (double p : {0.0, 0.1}) {
      SCOPED_TRACE(::testing::Message() << shape_str(s) << " p " << p);
      Generator init(5);
      Tensor q = randn(s, &init).requires_grad_(), k = randn(s, &init), v = randn(s, &init);
      Generator g1(9), g2(9);
      Tensor with_grad = scaled_dot_product_attention(q, k, v, p, true, std::nullopt, &g1);
      Tensor without;
      {
        NoGradGuard ng;
        without = scaled_dot_product_attention(q, k, v, p, true, std::nullopt, &g2);
      }
      expect_close(without, with_grad.detach(), 0, 0, "out");
    }
}

TEST(ScaledDotProductAttention, LayoutsNeedNoCopies) {
  Generator init(6);
  Tensor x = randn({2, 7, 3, 4}, &init).requires_grad_();  // (B, T, H, D)
  Tensor qkv = x.transpose(1, 2);                          // (B, H, T, D)
  Tensor out = scaled_dot_product_attention(qkv, qkv, qkv, 0.0, true);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 7, 4}));
  EXPECT_FALSE(out.is_contiguous());
  Tensor ctx = out.transpose(1, 2);
  EXPECT_TRUE(ctx.is_contiguous());
  Tensor same = ctx.contiguous();
  EXPECT_EQ(same.raw_data_ptr(), ctx.raw_data_ptr()) << "contiguous() copied";
  EXPECT_EQ(same.view({2, 7, 12}).raw_data_ptr(), ctx.raw_data_ptr());

  // the gradient reaching the (B, H, T, D) view is laid out (B, T, H, D), like the view
  // (a probe op records the strides of the gradient it receives)
  Tensor xq = randn({2, 7, 3, 4}, &init).requires_grad_();
  Tensor qv = xq.transpose(1, 2);
  Shape seen;
  Tensor probed = record("ProbeBackward", qv.detach(), {qv}, [&seen](const Tensor& dout, Grads& grads) {
    seen = dout.strides();
    grads.add(0, dout);
  });
  scaled_dot_product_attention(probed, qkv.detach(), qkv.detach(), 0.0, true)
      .backward(randn({2, 3, 7, 4}, &init));
  EXPECT_EQ(seen, qv.strides());
  EXPECT_TRUE(xq.grad().is_contiguous());
  // 3-D and 2-D inputs give a contiguous result
  EXPECT_TRUE(
      scaled_dot_product_attention(randn({2, 3, 4}), randn({2, 5, 4}), randn({2, 5, 4})).is_contiguous());
}

// Inputs whose rows overlap in memory: a query, key and value expanded along the sequence
// (row stride 0, one row's memory for all of them), read in place. The same bits, forward and
// backward, as on contiguous copies of them, with whole-vector head dims (32) and ragged ones.
TEST(ScaledDotProductAttention, OverlappingRowsGiveTheBitsOfContiguousCopies) {
  for (int64_t E : {int64_t{8}, int64_t{32}}) {
    Generator init(31);
    Tensor base_q = randn({2, 3, 1, E}, &init).requires_grad_();
    Tensor base_kv = randn({2, 3, 1, E}, &init).requires_grad_();
    const Tensor g = randn({2, 3, 40, E}, &init);
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "E " << E << " causal " << causal);
      auto run = [&](bool copies) {  // out, dq, d(k and v)
        base_q.set_grad(Tensor());
        base_kv.set_grad(Tensor());
        Tensor q = base_q.expand({2, 3, 40, E}), kv = base_kv.expand({2, 3, 33, E});
        EXPECT_EQ(kv.stride(-2), 0);
        if (copies) q = q.contiguous(), kv = kv.contiguous();
        const Tensor out = scaled_dot_product_attention(q, kv, kv, 0.0, causal);
        out.backward(g);
        return std::vector<Tensor>{out.detach(), base_q.grad(), base_kv.grad()};
      };
      const std::vector<Tensor> in_place = run(false), copied = run(true);
      expect_close(in_place[0], copied[0], 0, 0, "out");
      expect_close(in_place[1], copied[1], 0, 0, "dq");
      expect_close(in_place[2], copied[2], 0, 0, "dk + dv");
    }
  }
}

// An expanded key and value are not copied: attention over 200,000 keys expanded from one row
// allocates its output and small per-thread blocks, not the 200,000-row matrices.
TEST(ScaledDotProductAttention, ExpandedKeysAreReadWithoutACopy) {
  const int64_t S = 200000, E = 16;
  const Tensor q = randn({1, 1, 4, E}), kv = randn({1, 1, 1, E}).expand({1, 1, S, E});
  NoGradGuard no_grad;
  reset_peak_memory_stats();
  const int64_t before = memory_stats().current_bytes;
  const Tensor out = scaled_dot_product_attention(q, kv, kv);
  const int64_t extra = memory_stats().peak_bytes - before;
  EXPECT_LT(extra, S * E * 4 / 4) << "a copy of the key alone is " << S * E * 4 << " bytes";
  const Tensor copied = kv.contiguous();
  expect_close(out, scaled_dot_product_attention(q, copied, copied), 0, 0, "out");
}

TEST(ScaledDotProductAttention, EmptySequences) {
  Tensor q = randn({2, 3, 4}).requires_grad_(), k = randn({2, 0, 4}).requires_grad_();
  Tensor v = randn({2, 0, 5}).requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v);  // softmax over no keys: zeros, as torch
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5}));
  expect_close(out, zeros({2, 3, 5}), 0, 0, "out");
  out.sum().backward();
  expect_close(q.grad(), zeros({2, 3, 4}), 0, 0, "dq");
  // the same with dropout (the kernel's 1 / row sum over no keys must give zeros, not 0 * inf)
  Tensor dropped = scaled_dot_product_attention(q, k, v, 0.5);
  expect_close(dropped, zeros({2, 3, 5}), 0, 0, "out with dropout");
  {
    NoGradGuard no_grad;
    expect_close(scaled_dot_product_attention(q, k, v), zeros({2, 3, 5}), 0, 0, "out without grad");
  }
  Tensor none = scaled_dot_product_attention(randn({2, 0, 4}), randn({2, 3, 4}), randn({2, 3, 5}));
  EXPECT_EQ(none.shape(), (Shape{2, 0, 5}));
}

TEST(ScaledDotProductAttention, MatchesTorch) {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/sdpa.txt");
  for (const char* name : {"causal_f32", "causal_f64", "noncausal_f32", "causal_dropout_f32"}) {
    SCOPED_TRACE(name);
    const std::string n = name;
    Tensor q = fx.get(n + ".q").clone().requires_grad_();
    Tensor k = fx.get(n + ".k").clone().requires_grad_();
    Tensor v = fx.get(n + ".v").clone().requires_grad_();
    const double p = fx.get(n + ".p").item();
    const bool causal = fx.get(n + ".is_causal").item() != 0.0;
    Generator gen(static_cast<uint64_t>(fx.get(n + ".seed").item()));  // torch.manual_seed
    Tensor out = scaled_dot_product_attention(q, k, v, p, causal, std::nullopt, &gen);
    (out * fx.get(n + ".loss_weights")).sum().backward();
    const bool f64 = q.dtype() == kFloat64;
    const double rtol = f64 ? 1e-10 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
    expect_close(out, fx.get(n + ".out"), rtol, atol, n + ".out");
    expect_close(q.grad(), fx.get(n + ".q.grad"), rtol, atol, n + ".q.grad");
    expect_close(k.grad(), fx.get(n + ".k.grad"), rtol, atol, n + ".k.grad");
    expect_close(v.grad(), fx.get(n + ".v.grad"), rtol, atol, n + ".v.grad");
  }
}

TEST(ScaledDotProductAttention, MaskAndGqaMatchTorch) {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/sdpa_mask_gqa.txt");
  for (const char* name :
       {"bool_full_f32", "bool_LS_f64", "bool_padding_f32", "float_mask_f32", "float_mask_f64", "gqa_f32",
        "gqa_causal_f64", "gqa_bool_mask_f32", "gqa_float_mask_f64", "gqa_causal_dropout_f32",
        "gqa_mask_dropout_f64", "fully_masked_rows_f32"}) {
    SCOPED_TRACE(name);
    const std::string n = name;
    Tensor q = fx.get(n + ".q").clone().requires_grad_();
    Tensor k = fx.get(n + ".k").clone().requires_grad_();
    Tensor v = fx.get(n + ".v").clone().requires_grad_();
    Tensor mask;
    if (fx.has(n + ".attn_mask")) mask = fx.get(n + ".attn_mask").clone();
    if (fx.has(n + ".attn_mask.grad")) mask.requires_grad_();
    Generator gen(static_cast<uint64_t>(fx.get(n + ".seed").item()));  // torch.manual_seed
    Tensor out = scaled_dot_product_attention(
        q, k, v,
        {.attn_mask = mask,
         .dropout_p = fx.get(n + ".p").item(),
         .is_causal = fx.get(n + ".is_causal").item() != 0.0,
         .scale = fx.has(n + ".scale") ? std::optional<double>(fx.get(n + ".scale").item()) : std::nullopt,
         .enable_gqa = fx.get(n + ".enable_gqa").item() != 0.0,
         .generator = &gen});
    (out * fx.get(n + ".loss_weights")).sum().backward();
    const bool f64 = q.dtype() == kFloat64;
    const double rtol = f64 ? 1e-10 : 1e-5, atol = f64 ? 1e-12 : 1e-6;
    expect_close(out, fx.get(n + ".out"), rtol, atol, n + ".out");
    expect_close(q.grad(), fx.get(n + ".q.grad"), rtol, atol, n + ".q.grad");
    expect_close(k.grad(), fx.get(n + ".k.grad"), rtol, atol, n + ".k.grad");
    expect_close(v.grad(), fx.get(n + ".v.grad"), rtol, atol, n + ".v.grad");
    if (fx.has(n + ".attn_mask.grad"))
      expect_close(mask.grad(), fx.get(n + ".attn_mask.grad"), rtol, atol, n + ".attn_mask.grad");
  }
}

// One configuration for the two backward paths: inputs (float64 leaves) and the call.
struct PathCase {
  const char* name;
  std::vector<Shape> shapes;  // q, k, v (and a float mask, a 4th input)
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

std::vector<PathCase> path_cases() {
  using V = std::vector<Tensor>;
  auto with = [](const V& x, ScaledDotProductAttentionOptions o, int64_t block, uint64_t seed) {
    Generator g(seed);  // the same dropout mask at every call
    o.generator = &g;
    if (x.size() > 3) o.attn_mask = x[3];
    return detail::scaled_dot_product_attention_blocked(x[0], x[1], x[2], o, block);
  };
  auto bool_mask = [](const Shape& shape, int64_t dead_row = -1) {  // key 0 in every row but dead_row
    Generator g(4);
    Tensor m = gt(rand(shape, &g), 0.3).contiguous();
    auto* b = static_cast<uint8_t*>(m.raw_data_ptr());
    const int64_t S = shape.back();
    for (int64_t r = 0; r * S < m.numel(); ++r)
      for (int64_t j = 0; j < S; ++j) b[r * S + j] = r == dead_row ? 0 : j == 0 ? 1 : b[r * S + j];
    return m;
  };
  return {
      {"causal",
       {{2, 2, 5, 3}, {2, 2, 5, 3}, {2, 2, 5, 2}},
       [=](const V& x) { return with(x, {.is_causal = true}, 2, 0); }},
      {"L!=S dropout",
       {{2, 3, 4}, {2, 6, 4}, {2, 6, 3}},
       [=](const V& x) { return with(x, {.dropout_p = 0.4}, 64, 9); }},
      {"causal dropout",
       {{1, 2, 6, 3}, {1, 2, 6, 3}, {1, 2, 6, 3}},
       [=](const V& x) { return with(x, {.dropout_p = 0.3, .is_causal = true}, 4, 3); }},
      {"bool mask",
       {{2, 2, 4, 3}, {2, 2, 5, 3}, {2, 2, 5, 2}},
       [=](const V& x) {
         return with(x, {.attn_mask = bool_mask({2, 1, 4, 5})}, 3, 0);
       }},
      {"bool mask, a dead row",
       {{1, 2, 4, 3}, {1, 2, 5, 3}, {1, 2, 5, 2}},
       [=](const V& x) {
         return with(x, {.attn_mask = bool_mask({1, 2, 4, 5}, 2), .dropout_p = 0.2}, 2, 6);
       }},
      {"float mask",
       {{2, 2, 4, 3}, {2, 2, 5, 3}, {2, 2, 5, 2}, {4, 5}},
       [=](const V& x) { return with(x, {.scale = 0.8}, 64, 0); }},
      {"gqa causal dropout",
       {{1, 4, 5, 3}, {1, 2, 5, 3}, {1, 2, 5, 2}},
       [=](const V& x) { return with(x, {.dropout_p = 0.3, .is_causal = true, .enable_gqa = true}, 2, 5); }},
      {"gqa bool mask",
       {{2, 4, 3, 2}, {2, 1, 4, 2}, {2, 1, 4, 3}},
       [=](const V& x) {
         return with(x, {.attn_mask = bool_mask({3, 4}), .enable_gqa = true}, 64, 0);
       }},
      {"gqa float mask dropout",
       {{1, 4, 3, 2}, {1, 2, 4, 2}, {1, 2, 4, 2}, {1, 4, 3, 4}},
       [=](const V& x) { return with(x, {.dropout_p = 0.25, .enable_gqa = true}, 2, 8); }},
  };
}

std::vector<Tensor> leaves(const std::vector<Shape>& shapes, uint64_t seed) {
  Generator g(seed);
  std::vector<Tensor> x;
  for (const Shape& s : shapes) x.push_back(randn(s, &g, kFloat64).requires_grad_());
  return x;
}

// The fused backward (grad mode off in the closure) and the one from recorded ops (create_graph)
// give the same first-order gradients, and only the second carries a history.
TEST(ScaledDotProductAttention, RecordedBackwardEqualsFused) {
  for (const PathCase& c : path_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> x = leaves(c.shapes, 21);
    Tensor out = c.fn(x);
    Generator g(22);
    Tensor w = randn(out.shape(), &g, kFloat64);
    std::vector<Tensor> fused = autograd::grad({(c.fn(x) * w).sum()}, x);
    std::vector<Tensor> recorded = autograd::grad({(c.fn(x) * w).sum()}, x, {}, {.create_graph = true});
    for (std::size_t i = 0; i < x.size(); ++i) {
      expect_close(recorded[i], fused[i], 1e-10, 1e-12, "input " + std::to_string(i));
      EXPECT_FALSE(fused[i].requires_grad());
      EXPECT_TRUE(recorded[i].requires_grad()) << "input " << i;
    }
  }
}

// Second derivatives through the recorded backward: the gradient of h(x) = sum_i <df/dx_i, r_i>
// (f = sum(sdpa(x) * w)) against central differences of h, every element of every input
// (the dropout mask fixed, as the composed chain's).
TEST(ScaledDotProductAttention, DoubleBackwardMatchesFiniteDifferences) {
  for (const PathCase& c : path_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> x = leaves(c.shapes, 31);
    Generator g(32);
    Tensor w = randn(c.fn(x).shape(), &g, kFloat64);
    std::vector<Tensor> r;
    for (const Shape& s : c.shapes) r.push_back(randn(s, &g, kFloat64));
    auto h = [&](const std::vector<Tensor>& at, bool create_graph) {
      std::vector<Tensor> d = autograd::grad({(c.fn(at) * w).sum()}, at, {}, {.create_graph = create_graph});
      Tensor total = (d[0] * r[0]).sum();
      for (std::size_t i = 1; i < at.size(); ++i) total = total + (d[i] * r[i]).sum();
      return total;
    };
    std::vector<Tensor> dh = autograd::grad({h(x, true)}, x);
    const double eps = 1e-6;
    for (std::size_t i = 0; i < x.size(); ++i) {
      std::vector<double> numeric;
      for (int64_t e = 0; e < x[i].numel(); ++e) {
        double hv[2];
        for (int side = 0; side < 2; ++side) {
          std::vector<Tensor> at;
          for (const Tensor& t : x) at.push_back(t.detach().clone().requires_grad_());
          at[i].data_ptr<double>()[e] += side == 0 ? eps : -eps;
          hv[side] = h(at, false).item();
        }
        numeric.push_back((hv[0] - hv[1]) / (2 * eps));
      }
      expect_close(dh[i], from_vector(numeric, c.shapes[i]), 1e-5, 1e-7, "d2 input " + std::to_string(i));
    }
  }
}

// torch's positional order, the keyword options and the dropout-first spelling are one op.
TEST(ScaledDotProductAttention, PositionalAndKeywordSpellingsAgree) {
  Generator init(12);
  Tensor q = randn({2, 4, 6, 8}, &init), k = randn({2, 2, 7, 8}, &init), v = randn({2, 2, 7, 5}, &init);
  Tensor mask = gt(rand({6, 7}, &init), 0.3);
  Generator g1(1), g2(1);
  Tensor a = scaled_dot_product_attention(q, k, v, mask, 0.2, false, 0.4, true, &g1);
  Tensor b = scaled_dot_product_attention(
      q, k, v, {.attn_mask = mask, .dropout_p = 0.2, .scale = 0.4, .enable_gqa = true, .generator = &g2});
  expect_close(a, b, 0, 0, "mask and GQA");
  Tensor kk = randn({2, 4, 7, 8}, &init), vv = randn({2, 4, 7, 5}, &init);
  Generator g3(2), g4(2), g5(2);
  Tensor c = scaled_dot_product_attention(q, kk, vv, 0.3, true, std::nullopt, &g3);
  Tensor d = scaled_dot_product_attention(q, kk, vv, Tensor(), 0.3, true, std::nullopt, false, &g4);
  Tensor e = scaled_dot_product_attention(q, kk, vv, {.dropout_p = 0.3, .is_causal = true, .generator = &g5});
  expect_close(c, d, 0, 0, "no mask, positional");
  expect_close(c, e, 0, 0, "no mask, keywords");
}

TEST(ScaledDotProductAttention, ClearErrors) {
  auto expect_error = [](auto&& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("scaled_dot_product_attention"), std::string::npos) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  Tensor q = randn({2, 3, 5, 4}), k = randn({2, 3, 6, 4}), v = randn({2, 3, 6, 2});
  expect_error([&] { scaled_dot_product_attention(q, randn({2, 3, 6, 3}), v); }, "[2, 3, 6, 3]");
  expect_error([&] { scaled_dot_product_attention(q, k, randn({2, 3, 7, 2})); }, "[2, 3, 7, 2]");
  expect_error(
      [&] {
        scaled_dot_product_attention(q, randn({2, 4, 6, 4}), randn({2, 4, 6, 2}));
      },
      "batch dims");
  expect_error([&] { scaled_dot_product_attention(q, k.view({6, 6, 4}), v); }, "[6, 6, 4]");
  expect_error([&] { scaled_dot_product_attention(randn({4}), randn({4}), randn({4})); }, "[4]");
  expect_error([&] { scaled_dot_product_attention(q, k.to(kFloat64), v); }, "float64");
  expect_error([&] { scaled_dot_product_attention(q.to(kInt64), k.to(kInt64), v.to(kInt64)); }, "int64");
  expect_error([&] { scaled_dot_product_attention(q, k, v, 1.5); }, "1.5");
  expect_error([&] { scaled_dot_product_attention(q, k, v, -0.1); }, "-0.1");
  expect_error([&] { scaled_dot_product_attention(q, k, Tensor()); }, "undefined");
  // with dropout, the mask is gathered at 32-bit offsets l * S (lanes l < 16): longer key
  // sequences are refused before anything is allocated (the expanded key and value have
  // S rows but one row's memory)
  const int64_t S = int64_t{std::numeric_limits<int32_t>::max()} / 15 + 1;
  Tensor long_kv = zeros({1, 1, 4}).expand({1, S, 4});
  expect_error([&] { scaled_dot_product_attention(zeros({1, 16, 4}), long_kv, long_kv, 0.1); }, "143165577");

  // attn_mask: broadcastable to (..., L, S) = [2, 3, 5, 6], bool or the query's dtype, not with
  // is_causal (torch's rule)
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, ones({5, 5}, kBool));
      },
      "attn_mask [5, 5] is not broadcastable to the attention weights' shape [2, 3, 5, 6]");
  expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, ones({1, 2, 3, 5, 6}, kBool));
      },
      "[1, 2, 3, 5, 6]");
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({5, 6}, kInt64)); }, "int64");
  expect_error([&] { scaled_dot_product_attention(q, k, v, zeros({5, 6}, kFloat64)); }, "float64");
  expect_error([&] { scaled_dot_product_attention(q, k, v, ones({5, 6}, kBool), 0.0, true); }, "is_causal");
  // enable_gqa: query heads a multiple of the key's, key and value with the same heads
  Tensor k2 = randn({2, 2, 6, 4}), v2 = randn({2, 2, 6, 2});
  expect_error([&] { scaled_dot_product_attention(q, k2, v2, {.enable_gqa = true}); }, "query [2, 3, 5, 4]");
  expect_error(
      [&] {
        scaled_dot_product_attention(randn({2, 4, 5, 4}), k2, v, {.enable_gqa = true});
      },
      "same heads");
  expect_error([&] { scaled_dot_product_attention(randn({2, 4, 5, 4}), k2, v2); }, "need enable_gqa");
  expect_error(
      [&] {
        scaled_dot_product_attention(randn({3, 4, 5, 4}), k2, v2, {.enable_gqa = true});
      },
      "batch dims");
}

// A query row that sees no key (every score -inf) gets zero weights, so zero output and zero
// gradients, as torch 2.5's _safe_softmax; the composed chain's softmax would give NaN.
TEST(ScaledDotProductAttention, FullyMaskedRowsGiveZeros) {
  for (DType dt : {kFloat32, kFloat64})
    for (double p : {0.0, 0.5}) {
      Generator init(8);
      Tensor q = randn({2, 6, 4}, &init, dt).requires_grad_(),
             k = randn({2, 7, 4}, &init, dt).requires_grad_();
      Tensor v = randn({2, 7, 3}, &init, dt).requires_grad_();
      Tensor mask = gt(rand({2, 6, 7}, &init), 0.4).contiguous();
      auto* m = static_cast<uint8_t*>(mask.raw_data_ptr());
      for (int64_t j = 0; j < 7; ++j) m[(0 * 6 + 2) * 7 + j] = m[(1 * 6 + 5) * 7 + j] = 0;  // rows 2 and 11
      for (int64_t r = 0; r < 12; ++r) m[r * 7 + 3] = r != 2 && r != 11;
      Generator gen(3);
      Tensor out = detail::scaled_dot_product_attention_blocked(
          q, k, v, {.attn_mask = mask, .dropout_p = p, .generator = &gen}, 4);
      out.backward(ones_like(out));
      const Tensor zero_row = zeros({3}, dt), zero_q = zeros({4}, dt);
      expect_close(out.select(0, 0).select(0, 2), zero_row, 0, 0, "out row 2");
      expect_close(out.select(0, 1).select(0, 5), zero_row, 0, 0, "out row 11");
      expect_close(q.grad().select(0, 0).select(0, 2), zero_q, 0, 0, "dq row 2");
      expect_close(q.grad().select(0, 1).select(0, 5), zero_q, 0, 0, "dq row 11");
      for (const Tensor& g : {out, q.grad(), k.grad(), v.grad()})
        for (double x : g.to(kFloat64).to_vector<double>()) ASSERT_FALSE(std::isnan(x)) << "p " << p;
    }
}

}  // namespace xgrad::testing
