// tests/distributed/test_torch_ddp.cpp: xgrad's 2-rank DistributedDataParallel against a
// 2-process torch DDP run (gloo) of the same small GPT, global batches and AdamW settings
// (tests/fixtures/gen_torch_ddp.py writes torch_ddp.txt). Only meaningful at 2 ranks: the
// fixture is a 2-process run (other world sizes skip).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/fixture_reader.h"
#include "xgrad/distributed.h"
#include "xgrad/nn/gpt.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/random.h"

namespace dist = xgrad::distributed;
using xgrad::Tensor;

TEST(TorchDDP, TwoRanksMatchTorchGloo) {
  // the fixture is a 2-process torch run (ctest runs this test in its 2-rank job only)
  ASSERT_EQ(dist::get_world_size(), 2) << "run under mpirun -np 2";
  auto fx = xgrad::testing::read_fixture(XGRAD_FIXTURES_DIR "/torch_ddp.txt");
  // torch.manual_seed(11); GPTModel(SMALL): xgrad's init draws the same weights
  xgrad::manual_seed(11);
  auto model = std::make_shared<xgrad::nn::GPTModel>(xgrad::nn::GPTConfig{.vocab_size = 32,
                                                                          .context_length = 8,
                                                                          .emb_dim = 16,
                                                                          .n_heads = 2,
                                                                          .n_layers = 2,
                                                                          .drop_rate = 0.0,
                                                                          .qkv_bias = false});
  dist::DistributedDataParallel ddp(model);
  xgrad::optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  const int64_t rank = dist::get_rank();
  double worst_loss = 0, worst_param = 0;
  for (int s = 0; s < 10; ++s) {
    Tensor x = fx.get("x." + std::to_string(s)).narrow(0, 2 * rank, 2).contiguous();
    Tensor y = fx.get("y." + std::to_string(s)).narrow(0, 2 * rank, 2).contiguous();
    Tensor loss = xgrad::cross_entropy_last_dim(ddp.forward(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    Tensor mean = loss.detach().clone();
    dist::all_reduce(mean, dist::ReduceOp::Avg);
    const Tensor& want = fx.get("loss." + std::to_string(s));
    xgrad::testing::expect_close(mean, want, 1e-5, 1e-6, "loss." + std::to_string(s));
    worst_loss = std::max(worst_loss, std::abs(mean.item() / want.item() - 1));
  }
  for (const auto& [name, p] : model->named_parameters()) {
    const Tensor& want = fx.get("param." + name);
    xgrad::testing::expect_close(p, want, 1e-5, 1e-5, "param." + name);
    worst_param = std::max(worst_param, (p - want).abs().max().item() / want.abs().max().item());
  }
  if (rank == 0)
    std::printf(
        "[torch DDP] 2 ranks, 10 AdamW steps: worst relative difference %.3g (loss), "
        "%.3g (parameters, max|a-b| / max|b| per tensor)\n",
        worst_loss, worst_param);
}
