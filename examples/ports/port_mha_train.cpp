// port_mha_train: tests/fixtures/gen_port_mha_train.py ported by hand, line for line: the
// seeds' multi-head attention (scores and context with einsum), a tiny language model around
// it, three AdamW steps (two param groups over constructor-level defaults) on
// F.cross_entropy of flattened logits with label smoothing and an ignored target, then a
// greedy next token with banned tokens set to -inf by index_put_. Every number it prints is
// checked against the torch run (tests/fixtures/port_mha_train.txt, port_check.h).
//
// What changed from the Python is only C++'s syntax: self.x -> x, a constructor argument
// list for each module, -torch.inf -> -INFINITY, x.shape[-1] -> x.size(-1), a tuple of index
// tensors -> a braced list, keyword arguments -> an options struct in torch's order.
//
//   build/examples/ports/port_mha_train
#include <xgrad/xgrad.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "port_check.h"

using namespace xgrad;
namespace F = xgrad;  // torch.nn.functional's names are xgrad's free functions

// ---------------------------------------------------------------- the page

class MultiHeadAttention : public nn::Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                     bool qkv_bias = false)
      : d_out(d_out), num_heads(num_heads), head_dim(d_out / num_heads) {
    if (d_out % num_heads != 0) fail("MultiHeadAttention", "d_out must be divisible by num_heads");
    W_query = register_module("W_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_out, d_out));
    this->dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout));
    mask = register_buffer("mask", triu(ones({context_length, context_length}), 1));
  }

  Tensor forward(const Tensor& x) override {
    auto [b, num_tokens, d_in] = x.shape3();
    Tensor keys = (*W_key)(x).view(b, num_tokens, num_heads, head_dim).transpose(1, 2);
    Tensor queries = (*W_query)(x).view(b, num_tokens, num_heads, head_dim).transpose(1, 2);
    Tensor values = (*W_value)(x).view(b, num_tokens, num_heads, head_dim).transpose(1, 2);

    Tensor attn_scores = einsum("bhqd,bhkd->bhqk", queries, keys);
    Tensor mask_bool = mask.to(kBool).slice(0, 0, num_tokens).slice(1, 0, num_tokens);
    attn_scores.masked_fill_(mask_bool, -INFINITY);
    Tensor attn_weights = softmax(attn_scores / std::pow(keys.size(-1), 0.5), -1);
    attn_weights = (*dropout)(attn_weights);

    Tensor context_vec = einsum("bhqk,bhkd->bhqd", attn_weights, values).transpose(1, 2);
    context_vec = context_vec.contiguous().view(b, num_tokens, d_out);
    return (*out_proj)(context_vec);
  }

  int64_t d_out, num_heads, head_dim;
  std::shared_ptr<nn::Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

class TinyLM : public nn::Module {
 public:
  TinyLM(int64_t vocab_size, int64_t emb_dim, int64_t context_length, int64_t num_heads) {
    tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(vocab_size, emb_dim));
    att = register_module(
        "att", std::make_shared<MultiHeadAttention>(emb_dim, emb_dim, context_length, 0.0, num_heads));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(emb_dim));
    out_head = register_module("out_head", std::make_shared<nn::Linear>(emb_dim, vocab_size, false));
  }

  Tensor forward(const Tensor& idx) override {
    Tensor x = (*tok_emb)(idx);
    x = x + (*att)(x);
    return (*out_head)((*norm)(x));
  }

  std::shared_ptr<nn::Embedding> tok_emb;
  std::shared_ptr<MultiHeadAttention> att;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> out_head;
};

template <class Record>
void page(Record record) {
  manual_seed(123);
  const int64_t vocab_size = 11, emb_dim = 8, context_length = 6, num_heads = 2;
  auto model = std::make_shared<TinyLM>(vocab_size, emb_dim, context_length, num_heads);

  std::vector<Tensor> decay, no_decay;
  for (auto& [n, p] : model->named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  optim::AdamW optimizer({{decay}, {no_decay, {.weight_decay = 0.0}}}, {.lr = 0.01, .weight_decay = 0.1});

  for (int step = 0; step < 3; ++step) {
    Tensor inputs = randint(0, vocab_size, {2, context_length});
    Tensor targets = randint(0, vocab_size, {2, context_length});
    targets[0][0].fill_(-100);  // an ignored position
    Tensor logits = (*model)(inputs);
    Tensor loss = F::cross_entropy(logits.flatten(0, 1), targets.flatten(), {.label_smoothing = 0.1});
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    std::printf("step %d: loss %.6f\n", step, loss.item());
    record("loss." + std::to_string(step), loss);
  }
  record("out_head.weight", model->out_head->weight);
  record("att.out_proj.bias", model->att->out_proj->bias);

  Tensor probs, next_token;
  {
    NoGradGuard no_grad;
    Tensor idx = tensor({{1, 2, 3, 4}});
    Tensor logits = (*model)(idx).select(1, -1);  // [:, -1, :] -> (1, vocab_size)
    Tensor banned = tensor({0, 5});
    logits.index_put_({zeros_like(banned), banned}, scalar_tensor(-INFINITY));
    probs = softmax(logits, -1);
    next_token = argmax(probs, -1, true);
  }
  std::cout << "probs " << probs << "\n";
  std::cout << "next token " << static_cast<int64_t>(next_token.item()) << "\n";
  record("probs", probs);
  record("next_token", next_token);
}

int main() {
  ports::Checker check("port_mha_train", XGRAD_PORTS_FIXTURES "/port_mha_train.txt");
  page([&](const std::string& name, const Tensor& t) { check.close(name, t); });
  return check.finish();
}
