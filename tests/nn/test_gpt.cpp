// tests/nn/test_gpt.cpp: TransformerBlock and GPTModel against a PyTorch twin
// (tests/fixtures/gen_gpt.py writes gpt.txt, gpt_names.txt, gpt_repr.txt): parameter names,
// order and counts, torch's initial weights after manual_seed(123), printing, logits, loss
// and every gradient for loaded weights; the GPT-2 124M parameter count; errors; dropout
// off in eval(); gradchecks in double precision.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

// vocab 32, context 8, emb 16, 2 heads, 2 layers, no dropout (gen_gpt.py's SMALL)
const GPTConfig kSmall{.vocab_size = 32,
                       .context_length = 8,
                       .emb_dim = 16,
                       .n_heads = 2,
                       .n_layers = 2,
                       .drop_rate = 0.0,
                       .qkv_bias = false};

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/gpt.txt");
  return fx;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no xgrad::Error thrown)";
}

// The small model with torch's weights loaded from the fixture.
std::unique_ptr<GPTModel> small_model_from_fixture() {
  auto model = std::make_unique<GPTModel>(kSmall);
  StateDict sd;
  for (const auto& [key, t] : model->state_dict()) sd.insert(key, fixture().get("param." + key));
  model->load_state_dict(sd);
  return model;
}

TEST(GPT, NamesOrderAndCountsMatchTorch) {
  GPTModel model(kSmall);
  std::ifstream in(XGRAD_FIXTURES_DIR "/gpt_names.txt");
  ASSERT_TRUE(in) << "run tests/fixtures/gen_gpt.py";
  std::vector<std::string> param_names, state_names;
  std::vector<int64_t> numels;
  std::string kind, name;
  while (in >> kind >> name) {
    if (kind == "param") {
      int64_t n;
      in >> n;
      param_names.push_back(name);
      numels.push_back(n);
    } else {
      state_names.push_back(name);
    }
  }
  auto named = model.named_parameters();
  ASSERT_EQ(named.size(), param_names.size());
  int64_t total = 0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(named[i].first, param_names[i]) << i;
    EXPECT_EQ(named[i].second.numel(), numels[i]) << param_names[i];
    total += numels[i];
  }
  EXPECT_EQ(model.num_parameters(), total);
  EXPECT_EQ(model.state_dict().keys(), state_names);
  EXPECT_EQ(named[2].first, "trf_blocks.0.att.W_query.weight");
  EXPECT_EQ(model.named_buffers().size(), 2u);  // the two causal masks
  // the members are the registered modules
  auto block0 = model.trf_blocks->at<TransformerBlock>(0);
  EXPECT_EQ(block0->att->W_query->weight.unsafe_impl(), named[2].second.unsafe_impl());
  EXPECT_EQ(block0->ff->layers->size(), 3u);
}

TEST(GPT, InitMatchesTorchAfterManualSeed) {
  manual_seed(123);
  GPTModel model(kSmall);
  for (const auto& [key, t] : model.state_dict())
    expect_close(t, fixture().get("param." + key), 1e-6, 1e-7, key);
}

TEST(GPT, PrintsLikeTorch) {
  GPTConfig cfg = kSmall;
  cfg.drop_rate = 0.1;
  cfg.qkv_bias = true;
  GPTModel model(cfg);
  EXPECT_EQ(to_string(model), read_text(XGRAD_FIXTURES_DIR "/gpt_repr.txt"));
}

TEST(GPT, LogitsLossAndGradientsMatchTorch) {
  const Fixture& fx = fixture();
  auto model = small_model_from_fixture();
  Tensor logits = (*model)(fx.get("in_idx"));
  EXPECT_EQ(logits.shape(), (Shape{2, 6, 32}));
  expect_close(logits, fx.get("logits"), 1e-4, 1e-5, "logits");
  Tensor loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  expect_close(loss, fx.get("loss"), 1e-5, 1e-6, "loss");
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    expect_close(p.grad(), fx.get("grad." + name), 1e-4, 1e-5, "grad." + name);
  }
  NoGradGuard g;
  expect_close((*model)(fx.get("in_idx_full")), fx.get("logits_full"), 1e-4, 1e-5, "logits_full");
}

