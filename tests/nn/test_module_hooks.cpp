// tests/nn/test_module_hooks.cpp: nn::Module's forward pre-hooks, forward hooks and full
// backward hooks: torch's call order (also through a ModuleHolder and Sequential), replaced
// inputs and outputs and a full backward hook's grad_input / grad_output against torch 1.13,
// removal, the errors torch raises; and the module path anomaly mode reports.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/fixture_reader.h"
#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using testing::expect_close;
using testing::expect_error;
using testing::Fixture;
using testing::read_fixture;

void load(Module& m, const Fixture& fx, const std::string& prefix) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) p.copy_(fx.get(prefix + name));
}

struct Traced : Module {
  explicit Traced(std::string* log) : log(log) {}
  Tensor forward(const Tensor& x) override {
    *log += "forward ";
    return x * 2.0;
  }
  std::string* log;
};

TEST(ModuleHooks, CallOrderAndReplacedValues) {
  std::string log;
  auto m = std::make_shared<Traced>(&log);
  m->register_forward_pre_hook([&](Module&, const Tensor& x) {
    log += "pre1 ";
    return x + 1.0;  // forward sees x + 1
  });
  m->register_forward_pre_hook([&](Module&, const Tensor&) { log += "pre2 "; });  // keeps it
  m->register_forward_hook([&](Module& mod, const Tensor& in, const Tensor& out) {
    log += "fwd1 ";
    EXPECT_EQ(&mod, m.get());
    EXPECT_EQ(in.item(), 4.0);  // the replaced input
    return out * 10.0;
  });
  m->register_forward_hook([&](Module&, const Tensor&, const Tensor& out) {
    log += "fwd2 ";
    EXPECT_EQ(out.item(), 80.0);  // the previous hook's output
  });
  m->register_full_backward_hook(
      [&](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) { log += "bwd "; });
  Tensor x = tensor({3.0}, kFloat64).requires_grad_();
  Tensor y = (*m)(x);
  EXPECT_EQ(log, "pre1 pre2 forward fwd1 fwd2 ");
  EXPECT_EQ(y.item(), 80.0);
  y.sum().backward();
  EXPECT_EQ(log, "pre1 pre2 forward fwd1 fwd2 bwd ");
  EXPECT_EQ(x.grad().item(), 20.0);
  // through a ModuleHolder and a Sequential the hooks run too; forward() itself skips them
  log.clear();
  ModuleHolder<Traced> holder(m);
  holder(tensor({3.0}, kFloat64));
  EXPECT_EQ(log, "pre1 pre2 forward fwd1 fwd2 ");
  log.clear();
  Sequential seq;
  seq.push_back(m);
  seq(tensor({3.0}, kFloat64));
  EXPECT_EQ(log, "pre1 pre2 forward fwd1 fwd2 ");
  log.clear();
  m->forward(tensor({3.0}, kFloat64));
  EXPECT_EQ(log, "forward ");
}

TEST(ModuleHooks, RemovedHooksDoNotRun) {
  std::string log;
  auto m = std::make_shared<Traced>(&log);
  RemovableHandle pre = m->register_forward_pre_hook([&](Module&, const Tensor&) { log += "pre "; });
  RemovableHandle fwd =
      m->register_forward_hook([&](Module&, const Tensor&, const Tensor&) { log += "fwd "; });
  RemovableHandle bwd = m->register_full_backward_hook(
      [&](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) { log += "bwd "; });
  pre.remove();
  fwd.remove();
  bwd.remove();
  bwd.remove();  // harmless
  (*m)(tensor({1.0}, kFloat64).requires_grad_()).sum().backward();
  EXPECT_EQ(log, "forward ");
}

TEST(ModuleHooks, ForwardAndFullBackwardHooksMatchTorch) {
  Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/autograd.txt");
  Sequential model;
  auto fc1 = std::make_shared<Linear>(3, 4);
  auto fc2 = std::make_shared<Linear>(4, 2);
  model.push_back(fc1);
  model.push_back(std::make_shared<GELU>());
  model.push_back(fc2);
  load(model, fx, "mhooks.");
  fc1->register_forward_pre_hook([](Module&, const Tensor& x) { return x * 2.0; });
  fc1->register_forward_hook([](Module&, const Tensor&, const Tensor& out) { return out + 1.0; });
  std::vector<Tensor> seen_in, seen_out;
  fc2->register_full_backward_hook(
      [&](Module& m, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output) {
        EXPECT_EQ(&m, fc2.get());
        seen_in = grad_input;
        seen_out = grad_output;
        return std::vector<Tensor>{grad_input[0] * 0.5};
      });
  Tensor x = fx.get("mhooks.x").clone().requires_grad_();
  Tensor out = model(x);
  expect_close(out, fx.get("mhooks.out"), 1e-5, 1e-6, "out");
  (out * fx.get("mhooks.r")).sum().backward();
  ASSERT_EQ(seen_in.size(), 1u);
  ASSERT_EQ(seen_out.size(), 1u);
  expect_close(seen_in[0], fx.get("mhooks.grad_input"), 1e-5, 1e-6, "grad_input");
  expect_close(seen_out[0], fx.get("mhooks.grad_output"), 1e-5, 1e-6, "grad_output");
  expect_close(x.grad(), fx.get("mhooks.x_grad"), 1e-5, 1e-6, "x.grad");
  for (const auto& [name, p] : model.named_parameters())
    expect_close(p.grad(), fx.get("mhooks." + name + ".grad"), 1e-5, 1e-6, name);
  EXPECT_EQ(out.grad_fn_name(), "BackwardHookFunctionBackward");
}

