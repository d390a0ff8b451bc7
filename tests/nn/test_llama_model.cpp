// tests/nn/test_llama_model.cpp: LlamaConfig, GroupedQueryAttention and LlamaModel
// (nn/include/xgrad/nn/llama.h) against the book's Llama 3.2 code run by torch
// (tests/fixtures/gen_llama_model.py writes llama_model.txt, llama_model_names.txt and
// llama_hf/model.safetensors): names, order and counts, the initial weights after
// manual_seed(123), logits, loss and every gradient, every parameter after one AdamW step
// (in float64),
// tied embeddings, Llama 2's shape, greedy generation; the KV cache (rotated keys, every cached
// position against the full recompute); grouped-query attention against multi-head attention
// with repeated key/value weights; Hugging Face checkpoints; the book's parameter counts;
// config errors.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
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

// gen_llama_model.py's SMALL: GQA 4 query heads on 2 key/value heads, Llama 3's RoPE scaling
const LlamaConfig kSmall{.vocab_size = 64,
                         .context_length = 16,
                         .emb_dim = 32,
                         .n_heads = 4,
                         .n_layers = 2,
                         .hidden_dim = 64,
                         .n_kv_groups = 2,
                         .rope_base = 500'000.0,
                         .rope_freq = true,
                         .rope_factor = 32.0,
                         .rope_low_freq_factor = 1.0,
                         .rope_high_freq_factor = 4.0,
                         .rope_original_context_length = 8192,
                         .tie_weights = false};

// gen_llama_model.py's LLAMA2_SMALL: plain multi-head attention, theta 10000, no scaling
const LlamaConfig kLlama2Small{.vocab_size = 64,
                               .context_length = 16,
                               .emb_dim = 16,
                               .n_heads = 2,
                               .n_layers = 1,
                               .hidden_dim = 32,
                               .n_kv_groups = 2,
                               .rope_base = 10'000.0,
                               .rope_freq = false,
                               .tie_weights = false};

const Fixture& fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/llama_model.txt");
  return fx;
}

// `cfg` with the fixture's tensors `<prefix><state dict key>` loaded.
std::unique_ptr<LlamaModel> model_from_fixture(const LlamaConfig& cfg, const std::string& prefix = "param.") {
  auto model = std::make_unique<LlamaModel>(cfg);
  StateDict sd;
  for (const auto& key : model->state_dict().keys())
    if (key != "out_head.weight" || !cfg.tie_weights) sd.insert(key, fixture().get(prefix + key));
  model->load_state_dict(sd);
  return model;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

// ---------------------------------------------------------------- structure and init
TEST(LlamaModel, NamesOrderAndCountsMatchTorch) {
  LlamaModel model(kSmall);
  std::ifstream in(XGRAD_FIXTURES_DIR "/llama_model_names.txt");
  ASSERT_TRUE(in) << "run tests/fixtures/gen_llama_model.py";
  std::vector<std::string> param_names, state_names;
  std::vector<int64_t> numels;
  for (std::string kind, name; in >> kind >> name;) {
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
  EXPECT_EQ(num_parameters(kSmall), total);
  EXPECT_EQ(model.state_dict().keys(), state_names);  // the RoPE tables are not saved
  EXPECT_EQ(named[1].first, "trf_blocks.0.att.W_key.weight");
  auto buffers = model.named_buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].first, "cos");
  EXPECT_EQ(buffers[1].first, "sin");
  EXPECT_EQ(model.cos.shape(), (Shape{16, 8}));
  auto att = model.trf_blocks->at<LlamaTransformerBlock>(1)->att;
  EXPECT_EQ(att->W_key->weight.shape(), (Shape{16, 32}));  // 2 key/value heads of 8
  EXPECT_EQ(att->group_size, 2);
  EXPECT_EQ(&model.config(), &model.cfg);
}

