// tests/core/test_llama_ops_bf16.cpp: apply_rotary_emb and silu_mul on bfloat16 tensors (what a
// Llama's queries, keys and feed-forward give them under autocast), computed in float32 and
// rounded once. Against their composed twins, the float32 op on widened copies with the result
// converted back to bfloat16, bit for bit: the output and every gradient (a bfloat16 input's
// reaches it through the cast), at 1, 2 and 3 threads, on strided inputs, for row lengths the
// SIMD batches, half batches and scalars each take; the create_graph path against the kernel's;
// and the dtype errors.
#include <gtest/gtest.h>

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
using V = std::vector<Tensor>;

// the output and the gradients of `fn` at `leaves` (copies made leaves here) for upstream w
V run(const std::function<Tensor(const V&)>& fn, const V& leaves, const Tensor& w) {
  V in;
  for (const Tensor& t : leaves) in.push_back(t.detach().requires_grad_());
  const Tensor out = fn(in);
  V r = autograd::grad({out}, in, {w});
  r.insert(r.begin(), out.detach());
  return r;
}

void expect_same_bits(const V& fused, const V& twin, const std::string& what) {
  ASSERT_EQ(fused.size(), twin.size());
  for (std::size_t i = 0; i < fused.size(); ++i) {
    SCOPED_TRACE(what + ", result " + std::to_string(i));
    ASSERT_EQ(fused[i].dtype(), twin[i].dtype());
    expect_close(fused[i], twin[i], 0, 0);
  }
}

Tensor bf16_randn(const Shape& shape, Generator* g, double scale = 1.0) {
  return (randn(shape, g) * scale).to(kBFloat16);
}

// ---------------------------------------------------------------- apply_rotary_emb
// head dims: 6 (scalars only), 16 (halves of 8: a half batch), 64, 130 (whole batches, then
// a half batch and scalars); x contiguous or a strided view (heads and positions swapped)
TEST(ApplyRotaryEmbBFloat16, HasTheBitsOfTheFloat32OpOnAWidenedCopy) {
  Generator g(61);
  for (int64_t D : {6, 16, 64, 130}) {
    for (bool strided : {false, true}) {
      for (bool bf16_tables : {false, true}) {
        const int64_t t = 37;
        Tensor x = bf16_randn({3, t, 5, D}, &g, 3.0);  // (batch, seq, heads, D)
        x = strided ? x.transpose(1, 2) : x.transpose(1, 2).contiguous();
        Tensor cos = randn({t, D}, &g), sin = randn({t, D}, &g);
        if (bf16_tables) {
          cos = cos.to(kBFloat16);
          sin = sin.to(kBFloat16);
        }
        const Tensor w = bf16_randn(x.shape(), &g);
        const auto fused = [](const V& in) { return apply_rotary_emb(in[0], in[1], in[2]); };
        const auto twin = [](const V& in) {
          return apply_rotary_emb(in[0].to(kFloat32), in[1].to(kFloat32), in[2].to(kFloat32)).to(kBFloat16);
        };
        const std::string what = "D " + std::to_string(D) + (strided ? ", strided" : "") +
                                 (bf16_tables ? ", bfloat16 tables" : ", float32 tables");
        const V want = run(twin, {x, cos, sin}, w);
        ASSERT_EQ(want[0].dtype(), kBFloat16);
        for (int threads : {1, 2, 3}) {
          testing::ThreadCount tc(threads);
          expect_same_bits(run(fused, {x, cos, sin}, w), want,
                           what + ", " + std::to_string(threads) + " threads");
        }
      }
    }
  }
}

// only x wants a gradient (the Llama's case: the tables are constants), the kernel's path
TEST(ApplyRotaryEmbBFloat16, TheKernelsGradientWithConstantTables) {
  Generator g(62);
  const Tensor x = bf16_randn({4, 6, 50, 64}, &g, 2.0).requires_grad_();
  const Tensor cos = randn({50, 64}, &g), sin = randn({50, 64}, &g);
  const Tensor w = bf16_randn(x.shape(), &g);
  apply_rotary_emb(x, cos, sin).backward(w);
  const Tensor x2 = x.detach().requires_grad_();
  apply_rotary_emb(x2.to(kFloat32), cos, sin).to(kBFloat16).backward(w);
  ASSERT_EQ(x.grad().dtype(), kBFloat16);
  expect_close(x.grad(), x2.grad(), 0, 0, "dx");
}