TEST(ModuleHooks, FullBackwardHookWhenTheInputNeedsNoGrad) {
  Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/autograd.txt");
  Linear lin(3, 2);
  load(lin, fx, "mhooks_noinput.");
  int calls = 0;
  RemovableHandle check = lin.register_full_backward_hook(
      [&](Module&, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output) {
        ++calls;
        ASSERT_EQ(grad_input.size(), 1u);
        EXPECT_FALSE(grad_input[0].defined());
        expect_close(grad_output[0], fx.get("mhooks_noinput.grad_output"), 1e-5, 1e-6, "grad_output");
      });
  (lin(fx.get("mhooks.x")) * fx.get("mhooks.r")).sum().backward();
  EXPECT_EQ(calls, 1);
  expect_close(lin.weight.grad(), fx.get("mhooks_noinput.weight.grad"), 1e-5, 1e-6, "weight.grad");
  // returning a grad_input there is torch's error
  check.remove();
  lin.register_full_backward_hook([](Module&, const std::vector<Tensor>&, const std::vector<Tensor>& go) {
    return std::vector<Tensor>{go[0]};
  });
  expect_error([&] { lin(fx.get("mhooks.x")).sum().backward(); },
               {"register_full_backward_hook", "no input"});
}

TEST(ModuleHooks, BackwardHookResultsAreChecked) {
  Linear lin(3, 2);
  Tensor x = ones({1, 3}).requires_grad_();
  RemovableHandle two =
      lin.register_full_backward_hook([](Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) {
        return std::vector<Tensor>{gi[0], gi[0]};
      });
  expect_error([&] { lin(x).sum().backward(); }, {"register_full_backward_hook", "returned 2 grad_input"});
  two.remove();
  lin.register_full_backward_hook([](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {
    return std::vector<Tensor>{ones({1, 4})};
  });
  expect_error([&] { lin(x).sum().backward(); }, {"register_full_backward_hook", "[1, 4]", "[1, 3]"});
}

TEST(ModuleHooks, NoBackwardWrappingWithoutGrad) {
  Linear lin(3, 2);
  int calls = 0;
  lin.register_full_backward_hook(
      [&](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) { ++calls; });
  Tensor x = ones({1, 3}).requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = lin(x);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(calls, 0);
}

// ---------------------------------------------------------------- anomaly mode's module path
// The NaN first appears in trf_blocks.1.att: its gate is 0, so sqrt'(0) = inf meets the gate
// in MulBackward0 (inf * 0 = nan).
struct Gate : Module {
  explicit Gate(double g) { gate = register_buffer("gate", full({1}, g, kFloat64)); }
  Tensor forward(const Tensor& x) override { return (x * gate).sqrt(); }
  Tensor gate;
};
struct Block : Module {
  explicit Block(double g) { att = register_module("att", std::make_shared<Gate>(g)); }
  Tensor forward(const Tensor& x) override { return att(x); }
  ModuleHolder<Gate> att;
};
struct Net : Module {
  Net() {
    trf_blocks = register_module("trf_blocks", std::make_shared<Sequential>());
    for (double g : {1.0, 0.0, 1.0}) trf_blocks->push_back(std::make_shared<Block>(g));
  }
  Tensor forward(const Tensor& x) override { return trf_blocks(x); }
  ModuleHolder<Sequential> trf_blocks;
};

TEST(ModuleHooks, AnomalyModeNamesTheModulePath) {
  Net net;
  Tensor x = full({2}, 4.0, kFloat64).requires_grad_();
  autograd::DetectAnomalyGuard guard;
  Tensor y = net(x).sum();
  expect_error([&] { y.backward(); }, {"MulBackward0 returned nan in its 0th output", "forward op mul",
                                       "module trf_blocks.1.att (Gate)"});
}

TEST(ModuleHooks, AnomalyModeNamesTheGptAttentionLayer) {
  GPTModel model(GPTConfig{.vocab_size = 32,
                           .context_length = 8,
                           .emb_dim = 16,
                           .n_heads = 2,
                           .n_layers = 2,
                           .drop_rate = 0.0,
                           .qkv_bias = false});
  // a forward hook runs inside its module's call: the NaN its ops make belongs to that module
  model.trf_blocks->at<TransformerBlock>(1)->att->register_forward_hook(
      [](Module&, const Tensor&, const Tensor& out) { return (out * 0.0).sqrt(); });
  Tensor ids = tensor({{1, 2, 3, 4}});
  autograd::DetectAnomalyGuard guard;
  Tensor loss = model(ids).sum();
  expect_error([&] { loss.backward(); }, {"MulBackward0 returned nan in its 0th output",
                                          "module trf_blocks.1.att (MultiHeadAttention)"});
}

TEST(ModuleHooks, ABackwardHookOfADestroyedModuleIsAnError) {
  Tensor x = ones({1, 3}).requires_grad_();
  Tensor y;
  {
    Linear lin(3, 2);
    lin.register_full_backward_hook([](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
    y = lin(x).sum();
  }
  expect_error([&] { y.backward(); }, {"register_full_backward_hook", "destroyed"});
}

}  // namespace
}  // namespace xgrad::nn