TEST(LlamaModel, InitMatchesTorchAfterManualSeed) {
  manual_seed(123);
  LlamaModel model(kSmall);
  for (const auto& [key, t] : model.state_dict())
    expect_close(t, fixture().get("param." + key), 1e-6, 1e-7, key);
  manual_seed(123);
  LlamaModel llama2(kLlama2Small);
  for (const auto& [key, t] : llama2.state_dict())
    expect_close(t, fixture().get("llama2.param." + key), 1e-6, 1e-7, "llama2." + key);
}

// ---------------------------------------------------------------- against torch
// Every element within `rel` of the tensor's largest magnitude: float32 sums of mixed signs
// leave an absolute error of the size of their terms, whatever the size of the result.
void expect_rel(const Tensor& actual, const Tensor& expected, double rel, const std::string& name) {
  expect_close(actual, expected, 0, rel * max(abs(expected)).item(), name);
}

TEST(LlamaModel, LogitsLossAndGradientsMatchTorch) {
  const Fixture& fx = fixture();
  auto model = model_from_fixture(kSmall);
  Tensor logits = (*model)(fx.get("in_idx"));
  EXPECT_EQ(logits.shape(), (Shape{2, 16, 64}));
  expect_rel(logits, fx.get("logits"), 1e-5, "logits");
  Tensor loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  expect_close(loss, fx.get("loss"), 1e-5, 0, "loss");
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    expect_rel(p.grad(), fx.get("grad." + name), 1e-5, "grad." + name);
  }
}

// Under autocast(kBFloat16) (torch.autocast("cpu", dtype=torch.bfloat16),
// gen_llama_autocast.py): the linear layers run in bfloat16, so RoPE and SwiGLU's product get
// bfloat16 queries, keys and activations; the logits are bfloat16, the loss float32, and the
// parameters and their gradients stay float32. torch's attention multiplies in bfloat16 where
// xgrad's fused kernel computes in float32, so the two agree to bfloat16's resolution only
// (measured: 0.4% of the largest logit, at most 0.93% of a gradient's largest element, about
// as far as the float32 run is from torch's autocast one); a wrong gradient is off by its
// own size. The bfloat16 arithmetic itself is pinned bit for bit by test_llama_ops_bf16.cpp.
TEST(LlamaModel, AutocastBFloat16MatchesTorch) {
  const Fixture& fx = fixture();
  static const Fixture ac = read_fixture(XGRAD_FIXTURES_DIR "/llama_autocast.txt");
  expect_close(ac.get("in_idx"), fx.get("in_idx"), 0, 0, "in_idx");
  expect_close(ac.get("targets"), fx.get("targets"), 0, 0, "targets");
  auto model = model_from_fixture(kSmall);
  Tensor logits, loss;
  {
    autocast guard(kBFloat16);
    logits = (*model)(fx.get("in_idx"));
    loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  }
  ASSERT_EQ(logits.dtype(), kBFloat16);
  ASSERT_EQ(loss.dtype(), kFloat32);
  expect_rel(logits.to(kFloat32), ac.get("autocast.logits"), 1e-2, "logits");
  expect_close(loss, ac.get("autocast.loss"), 2e-3, 0, "loss");
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_EQ(p.grad().dtype(), kFloat32) << name;
    expect_rel(p.grad(), ac.get("autocast.grad." + name), 2e-2, "grad." + name);
  }
}

// In float64 (the float32 weights and RoPE tables converted, as torch's model.double()): an
// AdamW step's first update is lr * g / (|g| + eps), about lr * sign(g), which float32 rounding
// decides for the gradient elements near 0 (see gen_llama_model.py). The RoPE tables are
// torch's: float32 cos/sin (cosf against torch's vectorised cos) may differ in the last bit,
// which float64 would see.
TEST(LlamaModel, AdamWStepMatchesTorchInFloat64) {
  const Fixture& fx = fixture();
  auto model = model_from_fixture(kSmall);
  expect_close(model->cos, fx.get("rope.cos"), 0, 2e-7, "rope.cos");  // the last bit of numbers <= 1
  expect_close(model->sin, fx.get("rope.sin"), 0, 2e-7, "rope.sin");
  {
    NoGradGuard g;
    model->cos.copy_(fx.get("rope.cos"));
    model->sin.copy_(fx.get("rope.sin"));
  }
  model->to(kFloat64);
  EXPECT_EQ(model->cos.dtype(), kFloat64);
  Tensor logits = (*model)(fx.get("in_idx"));
  expect_close(logits, fx.get("f64.logits"), 1e-12, 1e-13, "f64.logits");
  Tensor loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  expect_close(loss, fx.get("f64.loss"), 1e-12, 0, "f64.loss");
  loss.backward();
  optim::AdamW opt(model->parameters(), {.lr = 1e-2, .weight_decay = 0.1});
  opt.step();
  for (const auto& [name, p] : model->named_parameters())
    expect_close(p, fx.get("f64.step." + name), 1e-10, 1e-12, "f64.step." + name);
}

