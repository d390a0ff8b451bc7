// nn/src/transformer.cpp: GPTConfig's validation (its ranges are the field table in
// transformer.h), FeedForward and TransformerBlock.
// reference: rasbt/LLMs-from-scratch, ch04/01_main-chapter-code/gpt.py
#include "xgrad/nn/transformer.h"

#include <sstream>

#include "xgrad/ops.h"

namespace xgrad::nn {

std::string config_problem(const GPTConfig& cfg, const std::function<std::string(const char*)>& name) {
  auto spell = [&](const char* field) { return name ? name(field) : std::string(field); };
  std::ostringstream os;
  os.precision(17);
  GPTConfig::for_each_field([&](const auto& f) {
    const double v = static_cast<double>(cfg.*f.member);
    if (os.tellp() == 0 && !(v >= f.min && v <= f.max))
      os << spell(f.name) << " must be in [" << f.min << ", " << f.max << "], got " << cfg.*f.member;
  });
  if (os.tellp() == 0 && cfg.emb_dim % cfg.n_heads != 0)
    os << spell("emb_dim") << " " << cfg.emb_dim << " is not divisible by " << spell("n_heads") << " "
       << cfg.n_heads << " (each head gets emb_dim / n_heads features)";
  return os.str();
}

void validate(const GPTConfig& cfg, const char* who) {
  const std::string problem = config_problem(cfg);
  if (!problem.empty()) fail(who, problem);
}

// ---------------------------------------------------------------- FeedForward
FeedForward::FeedForward(const GPTConfig& cfg) {
  validate(cfg, "FeedForward");
  // built one by one: the two Linears draw their init in this order, as in torch
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Linear>(cfg.emb_dim, 4 * cfg.emb_dim));
  seq->push_back(std::make_shared<GELU>("tanh"));
  seq->push_back(std::make_shared<Linear>(4 * cfg.emb_dim, cfg.emb_dim));
  layers = register_module("layers", seq);
}

Tensor FeedForward::forward(const Tensor& x) {
  return layers(x);  // (b, T, emb) -> (b, T, 4 emb) -> (b, T, emb)
}

// ---------------------------------------------------------------- TransformerBlock
TransformerBlock::TransformerBlock(const GPTConfig& cfg) {
  validate(cfg, "TransformerBlock");
  att = register_module(
      "att", std::make_shared<MultiHeadAttention>(
                 /*d_in=*/cfg.emb_dim, /*d_out=*/cfg.emb_dim, /*context_length=*/cfg.context_length,
                 /*dropout=*/cfg.drop_rate, /*num_heads=*/cfg.n_heads, /*qkv_bias=*/cfg.qkv_bias));
  ff = register_module("ff", std::make_shared<FeedForward>(cfg));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(cfg.emb_dim));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(cfg.emb_dim));
  drop_shortcut = register_module("drop_shortcut", std::make_shared<Dropout>(cfg.drop_rate));
}

Tensor TransformerBlock::forward(const Tensor& x_in) {
  // shortcut connection around attention: (b, T, emb) throughout
  Tensor shortcut = x_in;
  Tensor x = norm1(x_in);
  x = att(x);
  x = drop_shortcut(x);
  x = x + shortcut;

  // shortcut connection around the feed-forward network
  shortcut = x;
  x = norm2(x);
  x = ff(x);
  x = drop_shortcut(x);
  return x + shortcut;
}

Tensor TransformerBlock::forward(const Tensor& x_in, LayerKVCache& cache) {
  Tensor x = x_in + drop_shortcut(att->forward(norm1(x_in), cache));  // as forward(x), with
  return x + drop_shortcut(ff(norm2(x)));                             // att's cache
}

}  // namespace xgrad::nn
