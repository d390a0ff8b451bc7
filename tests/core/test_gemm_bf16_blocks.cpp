// tests/core/test_gemm_bf16_blocks.cpp: the bfloat16 GEMM's blocking (xgrad/bf16_gemm.h;
// core/src/kernels/gemm_bf16_kernel.h: blocking, gemm_widened), which bounds its working memory
// and must not change a bit:
//   - the Widened path with small blocks (set_bf16_gemm_block_elements: k in chunks of whole
//     float32 k panels, rows and columns of C in blocks, down to one element) against the same
//     product in one block, which widens A and B whole: the bits of one float32 GEMM on the
//     widened operands; on shapes with k across several panels (256) and ragged blocks, operands
//     stored transposed or not, alpha / beta / bias;
//   - the bfloat16-C form on every path against the float32-C form rounded to bfloat16 (beta
//     reading C widened), with small blocks and the default ones; C's padding untouched;
//   - the same bits at 1, 2 and 3 threads with small blocks;
//   - matmul and linear on bfloat16 tensors (forward and gradients) against the float32 ops on
//     widened copies, rounded once, bit for bit, where the ops' path is Widened.
//
// Adding a case: a row in kShapes (m, n, k, A stored transposed, B stored transposed).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_shape.h"
#include "thread_count.h"
#include "xgrad/bf16_gemm.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

const Shape3 kShapes[] = {
    {37, 45, 1100, false, false}, {37, 45, 1100, true, true}, {50, 70, 600, false, true},
    {50, 70, 600, true, false},   {3, 200, 777, false, true}, {130, 17, 513, true, false},
    {1, 1, 1000, false, false},   {29, 300, 256, true, true}, {16, 15, 300, false, false},
    {15, 33, 257, true, false},   {200, 40, 90, false, true}, {45, 60, 2049, false, false},
};

// The block bounds tried: one k panel of one element of C (every product one call per element
// and panel), then blocks that split some dims and not others.
const int64_t kBudgets[] = {256, 700, 5000, 40000};

// Sets the GEMM's block bound for a scope, then restores the default.
struct BlockElements {
  explicit BlockElements(int64_t n) { set_bf16_gemm_block_elements(n); }
  ~BlockElements() { set_bf16_gemm_block_elements(0); }
  BlockElements(const BlockElements&) = delete;
  BlockElements& operator=(const BlockElements&) = delete;
};

uint16_t round_bf16(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float bf16_float(uint16_t x) { return std::bit_cast<float>(uint32_t(x) << 16); }

// normal values rounded to bfloat16, every fifth a small integer
std::vector<uint16_t> random_bf16(int64_t count, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i] = round_bf16(i % 5 == 0 ? float(int(g() % 9) - 4) : nd(g));
  return out;
}

struct Case {
  Shape3 s;
  float alpha, beta;
  bool bias;
  std::vector<uint16_t> a, b, c0;  // C's initial values are bfloat16 (the bfloat16-C form reads them)
  std::vector<float> vbias;
  int64_t lda, ldb, ldc;

  Case(const Shape3& shape, float al, float be, bool with_bias, uint32_t seed)
      : s(shape), alpha(al), beta(be), bias(with_bias) {
    std::mt19937 g(seed);
    lda = (s.ta ? s.m : s.k) + 3;  // padded rows: a wrong ld shows
    ldb = (s.tb ? s.k : s.n) + 5;
    ldc = s.n + 2;
    a = random_bf16((s.ta ? s.k : s.m) * lda, g);
    b = random_bf16((s.tb ? s.n : s.k) * ldb, g);
    c0 = random_bf16(s.m * ldc, g);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    if (bias)
      for (int64_t j = 0; j < s.n; ++j) vbias.push_back(nd(g));
  }

  std::vector<float> run(Bf16GemmPath path) const {
    std::vector<float> c(c0.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = bf16_float(c0[i]);
    gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
              bias ? vbias.data() : nullptr, path);
    return c;
  }
  std::vector<uint16_t> run_bf16(Bf16GemmPath path) const {
    std::vector<uint16_t> c = c0;
    gemm_bf16(s.ta, s.tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc,
              bias ? vbias.data() : nullptr, path);
    return c;
  }
};

struct Epilogue {
  float alpha, beta;
  bool bias;
};
const Epilogue kEpilogues[] = {
    {1.0f, 0.0f, false}, {0.75f, 1.5f, false}, {1.0f, 1.0f, false}, {1.0f, 0.0f, true}, {-2.0f, 0.0f, true}};

