// tests/core/test_parallel_kernels.cpp: every kernel xgrad splits over its threads gives the
// same bits at 2 and 3 threads as at 1 (forward and backward), on tensors large enough to be
// split (>= 2 * kernels::kGrain elements, GEMMs above blas::kParallelFlops). Threads only
// ever split independent rows / elements / output columns / whole matrices, never one
// output's summation, so bitwise equality is the contract, GEMMs included (each C element
// is the same chain of operations in every tile of xgrad's GEMM kernel, whatever the split).
//
// Adding a parallelised kernel: add a row to kCases (inputs from the seeded generator, the
// op forward, backward with a random upstream gradient, return outputs and grads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "thread_count.h"
#include "xgrad/parallel.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::ThreadCount;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data_ptr(), cb.raw_data_ptr(),
                     static_cast<std::size_t>(ca.numel()) * itemsize(ca.dtype())) == 0;
}

Tensor leaf(const Shape& s, Generator& g, DType dt = kFloat32) { return randn(s, &g, dt).requires_grad_(); }

// out's value and the grads of `inputs` after out.backward(random upstream gradient).
std::vector<Tensor> with_grads(const Tensor& out, const std::vector<Tensor>& inputs, Generator& g) {
  out.backward(randn(out.shape(), &g, out.dtype()));
  std::vector<Tensor> r{out.detach()};
  for (const Tensor& t : inputs) r.push_back(t.grad());
  return r;
}

struct KernelCase {
  std::string name;
  std::function<std::vector<Tensor>(Generator&)> run;
};

const std::vector<KernelCase> kCases = {
    {"add_broadcast",
     [](Generator& g) {
       Tensor a = leaf({64, 40, 97}, g), b = leaf({40, 1}, g);
       return with_grads(a + b, {a, b}, g);
     }},
    {"mul_div_sub",
     [](Generator& g) {
       Tensor a = leaf({300, 701}, g), b = leaf({701}, g);
       return with_grads((a * b - a) / (b * b + 1.0), {a, b}, g);
     }},
    {"exp_tanh_sqrt_f64",
     [](Generator& g) {
       Tensor a = leaf({257, 513}, g, kFloat64);
       return with_grads(tanh(exp(a * 0.1)) + sqrt(abs(a) + 1.0), {a}, g);
     }},
    {"transpose_contiguous",
     [](Generator& g) {
       Tensor a = leaf({8, 4, 128, 33}, g);
       return with_grads(a.transpose(1, 2).contiguous() * 2.0, {a}, g);
     }},
    {"gelu_tanh_and_erf",
     [](Generator& g) {
       Tensor a = leaf({2048, 129}, g);
       return with_grads(gelu(a, "tanh") + gelu(a), {a}, g);
     }},
    {"relu_sigmoid",
     [](Generator& g) {
       Tensor a = leaf({1000, 131}, g);
       return with_grads(relu(a) * sigmoid(a), {a}, g);
     }},
    {"softmax_last_dim",
     [](Generator& g) {
       Tensor a = leaf({32, 4, 64, 65}, g);
       return with_grads(softmax(a, -1), {a}, g);
     }},
    {"log_softmax_middle_dim",
     [](Generator& g) {
       Tensor a = leaf({64, 50, 41}, g);
       return with_grads(log_softmax(a, 1), {a}, g);
     }},
    {"masked_fill_causal",
     [](Generator& g) {
       Tensor a = leaf({32, 4, 64, 64}, g);
       Tensor mask = triu(ones({64, 64}), 1) > 0.5;
       return with_grads(softmax(masked_fill(a * 1.0, mask, -INFINITY), -1), {a}, g);
     }},
    {"sum_rows_and_leading_dims",
     [](Generator& g) {
       Tensor a = leaf({2048, 193}, g);
       Tensor s1 = sum(a, {-1}), s0 = sum(a, {0}), m = mean(a.view({16, 128, 193}), {0, 1});
       return with_grads(s1.sum() + s0.sum() * 2.0 + (m * m).sum(), {a}, g);
     }},
    {"amax_var",
     [](Generator& g) {
       Tensor a = leaf({700, 300}, g);
       return with_grads(amax(a, {1}) + var(a, {1}), {a}, g);
     }},
    {"layer_norm",
     [](Generator& g) {
       Tensor x = leaf({32, 64, 96}, g), w = leaf({96}, g), b = leaf({96}, g);
       return with_grads(layer_norm(x, {96}, w, b, 1e-5), {x, w, b}, g);
     }},
    {"cross_entropy",
     [](Generator& g) {
       Tensor x = leaf({2048, 97}, g);
       Tensor t = randint(0, 97, {2048}, &g);
       Tensor loss = cross_entropy(x, t);
       loss.backward();
       return std::vector<Tensor>{loss.detach(), x.grad()};
     }},
    {"embedding",
     [](Generator& g) {
       Tensor w = leaf({96, 384}, g);
       Tensor ids = randint(0, 96, {8, 256}, &g);
       return with_grads(embedding(w, ids), {w}, g);
     }},
    {"linear_tiny_gpt",
     [](Generator& g) {  // (2048, 64) @ (64, 192) and its backward GEMMs
       Tensor x = leaf({32, 64, 64}, g), w = leaf({192, 64}, g), b = leaf({192}, g);
       return with_grads(linear(x, w, b), {x, w, b}, g);
     }},
    {"linear_medium_gpt",
     [](Generator& g) {  // (2048, 384) @ (384, 1152), weight grad K = 2048
       Tensor x = leaf({8, 256, 384}, g), w = leaf({1152, 384}, g);
       return with_grads(linear(x, w, Tensor()), {x, w}, g);
     }},
    {"linear_small_gpt_bias",
     [](Generator& g) {  // (2048, 128) @ (128, 512): the bias gradient from the weight gradient's GEMM
       Tensor x = leaf({16, 128, 128}, g), w = leaf({512, 128}, g), b = leaf({512}, g);
       return with_grads(linear(x, w, b), {x, w, b}, g);
     }},
    {"matmul_wide_few_rows",
     [](Generator& g) {  // splits columns
       Tensor a = leaf({20, 700}, g), b = leaf({700, 900}, g);
       return with_grads(matmul(a, b), {a, b}, g);
     }},
    {"matmul_f64",
     [](Generator& g) {
       Tensor a = leaf({300, 200}, g, kFloat64), b = leaf({200, 170}, g, kFloat64);
       return with_grads(matmul(a, b.t().contiguous().t()), {a, b}, g);
     }},
    {"bmm_attention_heads",
     [](Generator& g) {  // (B, H, T, D) @ (B, H, D, T), per head
       Tensor q = leaf({32, 4, 64, 16}, g), k = leaf({32, 4, 64, 16}, g);
       Tensor v = leaf({32, 4, 64, 16}, g);
       Tensor s = matmul(q, k.transpose(2, 3));
       return with_grads(matmul(softmax(s, -1), v), {q, k, v}, g);
     }},
    {"sdpa_causal_dropout_mha_views",
     [](Generator& g) {  // (B, T, H, D) leaves seen as (B, H, T, D); the mask drawn as threads go
       Tensor q = leaf({4, 70, 3, 16}, g), k = leaf({4, 70, 3, 16}, g), v = leaf({4, 70, 3, 16}, g);
       Tensor out = scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.1,
                                                 true, std::nullopt, &g);
       return with_grads(out, {q, k, v}, g);
     }},
    {"sdpa_f64_noncausal",
     [](Generator& g) {
       Tensor q = leaf({6, 33, 8}, g, kFloat64), k = leaf({6, 40, 8}, g, kFloat64);
       Tensor v = leaf({6, 40, 5}, g, kFloat64);
       return with_grads(scaled_dot_product_attention(q, k, v, 0.3, false, std::nullopt, &g), {q, k, v}, g);
     }},
    {"sdpa_gqa_mask_dropout",
     [](Generator& g) {  // groups of 3 query heads: a group's dk, dv summed on one thread
       Tensor q = leaf({2, 6, 40, 16}, g), k = leaf({2, 2, 45, 16}, g), v = leaf({2, 2, 45, 16}, g);
       Tensor mask = gt(rand({2, 1, 40, 45}, &g), 0.2);
       return with_grads(scaled_dot_product_attention(q, k, v, mask, 0.1, false, std::nullopt, true, &g),
                         {q, k, v}, g);
     }},
    {"grad_accumulation_add_",
     [](Generator& g) {
       Tensor a = leaf({512, 300}, g);
       Tensor y = a * 2.0 + a * a;  // a's gradient is accumulated (add_) from two paths
       return with_grads(y, {a}, g);
     }},
};

