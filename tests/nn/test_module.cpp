// tests/nn/test_module.cpp: the Module system on hand-written modules: registration and
// name checks, dotted names in torch's order, train/eval, zero_grad, to(dtype), state_dict
// round trips, load_state_dict errors (all problems in one message, model untouched),
// printing like torch, ModuleList and Sequential.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

// A module with its own parameter, a buffer, a child and a list, to check traversal order:
// torch lists a module's own tensors before its children's, whatever the registration order.
struct Toy : Module {
  Toy() {
    fc = register_module("fc", std::make_shared<Linear>(3, 2));
    scale = register_parameter("scale", ones({2}));
    running = register_buffer("running", zeros({2}));
    scratch = register_buffer("scratch", zeros({1}), /*persistent=*/false);
    blocks = register_module("blocks", std::make_shared<ModuleList>());
    blocks->push_back(std::make_shared<Linear>(2, 2, false));
    blocks->push_back(std::make_shared<Dropout>(0.25));
  }
  Tensor forward(const Tensor& x) override { return (*fc)(x)*scale; }
  std::shared_ptr<Linear> fc;
  Tensor scale, running, scratch;
  std::shared_ptr<ModuleList> blocks;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no xgrad::Error thrown)";
}

TEST(Module, NamedParametersBuffersAndChildrenInTorchOrder) {
  Toy toy;
  EXPECT_EQ(names_of(toy.named_parameters()),
            (std::vector<std::string>{"scale", "fc.weight", "fc.bias", "blocks.0.weight"}));
  EXPECT_EQ(names_of(toy.named_parameters(/*recurse=*/false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names_of(toy.named_buffers()), (std::vector<std::string>{"running", "scratch"}));
  EXPECT_EQ(toy.state_dict().keys(),
            (std::vector<std::string>{"scale", "running", "fc.weight", "fc.bias", "blocks.0.weight"}));
  auto children = toy.named_children();
  ASSERT_EQ(children.size(), 2u);
  EXPECT_EQ(children[0].first, "fc");
  EXPECT_EQ(children[1].first, "blocks");
  std::vector<std::string> modules;
  for (auto& [n, m] : toy.named_modules()) modules.push_back(n);
  EXPECT_EQ(modules, (std::vector<std::string>{"", "fc", "blocks", "blocks.0", "blocks.1"}));
  EXPECT_EQ(toy.num_parameters(), 2 + 6 + 2 + 4);
  // members and the registry are the same tensors
  EXPECT_EQ(toy.parameters()[1].unsafe_impl(), toy.fc->weight.unsafe_impl());
  for (const Tensor& p : toy.parameters()) EXPECT_TRUE(p.requires_grad());
  for (const Tensor& b : toy.buffers()) EXPECT_FALSE(b.requires_grad());
}

TEST(Module, SharedModulesAreListedOnce) {
  Sequential shared;
  auto lin = std::make_shared<Linear>(2, 2);
  shared.push_back(lin);
  shared.push_back(lin);  // the same module twice, as in torch: its parameters once
  EXPECT_EQ(names_of(shared.named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(shared.num_parameters(), 6);
  EXPECT_EQ(shared.state_dict().keys(),  // state_dict lists every path, like torch
            (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"}));
  shared.load_state_dict(shared.state_dict().clone());
}

TEST(Module, RegistrationErrors) {
  struct M : Module {
  } m;
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_parameter("w", zeros({2})), Error);
  EXPECT_THROW(m.register_buffer("w", zeros({2})), Error);
  EXPECT_THROW(m.register_module("w", std::make_shared<Linear>(1, 1)), Error);
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), Error);
  EXPECT_THROW(m.register_parameter("", zeros({2})), Error);
  EXPECT_THROW(m.register_parameter("ids", zeros({2}, kInt64)), Error);
  EXPECT_NO_THROW(m.register_parameter("ids", zeros({2}, kInt64), /*requires_grad=*/false));
  EXPECT_THROW(m.register_module("null", std::shared_ptr<Linear>()), Error);
  auto outer = std::make_shared<Sequential>();
  auto inner = outer->push_back(std::make_shared<Sequential>());
  EXPECT_THROW(inner->push_back(outer), Error);  // would make a cycle
  EXPECT_THROW(outer->push_back(outer), Error);
  EXPECT_EQ(outer->size(), 1u);
  Tensor leaf = ones({2}).requires_grad_();
  EXPECT_THROW(m.register_parameter("nonleaf", leaf * 2.0), Error);
  EXPECT_TRUE(message_of([&] { m.register_parameter("w", ones({1})); }).find("'w' is already a parameter") !=
              std::string::npos);
  // bias=False style: an undefined parameter registers nothing
  Tensor none = m.register_parameter("bias", Tensor());
  EXPECT_FALSE(none.defined());
  EXPECT_EQ(m.named_parameters().size(), 2u);
  // a module without a one-tensor forward says so
  EXPECT_TRUE(message_of([&] { m(ones({1})); }).find("no forward(Tensor)") != std::string::npos);
}

TEST(Module, TrainEvalIsRecursiveAndDisablesDropout) {
  Toy toy;
  EXPECT_TRUE(toy.is_training());
  toy.eval();
  for (auto& [n, m] : toy.named_modules()) EXPECT_FALSE(m->is_training()) << n;
  auto drop = toy.blocks->at<Dropout>(1);
  Tensor x = ones({100});
  EXPECT_EQ((*drop)(x).to_vector<float>(), x.to_vector<float>());
  toy.train();
  for (auto& [n, m] : toy.named_modules()) EXPECT_TRUE(m->is_training()) << n;
  manual_seed(0);
  auto y = (*drop)(x).to_vector<float>();
  int zeros_seen = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 1.0f / 0.75f) < 1e-6f);
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 5);
  EXPECT_LT(zeros_seen, 50);
}