TEST(LlamaModel, TiedEmbeddingsMatchTorch) {
  const Fixture& fx = fixture();
  LlamaConfig cfg = kSmall;
  cfg.tie_weights = true;
  auto model = model_from_fixture(cfg);  // tok_emb.weight only: out_head.weight is the same tensor
  EXPECT_EQ(model->out_head->weight.unsafe_impl(), model->tok_emb->weight.unsafe_impl());
  EXPECT_EQ(model->num_parameters(), num_parameters(kSmall) - 64 * 32);
  EXPECT_EQ(num_parameters(cfg), model->num_parameters());
  Tensor logits = (*model)(fx.get("in_idx"));
  expect_rel(logits, fx.get("tied.logits"), 1e-5, "tied.logits");
  Tensor loss = cross_entropy(logits.flatten(0, 1), fx.get("targets").flatten());
  expect_close(loss, fx.get("tied.loss"), 1e-5, 0, "tied.loss");
  loss.backward();  // both uses of the one tensor
  expect_rel(model->tok_emb->weight.grad(), fx.get("tied.grad.tok_emb.weight"), 1e-5, "tied grad");
}

TEST(LlamaModel, Llama2ShapeMatchesTorch) {
  auto model = model_from_fixture(kLlama2Small, "llama2.param.");
  EXPECT_EQ(model->trf_blocks->at<LlamaTransformerBlock>(0)->att->group_size, 1);
  NoGradGuard g;
  expect_rel((*model)(fixture().get("in_idx")), fixture().get("llama2.logits"), 1e-5, "llama2.logits");
}

TEST(LlamaModel, GreedyGenerationMatchesTorch) {
  const Fixture& fx = fixture();
  auto model = model_from_fixture(kSmall);
  const Tensor prompt = fx.get("gen.prompt");
  const std::vector<int64_t> expected = fx.get("gen.ids").to_vector<int64_t>();  // 5 + 20 > 16 tokens
  GenerateOptions without_cache;
  without_cache.use_kv_cache = false;
  EXPECT_EQ(model->generate(prompt, 20).to_vector<int64_t>(), expected);
  EXPECT_EQ(model->generate(prompt, 20, without_cache).to_vector<int64_t>(), expected);
  EXPECT_EQ(model->generate(prompt, 10).to_vector<int64_t>(), fx.get("gen.cached_ids").to_vector<int64_t>());
  EXPECT_TRUE(model->is_training());  // the mode is restored
}

// ---------------------------------------------------------------- the KV cache
TEST(LlamaModel, CachedLogitsEqualTheFullRecomputeAlsoPastTheContext) {
  manual_seed(3);
  LlamaModel model(kSmall);
  Tensor prompt = tensor<int64_t>({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}});
  const int64_t n = 24;  // 5 + 24 tokens: the window slides past context_length 16
  for (double temperature : {0.0, 1.0}) {
    std::vector<Tensor> with, without;
    GenerateOptions o{.temperature = temperature};
    Generator gen_a(11), gen_b(11);
    Tensor ids_with =
        model.generate(prompt, n, o, gen_a, [&](const Tensor& l) { with.push_back(l.clone()); });
    o.use_kv_cache = false;
    Tensor ids_without =
        model.generate(prompt, n, o, gen_b, [&](const Tensor& l) { without.push_back(l.clone()); });
    ASSERT_EQ(with.size(), std::size_t(n));
    ASSERT_EQ(without.size(), std::size_t(n));
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, max_abs_diff(with[i], without[i]));
    EXPECT_LE(worst, 1e-5) << "temperature " << temperature;
    EXPECT_EQ(ids_with.to_vector<int64_t>(), ids_without.to_vector<int64_t>())
        << "temperature " << temperature;
  }
}

