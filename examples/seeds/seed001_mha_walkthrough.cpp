// seed001_mha_walkthrough: notebook 001 ("Multihead attention wrapper", then "Simple example
// of multihead attention" on "The cat sleeps") re-run with xgrad, cell by cell.
//
// The notebook's CausalAttention and MultiHeadAttentionWrapper are xgrad's nn classes (its
// W_q/W_k/W_v are xgrad's W_query/W_key/W_value, created in the same order), so this program
// uses the library ones. Its MultiHeadAttention class is defined but never run in the notebook.
// The walkthrough's `W_query = nn.Linear(6, 6)` cells take no fresh seed: their weights are the
// next draws after the wrapper of cell 5, and come out the same here because both libraries
// draw from the same stream in the same order.
//
// Every printed tensor is checked against the numbers the notebook printed (see check.h);
// the notebook's W_key printout is cut after the weight, so W_key.bias and W_value are
// printed but not checked.
//
//   build/examples/seeds/seed001_mha_walkthrough
#include <xgrad/xgrad.h>

#include <cmath>
#include <iostream>

#include "check.h"

using namespace xgrad;
using seeds::inf;
using seeds::kSci;

int main() {
  seeds::Checker check("seed001_mha_walkthrough");

  // In [3]
  Tensor inputs = tensor({{0.43, 0.15, 0.89},    // Your     (x^1)
                          {0.55, 0.87, 0.66},    // journey  (x^2)
                          {0.57, 0.85, 0.64},    // starts   (x^3)
                          {0.22, 0.58, 0.33},    // with     (x^4)
                          {0.77, 0.25, 0.10},    // one      (x^5)
                          {0.05, 0.80, 0.55}});  // step     (x^6)
  Tensor batch = stack({inputs, inputs}, 0);

  // In [5]: test the wrapper
  manual_seed(123);
  const int64_t context_length = batch.size(1);  // number of tokens
  const int64_t dimension_inputs = 3;
  const int64_t dimension_outputs = 2;
  auto oMultiHeadAttention = std::make_shared<nn::MultiHeadAttentionWrapper>(
      dimension_inputs, dimension_outputs, context_length, /*dropout=*/0.0, /*num_heads=*/2);
  Tensor context_vectors = (*oMultiHeadAttention)(batch);
  std::cout << context_vectors << "\n";
  check.tensor(
      "wrapper context_vectors", context_vectors, {2, 6, 4},
      {-0.4519, 0.2216,  0.4772, 0.1063, -0.5874, 0.0058,  0.5891, 0.3257, -0.6300, -0.0632, 0.6202, 0.3860,
       -0.5675, -0.0843, 0.5478, 0.3589, -0.5526, -0.0981, 0.5321, 0.3428, -0.5299, -0.1081, 0.5077, 0.3493,

       -0.4519, 0.2216,  0.4772, 0.1063, -0.5874, 0.0058,  0.5891, 0.3257, -0.6300, -0.0632, 0.6202, 0.3860,
       -0.5675, -0.0843, 0.5478, 0.3589, -0.5526, -0.0981, 0.5321, 0.3428, -0.5299, -0.1081, 0.5077, 0.3493});

  // In [6]
  std::cout << seeds::size_str(context_vectors.shape()) << "\n\n";
  check.shape("context_vectors.shape", context_vectors, {2, 6, 4});

  // ---- Simple example of multihead attention
  // In [8]: step 1, the inputs: 1 batch of 3 tokens in 6 dimensions
  Tensor x = tensor({{{1.0, 2.0, 3.0, 4.0, 5.0, 6.0},     // The
                      {6.0, 5.0, 4.0, 3.0, 2.0, 1.0},     // cat
                      {1.0, 1.0, 1.0, 1.0, 1.0, 1.0}}});  // sleeps

  // In [9]: step 3, the trainable weights (no new seed: the stream goes on from cell 5)
  auto W_query = std::make_shared<nn::Linear>(6, 6);
  auto W_key = std::make_shared<nn::Linear>(6, 6);
  auto W_value = std::make_shared<nn::Linear>(6, 6);
  std::cout << *W_query << "\n" << *W_key << "\n" << *W_value << "\n\n";
  check.is_true("print(W_query)", W_query->repr() == "Linear(in_features=6, out_features=6, bias=True)");

  // In [10]
  std::cout << "W_query weights:\n Parameter containing:\n" << W_query->weight << "\n";
  std::cout << "W_query bias:\n Parameter containing:\n" << W_query->bias << "\n";
  std::cout << "\nW_key weights:\n Parameter containing:\n" << W_key->weight << "\n";
  std::cout << "W_key bias:\n Parameter containing:\n" << W_key->bias << "\n";
  std::cout << "\nW_value weights:\n Parameter containing:\n" << W_value->weight << "\n";
  std::cout << "W_value bias:\n Parameter containing:\n" << W_value->bias << "\n\n";
  check.tensor("W_query.weight", W_query->weight, {6, 6},
               {-0.3453, -0.1171, -0.2875, 0.0270,  -0.0762, -0.2190, -0.0371, 0.3868, -0.0322,
                0.0130,  -0.0637, 0.0642,  0.3638,  0.2496,  0.1449,  0.0887,  0.0963, 0.1577,
                -0.0528, -0.3794, -0.2525, 0.3485,  0.0244,  -0.3307, 0.0644,  0.3373, -0.3858,
                -0.2748, -0.1626, 0.0164,  -0.0952, -0.0449, -0.3980, 0.1912,  0.3583, 0.2495});
  check.tensor("W_query.bias", W_query->bias, {6}, {-0.2891, -0.3291, 0.1695, 0.0092, 0.1674, -0.3989});
  check.tensor("W_key.weight", W_key->weight, {6, 6},
               {-0.0243, 0.2879, 0.1894, 0.0149,  0.0803,  -0.0387, -0.2245, -0.1543, -0.2486,
                0.3391,  0.2247, 0.1428, -0.3131, 0.3150,  0.1280,  0.2824,  -0.1606, 0.0865,
                0.3986,  0.2746, 0.3274, -0.0857, 0.3110,  -0.3198, 0.0353,  -0.2299, -0.0952,
                -0.1046, 0.0305, 0.3716, 0.2021,  -0.0017, 0.2898,  -0.2092, 0.2104,  -0.0379});

  // In [11]: step 4, keys, queries and values, (1, 3, 6)
  Tensor Keys = (*W_key)(x);
  std::cout << "Keys:\n " << Keys << "\n";
  Tensor Queries = (*W_query)(x);
  std::cout << "\nQueries:\n " << Queries << "\n";
  Tensor Values = (*W_value)(x);
  std::cout << "\nValues:\n " << Values << "\n\n";
  check.tensor("Keys", Keys, {1, 3, 6},
               {1.2777, 2.1052, 1.2342, 1.2710, 1.3911, 1.4051, 2.1467, -1.4555, 0.5085, 5.1667, -1.0620,
                2.4676, 0.4384, 0.1270, 0.0256, 0.9534, 0.1451, 0.8025});
  check.tensor("Queries", Queries, {1, 3, 6},
               {-3.3182e+00, 4.2931e-01, 3.2498e+00, -2.0282e+00, -2.0650e+00, 2.2758e+00, -4.3869e+00,
                1.2290e+00, 4.7963e+00, -2.4509e+00, -4.3620e-01, -1.2468e+00, -1.3072e+00, 1.8372e-03,
                1.2705e+00, -6.3332e-01, -2.3778e-01, -1.3795e-01},
               kSci);
  check.tensor("Values", Values, {1, 3, 6},
               {1.1584, 1.9865, -1.2399, 2.4898, -4.1935, 3.7342, 1.3962, 3.1158, -2.7011, 0.1129, -2.2644,
                -0.2995, 0.1818, 0.7535, -0.8222, 0.5391, -0.8618, 0.7727});

  // In [12]-[13]: step 5, unroll the last dim into (num_heads, head_dimension):
  // (1, 3, 6) -> (1, 3, 2, 3)
  Tensor reshaped_queries = Queries.view({1, 3, 2, 3});
  Tensor reshaped_keys = Keys.view({1, 3, 2, 3});
  Tensor reshaped_values = Values.view({1, 3, 2, 3});
  std::cout << "Reshaped queries:\n " << reshaped_queries << "\n";
  std::cout << "\nReshaped keys:\n " << reshaped_keys << "\n";
  std::cout << "\nReshaped values:\n " << reshaped_values << "\n\n";
  check.tensor("reshaped_queries", reshaped_queries, {1, 3, 2, 3},
               {-3.3182e+00, 4.2931e-01, 3.2498e+00, -2.0282e+00, -2.0650e+00, 2.2758e+00,

                -4.3869e+00, 1.2290e+00, 4.7963e+00, -2.4509e+00, -4.3620e-01, -1.2468e+00,

                -1.3072e+00, 1.8372e-03, 1.2705e+00, -6.3332e-01, -2.3778e-01, -1.3795e-01},
               kSci);
  check.tensor("reshaped_keys", reshaped_keys, {1, 3, 2, 3},
               {1.2777, 2.1052, 1.2342, 1.2710, 1.3911, 1.4051,

                2.1467, -1.4555, 0.5085, 5.1667, -1.0620, 2.4676,

                0.4384, 0.1270, 0.0256, 0.9534, 0.1451, 0.8025});
  check.tensor("reshaped_values", reshaped_values, {1, 3, 2, 3},
               {1.1584, 1.9865, -1.2399, 2.4898, -4.1935, 3.7342,

                1.3962, 3.1158, -2.7011, 0.1129, -2.2644, -0.2995,

                0.1818, 0.7535, -0.8222, 0.5391, -0.8618, 0.7727});

  // In [14]-[15]: step 6, group by heads: (1, 3, 2, 3) -> (1, 2, 3, 3)
  Tensor transposed_queries = reshaped_queries.transpose(1, 2);  // interchange dims 1 and 2
  Tensor transposed_keys = reshaped_keys.transpose(1, 2);
  Tensor transposed_values = reshaped_values.transpose(1, 2);
  std::cout << "Transposed queries:\n " << transposed_queries << "\n";
  std::cout << "\nTransposed keys:\n " << transposed_keys << "\n";
  std::cout << "\nTransposed values:\n " << transposed_values << "\n\n";
  check.tensor("transposed_queries", transposed_queries, {1, 2, 3, 3},
               {-3.3182e+00, 4.2931e-01, 3.2498e+00, -4.3869e+00, 1.2290e+00, 4.7963e+00, -1.3072e+00,
                1.8372e-03, 1.2705e+00,

                -2.0282e+00, -2.0650e+00, 2.2758e+00, -2.4509e+00, -4.3620e-01, -1.2468e+00, -6.3332e-01,
                -2.3778e-01, -1.3795e-01},
               kSci);
  check.tensor("transposed_keys", transposed_keys, {1, 2, 3, 3},
               {1.2777, 2.1052, 1.2342, 2.1467, -1.4555, 0.5085, 0.4384, 0.1270, 0.0256,

                1.2710, 1.3911, 1.4051, 5.1667, -1.0620, 2.4676, 0.9534, 0.1451, 0.8025});
  check.tensor("transposed_values", transposed_values, {1, 2, 3, 3},
               {1.1584, 1.9865, -1.2399, 1.3962, 3.1158, -2.7011, 0.1818, 0.7535, -0.8222,

                2.4898, -4.1935, 3.7342, 0.1129, -2.2644, -0.2995, 0.5391, -0.8618, 0.7727});

  // In [16]: step 7, attention scores (1, 2, 3, 3)
  Tensor attention_scores = matmul(transposed_queries, transposed_keys.transpose(2, 3));
  std::cout << attention_scores << "\n\n";
  check.tensor("attention_scores", attention_scores, {1, 2, 3, 3},
               {0.6750, -6.0953, -1.3173, 2.9018, -8.7669, -1.6448, -0.0983, -2.1627, -0.5404,

                -2.2529, -2.6703, -0.4068, -5.4737, -15.2760, -3.4004, -1.3295, -3.3600, -0.7490});

  // In [17]: step 8, mask the future tokens
  Tensor mask = triu(ones({attention_scores.size(-2), attention_scores.size(-1)}), 1).to(kBool);
  Tensor attention_scores_masked = attention_scores.masked_fill(mask, -INFINITY);
  std::cout << "Masked attention scores:\n " << attention_scores_masked << "\n\n";
  check.tensor("attention_scores_masked", attention_scores_masked, {1, 2, 3, 3},
               {0.6750, -inf, -inf, 2.9018, -8.7669, -inf, -0.0983, -2.1627, -0.5404,

                -2.2529, -inf, -inf, -5.4737, -15.2760, -inf, -1.3295, -3.3600, -0.7490});

  // In [18]: scale by sqrt(head_dimension)
  const int64_t head_dimension = transposed_keys.size(-1);
  Tensor attention_scores_scaled = attention_scores_masked / std::pow(head_dimension, 0.5);
  std::cout << "Scaled attention scores:\n " << attention_scores_scaled << "\n\n";
  check.tensor("attention_scores_scaled", attention_scores_scaled, {1, 2, 3, 3},
               {0.3897, -inf, -inf, 1.6754, -5.0615, -inf, -0.0567, -1.2487, -0.3120,

                -1.3007, -inf, -inf, -3.1602, -8.8196, -inf, -0.7676, -1.9399, -0.4324});

  // In [19]
  Tensor attention_weights = softmax(attention_scores_scaled, -1);
  std::cout << "Attention weights:\n " << attention_weights << "\n\n";
  check.tensor("attention_weights", attention_weights, {1, 2, 3, 3},
               {1.0000, 0.0000, 0.0000, 0.9988, 0.0012, 0.0000, 0.4812, 0.1461, 0.3727,

                1.0000, 0.0000, 0.0000, 0.9965, 0.0035, 0.0000, 0.3693, 0.1144, 0.5163});

  // In [20]: step 9, context vectors (1, 2, 3, 3)
  Tensor context = matmul(attention_weights, transposed_values);
  std::cout << "Context vectors:\n " << context << "\n\n";
  check.tensor("context_vectors", context, {1, 2, 3, 3},
               {1.1584, 1.9865, -1.2399, 1.1587, 1.9879, -1.2416, 0.8291, 1.6919, -1.2977,

                2.4898, -4.1935, 3.7342, 2.4816, -4.1868, 3.7202, 1.2108, -2.2525, 1.7438});

  // In [21]: step 10, back to (1, 3, 2, 3)
  Tensor final_context_vectors = context.transpose(1, 2);
  std::cout << "Final context vectors:\n " << final_context_vectors << "\n\n";
  check.tensor("final_context_vectors", final_context_vectors, {1, 3, 2, 3},
               {1.1584, 1.9865, -1.2399, 2.4898, -4.1935, 3.7342,

                1.1587, 1.9879, -1.2416, 2.4816, -4.1868, 3.7202,

                0.8291, 1.6919, -1.2977, 1.2108, -2.2525, 1.7438});

  // In [22]: step 11, combine the heads: (1, 3, 6)
  Tensor combined_context_vectors = final_context_vectors.reshape({1, 3, 6});
  std::cout << "Combined context vectors:\n " << combined_context_vectors << "\n";
  check.tensor("combined_context_vectors", combined_context_vectors, {1, 3, 6},
               {1.1584, 1.9865, -1.2399, 2.4898, -4.1935, 3.7342, 1.1587, 1.9879, -1.2416, 2.4816, -4.1868,
                3.7202, 0.8291, 1.6919, -1.2977, 1.2108, -2.2525, 1.7438});

  return check.finish();
}
