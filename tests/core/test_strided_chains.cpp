// tests/core/test_strided_chains.cpp: PyTorch chains that end in a transpose, a cat or a sum
// over a batch dim (tests/fixtures/activation_nn.txt, strided_* cases of gen_activation_nn.py),
// so that the upstream gradient reaching softmax, log_softmax, layer_norm, gelu and the fused
// attention arrives strided, offset or expanded, as it does inside a model. The
// gradcheck table checks every op with such gradients against finite differences; these
// check the same paths against torch's numbers. Adding a case: a line in
// strided_chain_cases() of the generator and a check_fixture_case() here.
#include <gtest/gtest.h>

#include <functional>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing::act_nn {

// defined in test_activation.cpp
void check_fixture_case(const Fixture& fx, const std::string& name, int n_inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& fn, double rtol = 1e-5,
                        double atol = 1e-6);
const Fixture& activation_nn_fixture();

namespace {

using V = std::vector<Tensor>;

TEST(StridedChains, SoftmaxAndLogSoftmaxMatchTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "strided_softmax_t", 1,
                     [](const V& x) { return softmax(x[0], -1).transpose(0, 2); });
  check_fixture_case(fx, "strided_log_softmax_cat", 2, [](const V& x) {
    return cat({log_softmax(x[0], -1), x[1]}, -1);
  });
  check_fixture_case(fx, "strided_softmax_sum0", 1,
                     [](const V& x) { return softmax(x[0], -1).sum({0}) * 1.5; });
}

TEST(StridedChains, LayerNormAndGeluMatchTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(fx, "strided_layer_norm_sum0", 3,
                     [](const V& x) { return layer_norm(x[0], {6}, x[1], x[2]).sum({0}); });
  check_fixture_case(fx, "strided_layer_norm_t", 3,
                     [](const V& x) { return layer_norm(x[0], {6}, x[1], x[2]).transpose(1, 2); });
  check_fixture_case(fx, "strided_gelu_t", 1, [](const V& x) { return gelu(x[0], "tanh").t(); });
}

TEST(StridedChains, AttentionMatchesTorch) {
  const Fixture& fx = activation_nn_fixture();
  check_fixture_case(
      fx, "strided_sdpa_heads_t", 3,
      [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], 0.0, true).transpose(1, 2); },
      1e-10, 1e-12);
  check_fixture_case(
      fx, "strided_sdpa_sum_rows", 3,
      [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]).sum({-2}); }, 1e-10, 1e-12);
}

// An identity op that records the layout of the gradient it is handed and passes that very
// tensor on: what it sees is what the op below it sees.
Tensor layout_probe(const Tensor& x, std::shared_ptr<Tensor> seen) {
  Tensor out = x.detach();
  return record("ProbeBackward", out, {x}, [seen](const Tensor& dout, Grads& grads) {
    *seen = dout;
    grads.add(0, dout);
  });
}

TEST(StridedChains, TheGradientReallyArrivesStrided) {
  Tensor x = randn({2, 3, 4}).requires_grad_();
  auto seen = std::make_shared<Tensor>();
  layout_probe(softmax(x, -1), seen).transpose(0, 2).backward(randn({4, 3, 2}));
  EXPECT_FALSE(seen->is_contiguous()) << "transpose";
  layout_probe(softmax(x, -1), seen).sum({0}).backward(randn({3, 4}));
  EXPECT_EQ(seen->stride(0), 0) << "sum(0) hands down an expanded gradient";
  Tensor y = randn({2, 3, 2});
  cat({layout_probe(softmax(x, -1), seen), y}, -1).backward(randn({2, 3, 6}));
  EXPECT_FALSE(seen->is_contiguous()) << "cat hands each part a narrowed view";
}

}  // namespace
}  // namespace xgrad::testing::act_nn