TEST(LlamaModel, CachedForwardInChunksEqualsForwardAndKeepsRotatedKeys) {
  manual_seed(4);
  LlamaModel model(kSmall);
  NoGradGuard g;
  Tensor ids = randint(0, 64, {2, 16});
  Tensor full = model(ids);
  KVCache cache;
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t len : {5, 1, 3, 1, 4, 2}) {  // a prefill, single tokens, and chunks after a cache
    parts.push_back(model.forward(ids.slice(1, at, at + len), cache));
    at += len;
    EXPECT_EQ(cache.size(), at);
  }
  EXPECT_LE(max_abs_diff(cat(parts, 1), full), 1e-5);

  // layer 0's cache holds its 2 key heads rotated at their positions 0 .. 15, and the values
  auto block = model.trf_blocks->at<LlamaTransformerBlock>(0);
  Tensor x = (*block->norm1)((*model.tok_emb)(ids));                              // (2, 16, 32)
  Tensor keys = (*block->att->W_key)(x).view({2, 16, 2, 8}).transpose(1, 2);      // (2, 2, 16, 8)
  Tensor values = (*block->att->W_value)(x).view({2, 16, 2, 8}).transpose(1, 2);  // (2, 2, 16, 8)
  EXPECT_EQ(cache.layers[0].keys.shape(), (Shape{2, 2, 16, 8}));
  EXPECT_LE(max_abs_diff(cache.layers[0].keys, apply_rope(keys, model.cos, model.sin)), 1e-6);
  EXPECT_LE(max_abs_diff(cache.layers[0].values, values), 1e-6);
  EXPECT_GT(max_abs_diff(cache.layers[0].keys, keys), 1e-2);  // and they are rotated

  expect_error([&] { model.forward(ids.slice(1, 0, 1), cache); },
               {"LlamaModel", "after 16 cached ones but context_length is 16", "reset the cache"});
  cache.reset();
  EXPECT_EQ(cache.size(), 0);
}

// ---------------------------------------------------------------- grouped-query attention
// GQA is multi-head attention whose query head h uses key/value head h / group_size: the same
// layer with num_kv_groups = num_heads and the key/value weights repeated per head agrees.
TEST(LlamaModel, GroupedQueryAttentionIsMultiHeadWithSharedKeyValueHeads) {
  manual_seed(5);
  const int64_t d = 24, heads = 6, groups = 2, head_dim = 4;
  GroupedQueryAttention gqa(d, d, heads, groups);
  GroupedQueryAttention mha(d, d, heads, heads);
  auto repeat_heads = [&](const Tensor& w) {  // (groups * head_dim, d) -> (heads * head_dim, d)
    return w.view({groups, head_dim, d}).repeat_interleave(heads / groups, 0).reshape({heads * head_dim, d});
  };
  StateDict sd;
  sd.insert("W_key.weight", repeat_heads(gqa.W_key->weight.detach()));
  sd.insert("W_value.weight", repeat_heads(gqa.W_value->weight.detach()));
  sd.insert("W_query.weight", gqa.W_query->weight.detach());
  sd.insert("out_proj.weight", gqa.out_proj->weight.detach());
  mha.load_state_dict(sd);
  RoPEParams rope = compute_rope_params(head_dim, 10'000.0, 8);
  Tensor x = randn({3, 7, d});
  expect_close(gqa.forward(x, rope.cos, rope.sin), mha.forward(x, rope.cos, rope.sin), 1e-5, 1e-6,
               "GQA vs MHA");
  expect_error([&] { GroupedQueryAttention(d, d, 6, 4); },
               {"GroupedQueryAttention", "num_heads (6) must be divisible by num_kv_groups (4)"});
  expect_error(
      [&] {
        gqa.forward(randn({3, 7, 5}), rope.cos, rope.sin);
      },
      {"GroupedQueryAttention", "(batch, num_tokens, 24)", "[3, 7, 5]"});
}

TEST(LlamaModel, GroupedQueryAttentionGradcheck) {
  manual_seed(6);
  GroupedQueryAttention att(8, 8, 4, 2);
  att.to(kFloat64);
  RoPEParams rope = compute_rope_params(2, 10'000.0, 8, std::nullopt, kFloat64);
  std::vector<Tensor> inputs{randn({2, 3, 8}, nullptr, kFloat64).requires_grad_()};
  for (const Tensor& p : att.parameters()) inputs.push_back(p);
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return att.forward(in[0], rope.cos, rope.sin); },
                     inputs, {.name = "GroupedQueryAttention"});
  EXPECT_TRUE(r.ok) << r.message;
}