TEST(GPT, TransformerBlockMatchesItsDefinition) {
  manual_seed(5);
  TransformerBlock block(kSmall);
  Tensor x = randn({2, 5, 16});
  Tensor h = x + (*block.att)((*block.norm1)(x));
  Tensor expected = h + (*block.ff)((*block.norm2)(h));
  expect_close(block(x), expected, 1e-6, 1e-6, "TransformerBlock");
  EXPECT_EQ(block.name(), "TransformerBlock");
}

TEST(GPT, EvalDisablesDropout) {
  GPTConfig cfg = kSmall;
  cfg.drop_rate = 0.5;
  manual_seed(0);
  GPTModel model(cfg);
  Tensor ids = tensor({{1, 2, 3, 4}});
  NoGradGuard g;
  Tensor a = model(ids), b = model(ids);
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());  // training: different masks
  model.eval();
  EXPECT_FALSE(model.trf_blocks->at<TransformerBlock>(1)->att->dropout->is_training());
  Tensor c = model(ids), d = model(ids);
  EXPECT_EQ(c.to_vector<float>(), d.to_vector<float>());
  // and equals the same weights with drop_rate 0
  GPTModel nodrop(kSmall);
  nodrop.load_state_dict(model.state_dict());
  expect_close(nodrop(ids), c, 0, 0, "eval vs drop_rate 0");
}

TEST(GPT, StateDictRoundTrip) {
  manual_seed(1);
  GPTModel model(kSmall);
  StateDict saved = model.state_dict().clone();
  Tensor ids = tensor({{3, 1, 4, 1, 5}});
  std::vector<float> before = model(ids).to_vector<float>();
  {
    NoGradGuard g;
    for (Tensor& p : model.parameters()) p.add_(randn(p.shape()), 0.1);
  }
  EXPECT_NE(model(ids).to_vector<float>(), before);
  model.load_state_dict(saved);
  EXPECT_EQ(model(ids).to_vector<float>(), before);
}

