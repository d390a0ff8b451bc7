// seed003_wrapper_context_vectors: notebook 003 (Vietnamese; a multi-head attention wrapper
// whose CausalAttention prints every head's context vectors) re-run with xgrad.
//
// The notebook's CausalAttention prints inside forward(), so it is written here with xgrad's
// Module API, line for line like the Python (the notebook's comments translated); the wrapper
// is the notebook's too, as it holds these heads. Cell 13 seeds 123 and runs two heads of
// dim_out 2; cell 16 builds a second wrapper (dim_out 1) without reseeding, so its weights are
// the next draws of the same stream, as in torch.
//
// The notebook's printout of cell 13's merged tensor (and both shape lines) is cut short; the
// four rows it shows are checked, everything else it printed is checked in full. Its final
// MultiHeadAttention class is never run in the notebook (and `self.dim_out = dim_out,` there
// makes a tuple that view() would reject): xgrad's nn::MultiHeadAttention is that class.
//
//   build/examples/seeds/seed003_wrapper_context_vectors
#include <xgrad/xgrad.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <vector>

#include "check.h"

using namespace xgrad;

// In [None]: uses the CausalAttention implemented in the previous part
class CausalAttention : public nn::Module {
 public:
  CausalAttention(int64_t dim_in, int64_t dim_out, int64_t context_length, double dropout,
                  bool qkv_bias = false)
      : dim_out(dim_out) {
    W_query = register_module("W_query", std::make_shared<nn::Linear>(dim_in, dim_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<nn::Linear>(dim_in, dim_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<nn::Linear>(dim_in, dim_out, qkv_bias));
    this->dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout));
    mask = register_buffer(  // registers a tensor that is not a parameter of the model
        "mask", triu(ones({context_length, context_length}), 1));
  }

  Tensor forward(const Tensor& x) override {
    auto [b, num_tokens, dim_in] = x.shape3();

    // Q, K, V have shape (batch_size, context_length, dim_out)
    Tensor keys = (*W_key)(x);
    Tensor queries = (*W_query)(x);
    Tensor values = (*W_value)(x);

    // keys.transpose(1, 2) turns (B, T, D) into (B, D, T)
    Tensor attention_scores = matmul(queries, keys.transpose(1, 2));
    // [:num_tokens, :num_tokens] -- slice the mask to the current number of tokens
    attention_scores.masked_fill_(mask.to(kBool).slice(0, 0, num_tokens).slice(1, 0, num_tokens), -INFINITY);

    Tensor attention_weights = softmax(attention_scores / std::pow(keys.size(-1), 0.5), -1);
    attention_weights = (*dropout)(attention_weights);

    Tensor context_vectors = matmul(attention_weights, values);

    std::cout << "Context vector:\n";
    std::cout << context_vectors << "\n";

    return context_vectors;
  }

  int64_t dim_out;
  std::shared_ptr<nn::Linear> W_query, W_key, W_value;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

// In [4]: the wrapper class implementing multi-head attention
class MultiHeadAttentionWrapper : public nn::Module {
 public:
  MultiHeadAttentionWrapper(int64_t dim_in, int64_t dim_out, int64_t context_length, double dropout,
                            int64_t num_heads, bool qkv_bias = false) {
    (void)qkv_bias;  // the notebook does not pass it on either
    heads = register_module("heads", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < num_heads; ++i)
      heads->push_back(std::make_shared<CausalAttention>(dim_in, dim_out, context_length, dropout));
  }

  Tensor forward(const Tensor& x) override {
    // dim=-1 concatenates on the last dim, since each head outputs (batch_size, num_tokens,
    // dim_out); dim_out is the size of each context vector
    std::vector<Tensor> outputs;
    for (const auto& head : *heads) outputs.push_back((*head)(x));
    return cat(outputs, -1);
  }