// ---------------------------------------------------------------- Hugging Face checkpoints
TEST(LlamaModel, HuggingFaceCheckpointLoadsIntoTheSameLogits) {
  const Fixture& fx = fixture();
  auto reference = model_from_fixture(kSmall);
  LlamaModel model(kSmall);
  LoadResult r = load_hf_llama(model, XGRAD_FIXTURES_DIR "/llama_hf/model.safetensors");
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  NoGradGuard g;
  Tensor logits = model(fx.get("in_idx"));
  EXPECT_EQ(logits.to_vector<float>(), (*reference)(fx.get("in_idx")).to_vector<float>());  // same weights
  expect_rel(logits, fx.get("logits"), 1e-5, "logits from the Hugging Face file");
}

TEST(LlamaModel, HuggingFaceTiedCheckpoint) {
  const Fixture& fx = fixture();
  // the fixture's file without lm_head.weight: a checkpoint with tied embeddings (Llama 3.2)
  io::NamedTensors tensors = xgrad::load(XGRAD_FIXTURES_DIR "/llama_hf/model.safetensors").tensors;
  std::erase_if(tensors, [](const auto& kv) { return kv.first == "lm_head.weight"; });
  const auto path = std::filesystem::temp_directory_path() /
                    ("xgrad_llama_tied_" + std::to_string(::getpid()) + ".safetensors");
  xgrad::save(tensors, path);
  LlamaConfig tied_cfg = kSmall;
  tied_cfg.tie_weights = true;
  LlamaModel tied(tied_cfg), untied(kSmall);
  load_hf_llama(tied, path);
  load_hf_llama(untied, path);  // out_head.weight becomes a copy of the embeddings, as in the book
  std::filesystem::remove(path);
  EXPECT_EQ(untied.out_head->weight.to_vector<float>(), untied.tok_emb->weight.to_vector<float>());
  EXPECT_NE(untied.out_head->weight.unsafe_impl(), untied.tok_emb->weight.unsafe_impl());
  NoGradGuard g;
  expect_rel(tied(fx.get("in_idx")), fx.get("tied.logits"), 1e-5, "tied");
  expect_rel(untied(fx.get("in_idx")), fx.get("tied.logits"), 1e-5, "untied from a tied file");
  // a tied model cannot hold an lm_head that differs from the embeddings
  expect_error([&] { load_hf_llama(tied, XGRAD_FIXTURES_DIR "/llama_hf/model.safetensors"); },
               {"lm_head.weight differs from model.embed_tokens.weight", "tie_weights"});
}

TEST(LlamaModel, HuggingFaceShardedCheckpoint) {
  io::NamedTensors tensors = xgrad::load(XGRAD_FIXTURES_DIR "/llama_hf/model.safetensors").tensors;
  const std::size_t half = tensors.size() / 2;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = "xgrad_llama_" + std::to_string(::getpid());
  const std::vector<std::filesystem::path> shards{dir / (stem + "-00001-of-00002.safetensors"),
                                                  dir / (stem + "-00002-of-00002.safetensors")};
  xgrad::save(io::NamedTensors(tensors.begin(), tensors.begin() + half), shards[0]);
  xgrad::save(io::NamedTensors(tensors.begin() + half, tensors.end()), shards[1]);
  LlamaModel model(kSmall);
  expect_error([&] { load_hf_llama(model, shards[0]); }, {"Missing key(s)"});  // one shard is not enough
  load_hf_llama(model, shards);
  for (const auto& shard : shards) std::filesystem::remove(shard);
  auto reference = model_from_fixture(kSmall);
  NoGradGuard g;
  const Tensor ids = fixture().get("in_idx");
  EXPECT_EQ(model(ids).to_vector<float>(), (*reference)(ids).to_vector<float>());
}