TEST(Module, ZeroGradZeroesInPlaceLikeTorch113AndRequiresGradFreezes) {
  Linear lin(3, 2);
  sum(lin(ones({4, 3}))).backward();
  ASSERT_TRUE(lin.weight.grad().defined());
  Tensor g = lin.weight.grad();
  lin.zero_grad();  // torch 1.13: set_to_none=False, the same tensor zeroed
  ASSERT_TRUE(lin.weight.grad().defined());
  EXPECT_EQ(lin.weight.grad().raw_data_ptr(), g.raw_data_ptr());
  EXPECT_EQ(lin.weight.grad().to_vector<float>(), std::vector<float>(6, 0.0f));
  lin.zero_grad(true);
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
  lin.requires_grad_(false);
  EXPECT_EQ(lin.num_parameters(/*only_trainable=*/true), 0);
  EXPECT_EQ(lin.num_parameters(), 8);
  EXPECT_FALSE(lin(ones({1, 3})).requires_grad());
}

TEST(Module, ToDoubleConvertsParametersBuffersAndGradsInPlace) {
  Toy toy;
  Tensor w_before = toy.fc->weight.detach().clone();
  sum(toy(ones({1, 3}))).backward();
  toy.to(kFloat64);
  EXPECT_EQ(toy.fc->weight.dtype(), kFloat64);  // the member handle sees it
  EXPECT_EQ(toy.parameters()[1].dtype(), kFloat64);
  EXPECT_EQ(toy.running.dtype(), kFloat64);
  EXPECT_EQ(toy.fc->weight.grad().dtype(), kFloat64);
  EXPECT_TRUE(toy.fc->weight.requires_grad());
  EXPECT_EQ(toy.fc->weight.to_vector<double>(), w_before.to_vector<double>());
  Tensor y = toy(ones({1, 3}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  toy.to(kFloat32);
  EXPECT_EQ(toy.fc->weight.dtype(), kFloat32);
  EXPECT_THROW(toy.to(kInt64), Error);
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  Toy toy;
  StateDict saved = toy.state_dict().clone();
  // state_dict() shares storage with the model, clone() does not
  EXPECT_EQ(toy.state_dict().at("fc.weight").raw_data_ptr(), toy.fc->weight.raw_data_ptr());
  EXPECT_NE(saved.at("fc.weight").raw_data_ptr(), toy.fc->weight.raw_data_ptr());
  EXPECT_FALSE(saved.at("fc.weight").requires_grad());
  {
    NoGradGuard g;
    for (Tensor& p : toy.parameters()) p.add_(ones_like(p));
    toy.running.fill_(5.0);
  }
  EXPECT_NE(toy.fc->weight.to_vector<float>(), saved.at("fc.weight").to_vector<float>());
  const uint64_t version = toy.fc->weight.version();
  LoadResult r = toy.load_state_dict(saved);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  for (const auto& [name, t] : toy.state_dict())
    EXPECT_EQ(t.to_vector<double>(), saved.at(name).to_vector<double>()) << name;
  EXPECT_GT(toy.fc->weight.version(), version);  // copied in place
  EXPECT_TRUE(toy.fc->weight.requires_grad());
  EXPECT_TRUE(toy.fc->weight.is_leaf());
  // into a fresh module with different init
  manual_seed(2);
  Toy other;
  other.load_state_dict(saved);
  EXPECT_EQ(other.fc->bias.to_vector<float>(), saved.at("fc.bias").to_vector<float>());
  // float64 values load into float32 parameters (converted, like torch's copy_)
  StateDict dbl = saved.clone();
  dbl.at("scale") = full({2}, 0.5, kFloat64);
  other.load_state_dict(dbl);
  EXPECT_EQ(other.scale.dtype(), kFloat32);
  EXPECT_EQ(other.scale.to_vector<float>(), (std::vector<float>{0.5f, 0.5f}));
}

TEST(Module, LoadStateDictReportsEverythingAndChangesNothing) {
  Toy toy;
  StateDict before = toy.state_dict().clone();
  StateDict bad = toy.state_dict().clone();
  bad.erase("fc.bias");
  bad.erase("running");
  bad.insert("fc.extra", zeros({1}));
  bad.at("fc.weight") = zeros({3, 2});   // transposed shape
  bad.at("scale") = zeros({2}, kInt64);  // wrong kind
  std::string msg = message_of([&] { toy.load_state_dict(bad); });
  EXPECT_NE(msg.find("load_state_dict"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Toy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Missing key(s) in state_dict: \"running\", \"fc.bias\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"fc.extra\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("size mismatch for fc.weight: copying a param with shape [3, 2] from "
                     "checkpoint, the shape in current model is [2, 3]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("dtype mismatch for scale"), std::string::npos) << msg;
  for (const auto& [name, t] : toy.state_dict())
    EXPECT_EQ(t.to_vector<double>(), before.at(name).to_vector<double>()) << name;

  // strict=false skips key problems and reports them, but shape mismatches still throw
  StateDict partial = before.clone();
  partial.erase("fc.bias");
  partial.insert("junk", zeros({1}));
  partial.at("scale") = full({2}, 3.0);
  LoadResult r = toy.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"fc.bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"junk"}));
  EXPECT_EQ(toy.scale.to_vector<float>(), (std::vector<float>{3.0f, 3.0f}));
  partial.at("running") = zeros({5});
  EXPECT_THROW(toy.load_state_dict(partial, false), Error);
  // the non-persistent buffer is neither saved nor expected
  EXPECT_FALSE(before.contains("scratch"));
}

TEST(Module, StateDictAccessors) {
  StateDict sd;
  sd.insert("a", zeros({1}));
  sd.insert("b", ones({2}));
  sd.insert("a", ones({3}));  // replaces, keeps position
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(sd.at("a").numel(), 3);
  EXPECT_TRUE(sd.contains("b"));
  EXPECT_TRUE(sd.erase("a"));
  EXPECT_FALSE(sd.erase("a"));
  EXPECT_EQ(sd.at("b").numel(), 2);
  EXPECT_THROW(sd.at("a"), Error);
}

TEST(Module, PrintsLikeTorch) {
  Linear lin(6, 6);
  std::ostringstream os;
  os << lin;
  EXPECT_EQ(os.str(), "Linear(in_features=6, out_features=6, bias=True)");
  EXPECT_EQ(to_string(Linear(3, 2, false)), "Linear(in_features=3, out_features=2, bias=False)");
  EXPECT_EQ(to_string(Embedding(5, 4)), "Embedding(5, 4)");
  EXPECT_EQ(to_string(Dropout(0.1)), "Dropout(p=0.1, inplace=False)");
  EXPECT_EQ(to_string(Dropout(0.0)), "Dropout(p=0.0, inplace=False)");
  EXPECT_EQ(to_string(LayerNorm(768)), "LayerNorm((768,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(to_string(LayerNorm(Shape{2, 3}, 1e-6, false)),
            "LayerNorm((2, 3), eps=1e-06, elementwise_affine=False)");
  EXPECT_EQ(to_string(GELU("tanh")), "GELU(approximate='tanh')");
  EXPECT_EQ(to_string(GELU()), "GELU(approximate='none')");
  EXPECT_EQ(to_string(ReLU()), "ReLU()");
  EXPECT_EQ(to_string(Tanh()), "Tanh()");
  EXPECT_EQ(to_string(Sigmoid()), "Sigmoid()");
  Toy toy;
  EXPECT_EQ(to_string(toy),
            "Toy(\n"
            "  (fc): Linear(in_features=3, out_features=2, bias=True)\n"
            "  (blocks): ModuleList(\n"
            "    (0): Linear(in_features=2, out_features=2, bias=False)\n"
            "    (1): Dropout(p=0.25, inplace=False)\n"
            "  )\n"
            ")");
  EXPECT_EQ(to_string(Sequential()), "Sequential()");
}

TEST(Module, ReprFloatMatchesPython) {
  EXPECT_EQ(repr_float(0.1), "0.1");
  EXPECT_EQ(repr_float(0.0), "0.0");
  EXPECT_EQ(repr_float(-0.0), "-0.0");
  EXPECT_EQ(repr_float(1.0), "1.0");
  EXPECT_EQ(repr_float(0.5), "0.5");
  EXPECT_EQ(repr_float(1e-5), "1e-05");
  EXPECT_EQ(repr_float(1e-4), "0.0001");
  EXPECT_EQ(repr_float(0.00012), "0.00012");
  EXPECT_EQ(repr_float(123.25), "123.25");
  EXPECT_EQ(repr_float(1e15), "1000000000000000.0");
  EXPECT_EQ(repr_float(1e16), "1e+16");
  EXPECT_EQ(repr_float(1.5e-7), "1.5e-07");
  EXPECT_EQ(repr_float(1.0 / 3), "0.3333333333333333");
}

TEST(Containers, SequentialChainsAndIndexes) {
  manual_seed(0);
  auto seq = std::make_shared<Sequential>();
  auto l1 = seq->push_back(std::make_shared<Linear>(4, 8));
  seq->push_back(std::make_shared<ReLU>());
  auto l2 = seq->push_back(std::make_shared<Linear>(8, 3));
  EXPECT_EQ(seq->size(), 3u);
  Tensor x = randn({5, 4});
  Tensor expected = (*l2)(relu((*l1)(x)));
  EXPECT_EQ((*seq)(x).to_vector<float>(), expected.to_vector<float>());
  EXPECT_EQ((*seq)[-1].get(), l2.get());
  EXPECT_EQ(seq->at<Linear>(0).get(), l1.get());
  EXPECT_THROW((*seq)[3], Error);
  EXPECT_THROW((*seq)[-4], Error);
  EXPECT_THROW(seq->at<Linear>(1), Error);
  EXPECT_EQ(names_of(seq->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  int count = 0;
  for (const auto& m : *seq) count += m != nullptr;
  EXPECT_EQ(count, 3);
  // a braced list keeps its order
  Sequential braced{std::make_shared<Identity>(), std::make_shared<GELU>("tanh")};
  EXPECT_EQ(braced[1]->name(), "GELU");
  // a ModuleList has no forward
  ModuleList list{std::make_shared<Identity>()};
  EXPECT_THROW(list(x), Error);
  // modules whose forward takes more inputs keep the one-tensor forward visible; it throws
  CrossEntropyLoss ce;
  EXPECT_THROW(ce.forward(x), Error);
  MSELoss mse;
  EXPECT_THROW(mse.forward(x), Error);
}

TEST(Init, KaimingAndXavierBounds) {
  Tensor w = empty({64, 32});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(32.0);
  for (float v : w.to_vector<float>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  init::xavier_uniform_(w);
  const double xb = std::sqrt(6.0 / 96.0);
  for (float v : w.to_vector<float>()) EXPECT_LE(std::abs(v), xb + 1e-7);
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3})).fan_in, 36);
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({8, 4, 3, 3})).fan_out, 72);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(empty({8})), Error);
  EXPECT_THROW(init::calculate_gain("swish"), Error);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  // initialising a parameter that requires grad is allowed (no grad recorded)
  Tensor p = zeros({3, 3}).requires_grad_();
  init::normal_(p);
  EXPECT_TRUE(p.is_leaf());
  init::zeros_(p);
  EXPECT_EQ(sum(p).item(), 0.0);
}

// The activation modules are their ops (the same values and the same grad_fn).
TEST(Module, ActivationModulesCallTheirOps) {
  const Tensor x = tensor({-2.0, -0.5, 0.0, 0.7, 3.0}).requires_grad_();
  EXPECT_EQ(ReLU()(x).to_vector(), relu(x).to_vector());
  EXPECT_EQ(Tanh()(x).to_vector(), tanh(x).to_vector());
  EXPECT_EQ(Sigmoid()(x).to_vector(), sigmoid(x).to_vector());
  EXPECT_EQ(Tanh()(x).grad_fn_name(), "TanhBackward0");
  EXPECT_EQ(Sigmoid()(x).grad_fn_name(), "SigmoidBackward0");
}

}  // namespace
}  // namespace xgrad::nn