template <class T>
std::string first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    uint32_t x, y;
    if constexpr (sizeof(T) == 4) x = std::bit_cast<uint32_t>(a[i]), y = std::bit_cast<uint32_t>(b[i]);
    else x = a[i], y = b[i];
    if (x != y) return "at " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y);
  }
  return "";
}

std::vector<uint16_t> rounded(const std::vector<float>& c) {
  std::vector<uint16_t> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = round_bf16(c[i]);
  return out;
}

class GemmBf16Blocks : public ::testing::TestWithParam<Shape3> {};

TEST_P(GemmBf16Blocks, WidenedBlocksHaveTheBitsOfWholeOperands) {
  uint32_t seed = 3;
  for (const Epilogue& e : kEpilogues) {
    const Case c(GetParam(), e.alpha, e.beta, e.bias, seed++);
    const std::vector<float> whole = c.run(Bf16GemmPath::Widened);  // one block: A and B widened whole
    const std::vector<uint16_t> whole_bf16 = c.run_bf16(Bf16GemmPath::Widened);
    for (int64_t budget : kBudgets) {
      BlockElements be(budget);
      EXPECT_EQ(first_difference(c.run(Bf16GemmPath::Widened), whole), "")
          << GetParam() << " blocks of " << budget << " alpha " << e.alpha << " beta " << e.beta << " bias "
          << e.bias;
      EXPECT_EQ(first_difference(c.run_bf16(Bf16GemmPath::Widened), whole_bf16), "")
          << GetParam() << " bfloat16 C, blocks of " << budget << " alpha " << e.alpha << " beta " << e.beta
          << " bias " << e.bias;
    }
  }
}