TEST(LlamaModel, HuggingFaceNameMap) {
  EXPECT_EQ(hf_llama_name("model.embed_tokens.weight"), "tok_emb.weight");
  EXPECT_EQ(hf_llama_name("model.layers.11.self_attn.q_proj.weight"), "trf_blocks.11.att.W_query.weight");
  EXPECT_EQ(hf_llama_name("model.layers.0.self_attn.k_proj.weight"), "trf_blocks.0.att.W_key.weight");
  EXPECT_EQ(hf_llama_name("model.layers.0.self_attn.v_proj.weight"), "trf_blocks.0.att.W_value.weight");
  EXPECT_EQ(hf_llama_name("model.layers.0.self_attn.o_proj.weight"), "trf_blocks.0.att.out_proj.weight");
  EXPECT_EQ(hf_llama_name("model.layers.3.mlp.gate_proj.weight"), "trf_blocks.3.ff.fc1.weight");
  EXPECT_EQ(hf_llama_name("model.layers.3.mlp.up_proj.weight"), "trf_blocks.3.ff.fc2.weight");
  EXPECT_EQ(hf_llama_name("model.layers.3.mlp.down_proj.weight"), "trf_blocks.3.ff.fc3.weight");
  EXPECT_EQ(hf_llama_name("model.layers.2.input_layernorm.weight"), "trf_blocks.2.norm1.weight");
  EXPECT_EQ(hf_llama_name("model.layers.2.post_attention_layernorm.weight"), "trf_blocks.2.norm2.weight");
  EXPECT_EQ(hf_llama_name("model.norm.weight"), "final_norm.weight");
  EXPECT_EQ(hf_llama_name("lm_head.weight"), "out_head.weight");
  EXPECT_EQ(hf_llama_name("model.layers.0.self_attn.rotary_emb.inv_freq"), "");
  for (const char* bad :
       {"model.layers.x.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.bias", "transformer.wte.weight"})
    expect_error([&] { hf_llama_name(bad); }, {"hf_llama_name", bad});
  // a checkpoint for another shape is refused whole, naming the tensor
  LlamaConfig wider = kSmall;
  wider.hidden_dim = 96;
  LlamaModel model(wider);
  expect_error([&] { load_hf_llama(model, XGRAD_FIXTURES_DIR "/llama_hf/model.safetensors"); },
               {"size mismatch for trf_blocks.0.ff.fc1.weight"});
}

