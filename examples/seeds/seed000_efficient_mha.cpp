// seed000_efficient_mha: notebook 000 ("a comparatively efficient implementation of a
// multihead attention class with dropout") re-run with xgrad on the notebook's full batch,
// torch.randn(8, 1024, 800), with d_out 400 and 2 heads.
//
// The notebook's MultiHeadAttention prints shapes inside forward(), so it is written here with
// xgrad's Module API, line for line like the Python (comments shortened). The notebook never
// seeds the generator, so its printed values cannot be reproduced by anyone; what it printed
// and this program checks are the shapes: W_key.weight (400, 800), keys (8, 1024, 400), keys
// split into heads (8, 1024, 2, 200), and the output (8, 1024, 400). In their place the values
// are checked another way: xgrad's nn::MultiHeadAttention (the same class, minus the prints),
// built after the same seed, must give the same output. The program prints how long the full
// forward took.
//
//   build/examples/seeds/seed000_efficient_mha
#include <xgrad/xgrad.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "check.h"

using namespace xgrad;

class MultiHeadAttention : public nn::Module {
 public:
  MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double dropout, int64_t num_heads,
                     bool qkv_bias = false)
      : d_in(d_in), d_out(d_out), num_heads(num_heads) {
    // the number of dimensions per head
    head_dim = this->d_out / this->num_heads;
    W_query = register_module("W_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_key = register_module("W_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    W_value = register_module("W_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias));
    out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_out, d_out));
    this->dropout = register_module("dropout", std::make_shared<nn::Dropout>(dropout));
    mask = register_buffer("mask", triu(ones({context_length, context_length}), 1));
  }

  Tensor forward(const Tensor& x) override {
    auto [b, num_tokens, d_in] = x.shape3();

    std::cout << "W_key weight shape: " << seeds::size_str(W_key->weight.shape()) << "\n";
    Tensor keys = (*W_key)(x);
    Tensor queries = (*W_query)(x);
    Tensor values = (*W_value)(x);

    std::cout << "keys.shape: " << seeds::size_str(keys.shape()) << "\n";

    keys = keys.view({b, num_tokens, num_heads, head_dim});
    queries = queries.view({b, num_tokens, num_heads, head_dim});
    values = values.view({b, num_tokens, num_heads, head_dim});

    std::cout << "keys.shape after splitting into heads: " << seeds::size_str(keys.shape()) << "\n";

    // [b, num_tokens, num_heads, head_dim] -> [b, num_heads, num_tokens, head_dim]:
    // batches -> heads -> tokens -> embedded vectors
    keys = keys.transpose(1, 2);
    queries = queries.transpose(1, 2);
    values = values.transpose(1, 2);

    Tensor attn_scores = matmul(queries, keys.transpose(2, 3));

    Tensor mask_bool = mask.to(kBool).slice(0, 0, num_tokens).slice(1, 0, num_tokens);

    attn_scores.masked_fill_(mask_bool, -INFINITY);

    // scaled dot product
    Tensor attn_weights = softmax(attn_scores / std::pow(keys.size(-1), 0.5), -1);

    // apply the dropout if there is one specified
    attn_weights = (*dropout)(attn_weights);

    // calculate the context vectors
    Tensor context_vectors = matmul(attn_weights, values);

    // back to (b, tokens, heads, vectors), then (b, tokens, vectors): the heads "combined"
    context_vectors = context_vectors.transpose(1, 2);
    context_vectors = context_vectors.contiguous().view({b, num_tokens, this->d_out});

    // a linear projection that will be useful when this class is used in training
    context_vectors = (*out_proj)(context_vectors);

    return context_vectors;
  }

  int64_t d_in, d_out, num_heads, head_dim;
  std::shared_ptr<nn::Linear> W_query, W_key, W_value, out_proj;
  std::shared_ptr<nn::Dropout> dropout;
  Tensor mask;
};

int main() {
  seeds::Checker check("seed000_efficient_mha");
  using clock = std::chrono::steady_clock;

  // In [59]: batch size, context length, number of embedded dimensions
  Tensor batch = randn({8, 1024, 800});
  const int64_t d_in = batch.size(2);  // the input embedding size
  const int64_t d_out = 400;           // the output embedding size
  std::cout << seeds::size_str(batch.shape()) << "\n\n";
  check.shape("batch.shape", batch, {8, 1024, 800});

  // In [60]
  manual_seed(123);  // (not in the notebook: lets the library class below draw the same weights)
  auto mha = std::make_shared<MultiHeadAttention>(d_in, d_out, batch.size(1), 0, 2);
  const auto start = clock::now();
  Tensor context_vecs = (*mha)(batch);
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  std::cout << "\n" << context_vecs << "\n";
  std::cout << "forward of (8, 1024, 800) took " << seconds << " s\n";
  check.shape("W_key weight shape", mha->W_key->weight, {400, 800});
  check.shape("context_vecs.shape", context_vecs, {8, 1024, 400});
  // keys.shape and the split shape are printed by forward(); view() would have thrown on any
  // other size

  // The library's MultiHeadAttention, built after the same seed, computes the same thing. To
  // keep the run short it sees the first 2 sequences cut to 128 tokens: with a causal mask,
  // token t only attends to tokens <= t, so that is exactly context_vecs[:2, :128].
  manual_seed(123);
  nn::MultiHeadAttention library_mha(d_in, d_out, batch.size(1), 0.0, 2);
  {
    NoGradGuard no_grad;
    Tensor short_batch = batch.slice(0, 0, 2).slice(1, 0, 128);  // (2, 128, 800)
    check.is_true(
        "nn::MultiHeadAttention(batch[:2, :128]) == context_vecs[:2, :128]",
        seeds::allclose(library_mha(short_batch), context_vecs.slice(0, 0, 2).slice(1, 0, 128), 1e-4, 1e-5));
  }

  return check.finish();
}