TEST_P(GemmBf16Blocks, Bf16CIsTheFloat32CRoundedOnEveryPath) {
  std::vector<Bf16GemmPath> paths = {Bf16GemmPath::Build, Bf16GemmPath::Widened, Bf16GemmPath::Dpbf16Portable,
                                     Bf16GemmPath::AmxPortable};
  if (bf16_gemm_has_path(Bf16GemmPath::Dpbf16)) paths.push_back(Bf16GemmPath::Dpbf16);
  if (bf16_gemm_has_path(Bf16GemmPath::Amx)) paths.push_back(Bf16GemmPath::Amx);
  uint32_t seed = 17;
  for (const Epilogue& e : kEpilogues) {
    const Case c(GetParam(), e.alpha, e.beta, e.bias, seed++);
    for (Bf16GemmPath path : paths) {
      const std::vector<uint16_t> want = rounded(c.run(path));
      for (int64_t budget : {int64_t(0), int64_t(700)}) {
        BlockElements be(budget);
        std::vector<uint16_t> got = c.run_bf16(path);
        // C's padding keeps its values (want rounds them back from their exact widening)
        EXPECT_EQ(first_difference(got, want), "")
            << GetParam() << " path " << int(path) << " blocks of " << budget << " alpha " << e.alpha
            << " beta " << e.beta << " bias " << e.bias;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16Blocks, ::testing::ValuesIn(kShapes),
                         [](const ::testing::TestParamInfo<Shape3>& info) {
                           std::ostringstream os;
                           os << info.param;
                           return os.str();
                         });

// Products large enough to split over threads (2 m n k >= 4e6 flops), in blocks.
TEST(GemmBf16BlocksThreads, BlockedProductsHaveTheSameBitsAtAnyThreadCount) {
  for (const Shape3& s : {Shape3{300, 400, 700, false, true}, Shape3{130, 800, 1100, true, false}}) {
    const Case c(s, 1.0f, 0.0f, true, 5);
    BlockElements be(60000);
    for (Bf16GemmPath path : {Bf16GemmPath::Build, Bf16GemmPath::Widened}) {
      std::vector<std::vector<float>> outs;
      std::vector<std::vector<uint16_t>> outs_bf16;
      for (int threads : {1, 2, 3}) {
        testing::ThreadCount tc(threads);
        outs.push_back(c.run(path));
        outs_bf16.push_back(c.run_bf16(path));
      }
      for (int t : {1, 2}) {
        EXPECT_EQ(first_difference(outs[0], outs[t]), "") << s << " at " << t + 1 << " threads";
        EXPECT_EQ(first_difference(outs_bf16[0], outs_bf16[t]), "") << s << " bfloat16 C at " << t + 1;
      }
    }
  }
}

// An empty k: C = beta * C or the bias, rounded; empty m or n: nothing written.
TEST(GemmBf16BlocksEdges, EmptySizes) {
  std::vector<uint16_t> a(4), b(4), c = {round_bf16(1.5f), round_bf16(-3.0f)};
  gemm_bf16(false, false, 1, 2, 0, 1.0f, a.data(), 1, b.data(), 2, 2.0f, c.data(), 2);
  EXPECT_EQ(bf16_float(c[0]), 3.0f);
  EXPECT_EQ(bf16_float(c[1]), -6.0f);
  const float bias[2] = {0.25f, 1.0f + 0x1p-9f};  // the second rounds to 1 (a tie, to even)
  gemm_bf16(false, false, 1, 2, 0, 1.0f, a.data(), 1, b.data(), 2, 2.0f, c.data(), 2, bias);
  EXPECT_EQ(bf16_float(c[0]), 0.25f);
  EXPECT_EQ(bf16_float(c[1]), 1.0f);
  gemm_bf16(false, false, 0, 2, 2, 1.0f, a.data(), 2, b.data(), 2, 0.0f, c.data(), 2);
  EXPECT_EQ(bf16_float(c[0]), 0.25f);
  EXPECT_THROW(gemm_bf16(false, false, 2, 2, 2, 1.0f, a.data(), 1, b.data(), 2, 0.0f, c.data(), 2), Error);
}

// matmul and linear on bfloat16 tensors are the float32 ops on the widened values, rounded once,
// where the ops' GEMM is the widened path: forward and gradients, in small blocks and default ones.
TEST(GemmBf16BlocksOps, MatmulAndLinearAreTheFloat32OpsRoundedOnce) {
  if (bf16_gemm_backend().rfind("widened", 0) != 0)
    GTEST_SKIP() << "the ops' bfloat16 GEMM here is " << bf16_gemm_backend();
  Generator g(7);
  const Tensor x = randn({3, 50, 300}, &g).to(kBFloat16), w = randn({70, 300}, &g).to(kBFloat16),
               bias = randn({70}, &g).to(kBFloat16), dout = randn({3, 50, 70}, &g).to(kBFloat16),
               m2 = randn({300, 600}, &g).to(kBFloat16);
  auto bits = [](const Tensor& t) {
    const Tensor f = t.to(kFloat32).contiguous();
    return std::vector<float>(f.to_vector<float>());
  };
  auto leaf = [](const Tensor& t, DType dt) {
    Tensor l = t.to(dt).detach();
    l.requires_grad_();
    return l;
  };
  // the float32 references
  const Tensor x32 = leaf(x, kFloat32), w32 = leaf(w, kFloat32), b32 = leaf(bias, kFloat32);
  const Tensor y32 = linear(x32, w32, b32);
  y32.backward(dout.to(kFloat32));
  const Tensor mm32 = matmul(x.to(kFloat32), m2.to(kFloat32)).to(kBFloat16);                 // (3, 50, 600)
  const Tensor mt32 = matmul(x.to(kFloat32).transpose(1, 2), x.to(kFloat32)).to(kBFloat16);  // per matrix
  for (int64_t budget : {int64_t(0), int64_t(256), int64_t(3000)}) {
    BlockElements be(budget);
    const Tensor xb = leaf(x, kBFloat16), wb = leaf(w, kBFloat16), bb = leaf(bias, kBFloat16);
    const Tensor y = linear(xb, wb, bb);
    y.backward(dout);
    const std::string at = " (blocks of " + std::to_string(budget) + ")";
    EXPECT_EQ(first_difference(bits(y), bits(y32.to(kBFloat16))), "") << "linear" << at;
    EXPECT_EQ(first_difference(bits(xb.grad()), bits(x32.grad().to(kBFloat16))), "") << "dx" << at;
    EXPECT_EQ(first_difference(bits(wb.grad()), bits(w32.grad().to(kBFloat16))), "") << "dW" << at;
    EXPECT_EQ(first_difference(bits(bb.grad()), bits(b32.grad().to(kBFloat16))), "") << "db" << at;
    EXPECT_EQ(first_difference(bits(matmul(x, m2)), bits(mm32)), "") << "matmul" << at;
    EXPECT_EQ(first_difference(bits(matmul(x.transpose(1, 2), x)), bits(mt32)), "") << "batched A^T A" << at;
  }
}

}  // namespace
}  // namespace xgrad