// ---------------------------------------------------------------- configs
TEST(LlamaModel, TheBooksParameterCounts) {
  // printed in the book's notebooks (converting-gpt-to-llama2, converting-llama2-to-llama3,
  // standalone-llama32: "Total number of unique parameters")
  EXPECT_EQ(num_parameters(LlamaConfig::llama2_7b()), 6'738'415'616);
  EXPECT_EQ(num_parameters(LlamaConfig::llama3_8b()), 8'030'261'248);
  EXPECT_EQ(num_parameters(LlamaConfig::llama31_8b()), 8'030'261'248);
  EXPECT_EQ(num_parameters(LlamaConfig::llama32_1b()), 1'235'814'400);
  EXPECT_EQ(num_parameters(LlamaConfig::llama32_3b()), 3'212'749'824);
  LlamaConfig untied = LlamaConfig::llama32_1b();
  untied.tie_weights = false;
  EXPECT_EQ(num_parameters(untied), 1'498'482'688);  // the book's "Total number of parameters"
  // and the count is the model's, for small shapes of every kind
  for (LlamaConfig cfg : {kSmall, kLlama2Small}) {
    for (bool tie : {false, true}) {
      cfg.tie_weights = tie;
      EXPECT_EQ(num_parameters(cfg), LlamaModel(cfg).num_parameters()) << tie;
    }
  }
  for (const LlamaConfig& cfg :
       {LlamaConfig::llama2_7b(), LlamaConfig::llama3_8b(), LlamaConfig::llama31_8b(),
        LlamaConfig::llama32_1b(), LlamaConfig::llama32_3b()})
    EXPECT_EQ(config_problem(cfg), "");
  EXPECT_EQ(LlamaConfig{}, LlamaConfig::llama32_1b());
  EXPECT_FALSE(LlamaConfig::llama3_8b().rope_freq_config().has_value());
  EXPECT_EQ(LlamaConfig::llama31_8b().rope_freq_config()->factor, 8.0);
}

TEST(LlamaModel, ConfigErrorsNameTheField) {
  auto problem = [](auto change) {
    LlamaConfig cfg = kSmall;
    change(cfg);
    return config_problem(cfg);
  };
  EXPECT_EQ(problem([](LlamaConfig&) {}), "");
  EXPECT_EQ(problem([](LlamaConfig& c) { c.n_kv_groups = 0; }), "n_kv_groups must be in [1, 65536], got 0");
  EXPECT_EQ(problem([](LlamaConfig& c) { c.emb_dim = 30; }),
            "emb_dim 30 is not divisible by n_heads 4 (each head gets emb_dim / n_heads features)");
  EXPECT_EQ(problem([](LlamaConfig& c) { c.emb_dim = 36; }),
            "the head size emb_dim / n_heads = 9 is odd (rotary embeddings rotate pairs of features)");
  EXPECT_EQ(
      problem([](LlamaConfig& c) { c.n_kv_groups = 3; }),
      "n_heads 4 is not divisible by n_kv_groups 3 (each key/value head serves n_heads / n_kv_groups query "
      "heads)");
  EXPECT_EQ(
      problem([](LlamaConfig& c) { c.rope_low_freq_factor = 4; }),
      "with rope_freq, rope_low_freq_factor must be positive and below rope_high_freq_factor, got 4 and 4");
  EXPECT_EQ(problem([](LlamaConfig& c) {
              c.rope_low_freq_factor = 4;
              c.rope_freq = false;
            }),
            "");  // the scaling's numbers matter only with rope_freq
  EXPECT_EQ(problem([](LlamaConfig& c) { c.rope_base = 0; }),
            "rope_base must be in [1, 1000000000000], got 0");
  LlamaConfig bad = kSmall;
  bad.n_kv_groups = 3;
  expect_error([&] { LlamaModel model(bad); }, {"LlamaModel: n_heads 4 is not divisible by n_kv_groups 3"});
  EXPECT_EQ(config_problem(bad, [](const char* f) { return "--" + std::string(f); }).substr(0, 10),
            "--n_heads ");
  std::vector<std::string> names;
  LlamaConfig::for_each_field([&](const auto& f) { names.push_back(f.name); });
  EXPECT_EQ(names.size(), 14u);
  EXPECT_EQ(names.front(), "vocab_size");
  EXPECT_EQ(names.back(), "tie_weights");
}

TEST(LlamaModel, ClearErrors) {
  LlamaModel model(kSmall);
  expect_error([&] { model(zeros({1, 17}, kInt64)); }, {"LlamaModel", "17 tokens", "context_length is 16"});
  expect_error([&] { model(tensor({{0, 64}})); }, {"index 64 is out of range for num_embeddings 64"});
  expect_error([&] { model(tensor({0, 1})); }, {"LlamaModel", "int64 tensor of shape (batch, num_tokens)"});
  expect_error([&] { model(zeros({1, 2})); }, {"LlamaModel", "float32"});
  expect_error([&] { model.generate(tensor<int64_t>({{1}}), -1); },
               {"generate", "max_new_tokens must be >= 0"});
}

}  // namespace
}  // namespace xgrad::nn