void PrintTo(const KernelCase& c, std::ostream* os) { *os << c.name; }

class ParallelKernel : public ::testing::TestWithParam<KernelCase> {};

TEST_P(ParallelKernel, SameBitsAtAnyThreadCount) {
  const KernelCase& c = GetParam();
  auto run_at = [&](int threads) {
    ThreadCount tc(threads);
    Generator gen(1234);
    return c.run(gen);
  };
  const std::vector<Tensor> serial = run_at(1);
  for (int threads : {2, 3}) {
    const std::vector<Tensor> par = run_at(threads);
    ASSERT_EQ(par.size(), serial.size());
    for (std::size_t i = 0; i < par.size(); ++i) {
      ASSERT_TRUE(serial[i].defined()) << "result " << i;
      EXPECT_TRUE(same_bits(serial[i], par[i]))
          << c.name << ": result " << i << " (" << serial[i].numel() << " elements) differs at " << threads
          << " threads; max |diff| " << max(abs(serial[i].to(kFloat64) - par[i].to(kFloat64))).item();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, ParallelKernel, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<KernelCase>& i) { return i.param.name; });

// The serial fallback really is taken for small tensors: results equal with any count, and a
// tiny op inside a parallel region (nested) works.
TEST(ParallelKernels, SmallOpsInsideAParallelRegion) {
  ThreadCount tc(2);
  std::vector<Tensor> outs(4);
  parallel_for(0, 4, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      NoGradGuard ng;
      Generator g(static_cast<uint64_t>(i));
      Tensor a = randn({300, 300}, &g);
      outs[i] = softmax(matmul(a, a) + 1.0, -1).sum({0});
    }
  });
  for (int64_t i = 0; i < 4; ++i) {
    NoGradGuard ng;
    Generator g(static_cast<uint64_t>(i));
    Tensor a = randn({300, 300}, &g);
    EXPECT_TRUE(same_bits(outs[i], softmax(matmul(a, a) + 1.0, -1).sum({0}))) << i;
  }
}

}  // namespace
}  // namespace xgrad