// backward with create_graph runs recorded ops, in float32 on the widened dout: the kernel's
// gradient within one rounding to bfloat16 (the two float32 sums may round differently)
TEST(ApplyRotaryEmbBFloat16, RecordedBackwardGivesTheKernelsGradient) {
  Generator g(63);
  const Tensor x = bf16_randn({2, 3, 9, 32}, &g, 2.0).requires_grad_();
  const Tensor cos = randn({9, 32}, &g), sin = randn({9, 32}, &g);
  const Tensor w = bf16_randn(x.shape(), &g);
  const Tensor out = apply_rotary_emb(x, cos, sin);
  const Tensor kernel = autograd::grad({out}, {x}, {w}, {.retain_graph = true})[0];
  const Tensor recorded = autograd::grad({out}, {x}, {w}, {.retain_graph = true, .create_graph = true})[0];
  ASSERT_EQ(recorded.dtype(), kBFloat16);
  expect_close(recorded, kernel, 1.0 / 128, 1e-30, "dx");
}

TEST(ApplyRotaryEmbBFloat16, Errors) {
  const Tensor x = zeros({2, 5, 8}, kBFloat16);
  expect_error(
      [&] {
        apply_rotary_emb(x, zeros({5, 8}, kFloat64), zeros({5, 8}, kFloat64));
      },
      {"apply_rotary_emb", "bfloat16", "[2, 5, 8]", "float64"});
  expect_error([&] { apply_rotary_emb(x, zeros({5, 8}), zeros({5, 6})); }, {"apply_rotary_emb", "[5, 6]"});
  // a float32 x still takes only float32 tables
  expect_error(
      [&] {
        apply_rotary_emb(zeros({2, 5, 8}), zeros({5, 8}, kBFloat16), zeros({5, 8}, kBFloat16));
      },
      {"apply_rotary_emb", "bfloat16", "float32"});
}

// ---------------------------------------------------------------- silu_mul
// lengths around the 512-element blocks and split over threads; both gradients or one
TEST(SiluMulBFloat16, HasTheBitsOfTheFloat32OpOnWidenedCopies) {
  Generator g(64);
  for (int64_t n : {1, 511, 512, 513, 20000}) {
    const Tensor a = bf16_randn({n}, &g, 4.0), b = bf16_randn({n}, &g, 2.0);
    const Tensor w = bf16_randn({n}, &g);
    const auto fused = [](const V& in) { return silu_mul(in[0], in[1]); };
    const auto twin = [](const V& in) {
      return silu_mul(in[0].to(kFloat32), in[1].to(kFloat32)).to(kBFloat16);
    };
    const V want = run(twin, {a, b}, w);
    for (int threads : {1, 2, 3}) {
      testing::ThreadCount tc(threads);
      const std::string what = std::to_string(n) + " elements, " + std::to_string(threads) + " threads";
      expect_same_bits(run(fused, {a, b}, w), want, what);
      // one gradient wanted: a's alone, then b's alone
      const Tensor a1 = a.detach().requires_grad_(), a2 = a.detach().requires_grad_();
      silu_mul(a1, b).backward(w);
      silu_mul(a2.to(kFloat32), b.to(kFloat32)).to(kBFloat16).backward(w);
      expect_close(a1.grad(), a2.grad(), 0, 0, what + ", da alone");
      const Tensor b1 = b.detach().requires_grad_(), b2 = b.detach().requires_grad_();
      silu_mul(a, b1).backward(w);
      silu_mul(a.to(kFloat32), b2.to(kFloat32)).to(kBFloat16).backward(w);
      expect_close(b1.grad(), b2.grad(), 0, 0, what + ", db alone");
    }
  }
}

TEST(SiluMulBFloat16, RecordedBackwardGivesTheKernelsGradient) {
  Generator g(65);
  const Tensor a = bf16_randn({7, 300}, &g, 4.0).requires_grad_(),
               b = bf16_randn({7, 300}, &g).requires_grad_();
  const Tensor w = bf16_randn({7, 300}, &g);
  const Tensor out = silu_mul(a, b);
  const V kernel = autograd::grad({out}, {a, b}, {w}, {.retain_graph = true});
  const V recorded = autograd::grad({out}, {a, b}, {w}, {.retain_graph = true, .create_graph = true});
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(recorded[i].dtype(), kBFloat16);
    expect_close(recorded[i], kernel[i], 1.0 / 128, 1e-30, i == 0 ? "da" : "db");
  }
}

TEST(SiluMulBFloat16, Errors) {
  expect_error(
      [&] {
        silu_mul(zeros({2, 3}, kBFloat16), zeros({2, 3}));
      },
      {"silu_mul", "bfloat16", "float32"});
  expect_error(
      [&] {
        silu_mul(zeros({2, 3}, kBFloat16), zeros({3}, kBFloat16));
      },
      {"silu_mul", "[2, 3]", "[3]"});
}

}  // namespace
}  // namespace xgrad
