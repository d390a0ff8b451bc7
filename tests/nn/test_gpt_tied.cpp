// tests/nn/test_gpt_tied.cpp: GPTConfig{.tie_weights = true} against torch's
// `model.out_head.weight = model.tok_emb.weight` (tests/fixtures/gen_gpt_tied.py writes
// gpt_tied.txt and gpt_tied_names.txt): one parameter under two names, names and the
// parameter count like torch's, logits, the tied gradient (both uses summed) and the values
// after one AdamW step (the optimizer steps the tied weight once); state dicts with both
// names or either one load; Module::set_parameter's errors.
#include <gtest/gtest.h>

#include <fstream>

#include "core/fixture_reader.h"
#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::expect_error;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const GPTConfig kTied{.vocab_size = 32,
                      .context_length = 8,
                      .emb_dim = 16,
                      .n_heads = 2,
                      .n_layers = 2,
                      .drop_rate = 0.0,
                      .qkv_bias = false,
                      .tie_weights = true};

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/gpt_tied.txt");
  return fx;
}

TEST(GPTTied, OneParameterTwoNamesLikeTorch) {
  manual_seed(123);
  GPTModel model(kTied);
  EXPECT_EQ(model.out_head->weight.unsafe_impl(), model.tok_emb->weight.unsafe_impl());
  std::ifstream in(XGRAD_FIXTURES_DIR "/gpt_tied_names.txt");
  ASSERT_TRUE(in) << "run tests/fixtures/gen_gpt_tied.py";
  std::vector<std::string> param_names, state_names;
  for (std::string kind, name; in >> kind >> name;)
    (kind == "param" ? param_names : state_names).push_back(name);
  std::vector<std::string> names;
  for (const auto& [n, p] : model.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, param_names);                      // out_head.weight is not listed: it is tok_emb.weight
  EXPECT_EQ(model.state_dict().keys(), state_names);  // ... but saved under both names
  EXPECT_EQ(model.num_parameters(), fixture().get("num_parameters").item<int64_t>());
  EXPECT_EQ(
      model.num_parameters(),
      GPTModel(GPTConfig{.vocab_size = 32, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 2})
              .num_parameters() -
          32 * 16);
  // the same draws as torch: the head's own init is drawn and then replaced
  for (const auto& [key, t] : model.state_dict())
    expect_close(t, fixture().get("param." + key), 1e-6, 1e-7, key);
}

TEST(GPTTied, GPT2SmallHas124MParameters) {
  GPTConfig cfg;
  cfg.tie_weights = true;
  cfg.n_layers = 1;  // the count is linear in n_layers: check 1 layer, extrapolate to 12
  const int64_t one = GPTModel(cfg).num_parameters();
  cfg.n_layers = 2;
  const int64_t per_layer = GPTModel(cfg).num_parameters() - one;
  EXPECT_EQ(one + 11 * per_layer, 124'412'160);  // GPT-2 small, as the book states
}

TEST(GPTTied, LogitsGradientsAndAdamWStepMatchTorch) {
  const Fixture& fx = fixture();
  GPTModel model(kTied);
  StateDict sd;
  for (const auto& key : model.state_dict().keys()) sd.insert(key, fx.get("param." + key));
  model.load_state_dict(sd);
  Tensor logits = model(fx.get("in_idx"));
  expect_close(logits, fx.get("logits"), 1e-4, 1e-5, "logits");
  Tensor loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  expect_close(loss, fx.get("loss"), 1e-5, 1e-6, "loss");
  loss.backward();
  for (const auto& [name, p] : model.named_parameters())
    expect_close(p.grad(), fx.get("grad." + name), 1e-4, 1e-5, "grad." + name);
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  opt.step();
  for (const auto& [name, p] : model.named_parameters())
    expect_close(p, fx.get("step." + name), 1e-5, 1e-6, "step." + name);
  EXPECT_EQ(model.out_head->weight.unsafe_impl(), model.tok_emb->weight.unsafe_impl());
}

TEST(GPTTied, LoadsBothNamesOrEitherOne) {
  const Fixture& fx = fixture();
  const Tensor emb = fx.get("param.tok_emb.weight");
  for (const char* dropped : {"", "out_head.weight", "tok_emb.weight"}) {
    GPTModel model(kTied);
    StateDict sd;
    for (const auto& key : model.state_dict().keys())
      if (key != dropped) sd.insert(key, fx.get("param." + key));
    LoadResult r = model.load_state_dict(sd);  // strict
    EXPECT_TRUE(r.missing_keys.empty()) << dropped;
    expect_close(model.out_head->weight, emb, 0, 0, std::string("out_head without ") + dropped);
    expect_close(model.tok_emb->weight, emb, 0, 0, std::string("tok_emb without ") + dropped);
  }
  // both names missing is still an error
  GPTModel model(kTied);
  StateDict sd = model.state_dict();
  sd.erase("out_head.weight");
  sd.erase("tok_emb.weight");
  expect_error([&] { model.load_state_dict(sd); }, {"Missing key(s) in state_dict: \"tok_emb.weight\", "
                                                    "\"out_head.weight\""});
  // an untied model does not accept a state dict with one of the two
  GPTModel untied(
      GPTConfig{.vocab_size = 32, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 2});
  StateDict usd = untied.state_dict();
  usd.erase("out_head.weight");
  expect_error([&] { untied.load_state_dict(usd); }, {"Missing key(s) in state_dict: \"out_head.weight\""});
}

TEST(GPTTied, SetParameterErrors) {
  Linear a(4, 3, false), b(4, 3, false), c(3, 4, false);
  expect_error([&] { a.set_parameter("bias", b.weight); }, {"Linear has no parameter named 'bias'"});
  expect_error([&] { a.set_parameter("weight", c.weight); }, {"has shape [3, 4]"});
  expect_error([&] { a.set_parameter("weight", b.weight * 2); }, {"a leaf that requires grad"});
  a.weight = a.set_parameter("weight", b.weight);
  EXPECT_EQ(a.parameters()[0].unsafe_impl(), b.weight.unsafe_impl());
}

}  // namespace
}  // namespace xgrad::nn
