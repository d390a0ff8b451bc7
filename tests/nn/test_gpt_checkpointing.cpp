// tests/nn/test_gpt_checkpointing.cpp: activation checkpointing of the GPT's blocks
// (utils::checkpoint, GPTConfig::activation_checkpointing) against the same model without it:
// a TransformerBlock with dropout through utils::checkpoint, and whole GPTs, give the same
// loss and gradient bits in float32 and float64 (dropout draws the same masks in the rerun);
// checkpointing holds fewer bytes between forward and backward; eval() runs the blocks plainly.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

// The bits of every element (so -0.0 and 0.0 differ).
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to(kFloat64).to_vector<double>()) out.push_back(std::bit_cast<uint64_t>(v));
  return out;
}

const GPTConfig kCfg{.vocab_size = 40,
                     .context_length = 12,
                     .emb_dim = 24,
                     .n_heads = 3,
                     .n_layers = 3,
                     .drop_rate = 0.2,
                     .qkv_bias = true};

class Dtypes : public ::testing::TestWithParam<DType> {};

TEST_P(Dtypes, ATransformerBlockWithDropoutGivesTheSameGradientBits) {
  manual_seed(21);
  TransformerBlock block(kCfg);
  block.to(GetParam());
  Tensor x = randn({2, 10, 24}, nullptr, GetParam()).requires_grad_();
  Tensor r = randn({2, 10, 24}, nullptr, GetParam());
  auto run = [&](bool checkpointed) {
    manual_seed(5);
    Tensor y =
        checkpointed ? xgrad::utils::checkpoint([&](const Tensor& t) { return block(t); }, x) : block(x);
    (y * r).sum().backward();
    std::vector<std::vector<uint64_t>> g{bits(y), bits(x.grad())};
    for (const auto& [name, p] : block.named_parameters()) g.push_back(bits(p.grad()));
    block.zero_grad(true);
    x.impl()->grad.reset();
    return g;
  };
  const auto want = run(false);
  EXPECT_EQ(run(true), want);
  // the masks matter: with another seed the gradients differ
  manual_seed(6);
  (block(x) * r).sum().backward();
  EXPECT_NE(bits(x.grad()), want[1]);
}

// The loss and every parameter's gradient bits of a GPT built from `cfg` with seed 3, one
// training step's forward and backward with dropout masks from seed 9.
std::vector<std::vector<uint64_t>> gpt_step(GPTConfig cfg, DType dtype, int64_t* bytes_held = nullptr) {
  manual_seed(3);
  GPTModel model(cfg);
  model.to(dtype);
  Tensor ids = randint(0, cfg.vocab_size, {4, cfg.context_length});
  Tensor targets = randint(0, cfg.vocab_size, {4, cfg.context_length});
  manual_seed(9);
  const int64_t before = memory_stats().current_bytes;
  Tensor loss = cross_entropy_last_dim(model(ids), targets);
  if (bytes_held) *bytes_held = memory_stats().current_bytes - before;
  loss.backward();
  std::vector<std::vector<uint64_t>> out{bits(loss)};
  for (const auto& [name, p] : model.named_parameters()) out.push_back(bits(p.grad()));
  return out;
}

TEST_P(Dtypes, GPTGivesTheSameLossAndGradientBitsWithActivationCheckpointing) {
  GPTConfig cfg = kCfg;
  const auto want = gpt_step(cfg, GetParam());
  cfg.activation_checkpointing = true;
  EXPECT_EQ(gpt_step(cfg, GetParam()), want);
  cfg.tie_weights = true;  // the tied weight is used outside the blocks, twice
  const auto tied = gpt_step(cfg, GetParam());
  cfg.activation_checkpointing = false;
  EXPECT_EQ(gpt_step(cfg, GetParam()), tied);
}

INSTANTIATE_TEST_SUITE_P(Checkpointing, Dtypes, ::testing::Values(kFloat32, kFloat64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GPTCheckpointing, HoldsFewerBytesBetweenForwardAndBackward) {
  GPTConfig cfg = kCfg;
  cfg.n_layers = 6;
  int64_t plain = 0, checkpointed = 0;
  gpt_step(cfg, kFloat32, &plain);
  cfg.activation_checkpointing = true;
  gpt_step(cfg, kFloat32, &checkpointed);
  // the blocks keep only their (4, 12, 24) inputs and outputs; the embedding, the head and
  // the loss keep what they keep in both runs
  EXPECT_LT(checkpointed, plain / 2) << plain << " vs " << checkpointed;
}

TEST(GPTCheckpointing, OnlyInTraining) {
  GPTConfig cfg = kCfg;
  cfg.activation_checkpointing = true;
  manual_seed(3);
  GPTModel model(cfg);
  Tensor ids = randint(0, cfg.vocab_size, {2, 5});
  // in training the last block's output is a checkpoint output, under final_norm's node
  auto last_block_node = [&] {
    Tensor logits = model(ids);
    // out_head <- final_norm <- last block
    const Node* head = logits.grad_fn().get();
    std::vector<const Node*> stack{head};
    for (std::size_t i = 0; i < stack.size(); ++i)
      for (const Node::Edge& e : stack[i]->next)
        if (e.fn) {
          if (e.fn->name == "CheckpointOutputBackward") return true;
          if (stack.size() < 64) stack.push_back(e.fn.get());
        }
    return false;
  };
  EXPECT_TRUE(last_block_node());
  model.eval();
  EXPECT_FALSE(last_block_node());
}

}  // namespace
}  // namespace xgrad::nn