  std::shared_ptr<nn::ModuleList> heads;
};

int main() {
  seeds::Checker check("seed003_wrapper_context_vectors");

  // In [13]
  manual_seed(123);
  Tensor inputs = tensor({{0.43, 0.15, 0.89},    // Your (x^1)
                          {0.55, 0.87, 0.66},    // journey (x^2)
                          {0.57, 0.85, 0.64},    // starts (x^3)
                          {0.22, 0.58, 0.33},    // with (x^4)
                          {0.77, 0.25, 0.10},    // one (x^5)
                          {0.05, 0.80, 0.55}});  // step (x^6)
  Tensor batch = stack({inputs, inputs}, 0);     // batch size = 2
  int64_t context_length = batch.size(1);        // num_tokens
  int64_t dim_in = batch.size(2), dim_out = 2;
  auto multi_head_attn = std::make_shared<MultiHeadAttentionWrapper>(dim_in, dim_out, context_length,
                                                                     /*dropout=*/0.0, /*num_heads=*/2);
  Tensor context_vectors = (*multi_head_attn)(batch);

  std::cout << "\nMerged context vector:\n";
  std::cout << context_vectors << "\n";
  std::cout << "context_vectors.shape: " << seeds::size_str(context_vectors.shape())
            << " -- (batch_size, context_length / num_tokens, dim_out * num_heads)\n\n";

  // each head printed its own context vectors: they are the slices of the merged tensor
  check.tensor("head 0 context vector", context_vectors.slice(2, 0, 2), {2, 6, 2},
               {-0.4519, 0.2216,  -0.5874, 0.0058,  -0.6300, -0.0632,
                -0.5675, -0.0843, -0.5526, -0.0981, -0.5299, -0.1081,

                -0.4519, 0.2216,  -0.5874, 0.0058,  -0.6300, -0.0632,
                -0.5675, -0.0843, -0.5526, -0.0981, -0.5299, -0.1081});
  check.tensor(
      "head 1 context vector", context_vectors.slice(2, 2, 4), {2, 6, 2},
      {0.4772, 0.1063, 0.5891, 0.3257, 0.6202, 0.3860, 0.5478, 0.3589, 0.5321, 0.3428, 0.5077, 0.3493,

       0.4772, 0.1063, 0.5891, 0.3257, 0.6202, 0.3860, 0.5478, 0.3589, 0.5321, 0.3428, 0.5077, 0.3493});
  // the notebook's printout stops in the fifth row: check the four rows it shows
  check.tensor("merged context vector (first 4 rows)", context_vectors[0].slice(0, 0, 4), {4, 4},
               {-0.4519, 0.2216, 0.4772, 0.1063, -0.5874, 0.0058, 0.5891, 0.3257, -0.6300, -0.0632, 0.6202,
                0.3860, -0.5675, -0.0843, 0.5478, 0.3589});
  check.shape("context_vectors.shape", context_vectors, {2, 6, 4});

  // In [16]: same num_heads, now a merged context vector of 2 dims instead of 4
  dim_out = 1;
  multi_head_attn = std::make_shared<MultiHeadAttentionWrapper>(dim_in, dim_out, context_length,
                                                                /*dropout=*/0.0, /*num_heads=*/2);
  context_vectors = (*multi_head_attn)(batch);

  std::cout << "\nMerged context vector:\n";
  std::cout << context_vectors << "\n";
  std::cout << "context_vectors.shape: " << seeds::size_str(context_vectors.shape())
            << " -- (batch_size, context_length / num_tokens, dim_out * num_heads)\n";

  check.tensor(
      "head 0 context vector (dim_out 1)", context_vectors.slice(2, 0, 1), {2, 6, 1},
      {0.0189, 0.2181, 0.2804, 0.2830, 0.2476, 0.2748, 0.0189, 0.2181, 0.2804, 0.2830, 0.2476, 0.2748});
  check.tensor(
      "head 1 context vector (dim_out 1)", context_vectors.slice(2, 1, 2), {2, 6, 1},
      {0.2729, 0.3037, 0.3125, 0.2793, 0.2541, 0.2513, 0.2729, 0.3037, 0.3125, 0.2793, 0.2541, 0.2513});
  check.tensor(
      "merged context vector (dim_out 1)", context_vectors, {2, 6, 2},
      {0.0189, 0.2729, 0.2181, 0.3037, 0.2804, 0.3125, 0.2830, 0.2793, 0.2476, 0.2541, 0.2748, 0.2513,

       0.0189, 0.2729, 0.2181, 0.3037, 0.2804, 0.3125, 0.2830, 0.2793, 0.2476, 0.2541, 0.2748, 0.2513});

  return check.finish();
}