TEST(GPT, LoadStateDictErrorListsEverythingAndLeavesModelUnchanged) {
  manual_seed(1);
  GPTModel model(kSmall);
  StateDict before = model.state_dict().clone();
  StateDict bad = before.clone();
  bad.erase("trf_blocks.1.norm2.bias");
  bad.insert("trf_blocks.0.norm1.scale", ones({16}));  // Raschka's name
  bad.at("out_head.weight") = zeros({16, 32});
  bad.at("tok_emb.weight") = zeros({32, 16});  // fine, but must not be loaded
  std::string msg = message_of([&] { model.load_state_dict(bad); });
  EXPECT_NE(msg.find("GPTModel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"trf_blocks.1.norm2.bias\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"trf_blocks.0.norm1.scale\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("size mismatch for out_head.weight"), std::string::npos) << msg;
  for (const auto& [name, t] : model.state_dict())
    EXPECT_EQ(t.to_vector<double>(), before.at(name).to_vector<double>()) << name;
}

TEST(GPT, ClearErrors) {
  GPTModel model(kSmall);
  std::string msg = message_of([&] { model(zeros({1, 9}, kInt64)); });
  EXPECT_NE(msg.find("9 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("context_length is 8"), std::string::npos) << msg;
  msg = message_of([&] { model(tensor({{0, 32}})); });
  // embedding's one range check of the ids (the token embedding has vocab_size rows)
  EXPECT_NE(msg.find("index 32 is out of range for num_embeddings 32"), std::string::npos) << msg;
  EXPECT_THROW(model(tensor({{0, -1}})), Error);
  EXPECT_THROW(model(tensor({0, 1})), Error);  // 1-D
  EXPECT_THROW(model(ones({1, 2})), Error);    // float ids

  GPTConfig bad = kSmall;
  bad.n_heads = 0;
  msg = message_of([&] { GPTModel m(bad); });
  EXPECT_NE(msg.find("n_heads must be in [1, 65536], got 0"), std::string::npos) << msg;
  bad = kSmall;
  bad.n_heads = 3;
  msg = message_of([&] { GPTModel m(bad); });
  EXPECT_NE(msg.find("emb_dim 16 is not divisible by n_heads 3"), std::string::npos) << msg;
  bad = kSmall;
  bad.drop_rate = 1.5;
  EXPECT_THROW(GPTModel{bad}, Error);
  bad = kSmall;
  bad.vocab_size = 0;
  EXPECT_THROW(GPTModel{bad}, Error);
  bad = kSmall;
  bad.n_heads = 3;
  EXPECT_THROW(TransformerBlock{bad}, Error);
  // a bad config draws nothing from the generator
  manual_seed(9);
  bad.n_heads = 0;
  EXPECT_THROW(GPTModel{bad}, Error);
  Tensor after = rand({1});
  manual_seed(9);
  EXPECT_EQ(after.item(), rand({1}).item());
}

TEST(GPT, ConfigProblemsNameTheFieldAndItsRange) {
  // the table holds every field once, in declaration order
  std::vector<std::string> names;
  GPTConfig::for_each_field([&](const auto& f) { names.push_back(f.name); });
  EXPECT_EQ(names,
            (std::vector<std::string>{"vocab_size", "context_length", "emb_dim", "n_heads", "n_layers",
                                      "drop_rate", "qkv_bias", "tie_weights", "activation_checkpointing"}));
  EXPECT_EQ(config_problem(kSmall), "");
  GPTConfig c = kSmall;
  c.n_layers = 0;
  EXPECT_EQ(config_problem(c), "n_layers must be in [1, 65536], got 0");
  EXPECT_EQ(config_problem(c, [](const char* f) { return std::string("--") + f; }),
            "--n_layers must be in [1, 65536], got 0");
  EXPECT_THROW(GPTModel{c}, Error);
  c = kSmall;
  c.context_length = (1 << 20) + 1;
  EXPECT_EQ(config_problem(c), "context_length must be in [1, 1048576], got 1048577");
  c = kSmall;
  c.drop_rate = std::nan("");
  EXPECT_NE(config_problem(c).find("drop_rate must be in [0, 1], got nan"), std::string::npos)
      << config_problem(c);
  c = kSmall;
  c.emb_dim = 18;
  c.n_heads = 4;
  EXPECT_EQ(config_problem(c),
            "emb_dim 18 is not divisible by n_heads 4 (each head gets emb_dim / n_heads features)");
  c.n_heads = 3;
  EXPECT_EQ(config_problem(c), "");
}

TEST(GPT, GPT2SmallHas163MParameters) {
  auto start = std::chrono::steady_clock::now();
  manual_seed(123);
  GPTModel model(GPTConfig{});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(model.num_parameters(), 163009536);
  EXPECT_EQ(model.named_parameters().size(), 2 + 12 * 13 + 2 + 1u);
  EXPECT_EQ(model.tok_emb->weight.shape(), (Shape{50257, 768}));
  EXPECT_EQ(model.out_head->weight.shape(), (Shape{50257, 768}));
  // the book's count without the output head (weight tying): 124,412,160
  EXPECT_EQ(model.num_parameters() - model.out_head->weight.numel(), 124412160);
  RecordProperty("construction_seconds", std::to_string(seconds));
  std::cout << "[ GPT-124M ] constructed in " << seconds << " s\n";
}

TEST(GPTGradcheck, TransformerBlock) {
  GPTConfig cfg{.vocab_size = 8,
                .context_length = 4,
                .emb_dim = 4,
                .n_heads = 2,
                .n_layers = 1,
                .drop_rate = 0.0,
                .qkv_bias = true};
  manual_seed(6);
  TransformerBlock block(cfg);
  block.to(kFloat64);
  Tensor x = randn({2, 3, 4}, nullptr, kFloat64).requires_grad_();
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : block.parameters()) inputs.push_back(p);
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return block(in[0]); }, inputs,
                     {.name = "TransformerBlock"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(GPTGradcheck, TinyGPTModel) {
  GPTConfig cfg{
      .vocab_size = 7, .context_length = 4, .emb_dim = 4, .n_heads = 2, .n_layers = 2, .drop_rate = 0.0};
  manual_seed(7);
  GPTModel model(cfg);
  model.to(kFloat64);
  Tensor ids = tensor({{0, 6, 2}, {3, 3, 1}});
  auto r = gradcheck([&](const std::vector<Tensor>&) { return model(ids); }, model.parameters(),
                     {.name = "GPTModel"});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace xgrad::nn
