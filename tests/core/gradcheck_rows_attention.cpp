// tests/core/gradcheck_rows_attention.cpp: gradcheck rows for scaled_dot_product_attention.
// Rows named ".../blockN" call detail::scaled_dot_product_attention_blocked with a small row
// strip so that a few rows span several strips and register tiles (the causal skipping in all
// six products is exercised); dropout rows rebuild their Generator inside fn so every
// evaluation draws the same mask. "mha_views" rows feed (B, H, T, D) views of (B, T, H, D)
// leaves, read in place by the kernel; "noncontig" rows feed transposed leaves, which the op
// copies first. "mask_float" rows pass the mask as a 4th input (differentiated too); "gqa" rows
// give key and value fewer heads than the query (enable_gqa).
#include "gradcheck_table.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;

Tensor sdpa_blocked(const V& x, double p, bool causal, int64_t block, uint64_t seed = 0,
                    std::optional<double> scale = std::nullopt) {
  Generator g(seed);
  return detail::scaled_dot_product_attention_blocked(x[0], x[1], x[2], p, causal, scale, &g, block);
}

// (B, T, H, D) leaf seen as (B, H, T, D), as MultiHeadAttention passes them
Tensor heads(const Tensor& t) { return t.transpose(1, 2); }

// A fixed bool attn_mask of `shape`, about a third of it false; key 0 takes part in every row
// unless dead_row >= 0 (that row of the flattened mask sees no key).
Tensor bool_mask(const Shape& shape, int64_t dead_row = -1) {
  Generator g(5);
  Tensor m = gt(rand(shape, &g), 0.3).contiguous();
  auto* b = static_cast<uint8_t*>(m.raw_data_ptr());
  const int64_t S = shape.back();
  for (int64_t r = 0; r * S < m.numel(); ++r)
    for (int64_t j = 0; j < S; ++j) b[r * S + j] = r == dead_row ? 0 : j == 0 ? 1 : b[r * S + j];
  return m;
}

// sdpa with options and a row strip of `block` rows (dropout: a Generator rebuilt per call)
Tensor sdpa_with(const V& x, ScaledDotProductAttentionOptions o, int64_t block = 64, uint64_t seed = 0) {
  Generator g(seed);
  o.generator = &g;
  if (x.size() > 3) o.attn_mask = x[3];
  return detail::scaled_dot_product_attention_blocked(x[0], x[1], x[2], o, block);
}
}  // namespace

std::vector<GradcheckRow> attention_rows() {
  std::vector<GradcheckRow> rows;
  rows.push_back({"sdpa/noncausal_L!=S",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}});
                  },
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }});
  rows.push_back({"sdpa/causal",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}});
                  },
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], 0.0, true); }});
  rows.push_back({"sdpa/causal/block3",
                  [] {
                    return inputs({{1, 2, 10, 3}, {1, 2, 10, 3}, {1, 2, 10, 2}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 0.0, true, 3); }});
  rows.push_back({"sdpa/causal_L<S/block3",
                  [] {
                    return inputs({{2, 1, 7, 3}, {2, 1, 11, 3}, {2, 1, 11, 2}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 0.0, true, 3); }});
  rows.push_back({"sdpa/causal_L>S/block4",
                  [] {
                    return inputs({{1, 2, 11, 3}, {1, 2, 6, 3}, {1, 2, 6, 4}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 0.0, true, 4); }});
  rows.push_back({"sdpa/causal_dropout/block3",
                  [] {
                    return inputs({{2, 2, 8, 3}, {2, 2, 8, 3}, {2, 2, 8, 3}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 0.3, true, 3, 42); }});
  rows.push_back({"sdpa/noncausal_dropout",
                  [] {
                    return inputs({{2, 3, 4}, {2, 5, 4}, {2, 5, 2}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 0.5, false, 64, 7); }});
  rows.push_back({"sdpa/dropout_p1",
                  [] {
                    return inputs({{1, 2, 4, 3}, {1, 2, 4, 3}, {1, 2, 4, 3}});
                  },
                  [](const V& x) { return sdpa_blocked(x, 1.0, true, 2); }});
  rows.push_back({"sdpa/mha_views/block2",
                  [] {
                    return inputs({{2, 6, 2, 3}, {2, 6, 2, 3}, {2, 6, 2, 3}});
                  },
                  [](const V& x) {
                    return detail::scaled_dot_product_attention_blocked(heads(x[0]), heads(x[1]), heads(x[2]),
                                                                        0.0, true, std::nullopt, nullptr, 2);
                  }});
  rows.push_back({"sdpa/noncontig",
                  [] {
                    return V{noncontig({2, 5, 4}), noncontig({2, 6, 4}, 12), noncontig({2, 6, 3}, 13)};
                  },
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }});
  rows.push_back({"sdpa/scale0.7_3d_causal",
                  [] {
                    return inputs({{3, 5, 4}, {3, 5, 4}, {3, 5, 2}});
                  },
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2], 0.0, true, 0.7); }});
  rows.push_back({"sdpa/2d",
                  [] {
                    return inputs({{4, 3}, {5, 3}, {5, 2}});
                  },
                  [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }});
  // attn_mask (bool: a constant; float: a 4th input, differentiated too) and grouped-query
  // attention (enable_gqa: fewer key/value heads)
  rows.push_back({"sdpa/mask_bool",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}});
                  },
                  [](const V& x) {
                    return sdpa_with(x, {.attn_mask = bool_mask({2, 2, 5, 6})});
                  }});
  rows.push_back({"sdpa/mask_bool_LS/block2",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}});
                  },
                  [](const V& x) {
                    return sdpa_with(x, {.attn_mask = bool_mask({5, 6})}, 2);
                  }});
  rows.push_back({"sdpa/mask_bool_dead_row/block3",
                  [] {
                    return inputs({{1, 2, 5, 3}, {1, 2, 6, 3}, {1, 2, 6, 3}});
                  },
                  [](const V& x) {
                    return sdpa_with(x, {.attn_mask = bool_mask({1, 2, 5, 6}, 3)}, 3);
                  }});
  rows.push_back({"sdpa/mask_float",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}, {2, 2, 5, 6}});
                  },
                  [](const V& x) { return sdpa_with(x, {}); }});
  rows.push_back({"sdpa/mask_float_padding/block2",
                  [] {
                    return inputs({{2, 2, 5, 4}, {2, 2, 6, 4}, {2, 2, 6, 3}, {2, 1, 1, 6}});
                  },
                  [](const V& x) { return sdpa_with(x, {}, 2); }});
  rows.push_back({"sdpa/mask_float_rows",
                  [] {
                    return inputs({{3, 5, 4}, {3, 6, 4}, {3, 6, 2}, {5, 1}});
                  },
                  [](const V& x) { return sdpa_with(x, {.scale = 0.6}); }});
  rows.push_back({"sdpa/mask_float_dropout/block3",
                  [] {
                    return inputs({{2, 2, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 3}, {5, 6}});
                  },
                  [](const V& x) { return sdpa_with(x, {.dropout_p = 0.3}, 3, 11); }});
  rows.push_back({"sdpa/gqa",
                  [] {
                    return inputs({{2, 4, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 2}});
                  },
                  [](const V& x) { return sdpa_with(x, {.enable_gqa = true}); }});
  rows.push_back({"sdpa/gqa_causal/block2",
                  [] {
                    return inputs({{1, 6, 5, 3}, {1, 2, 5, 3}, {1, 2, 5, 4}});
                  },
                  [](const V& x) { return sdpa_with(x, {.is_causal = true, .enable_gqa = true}, 2); }});
  rows.push_back({"sdpa/gqa_causal_dropout/block3",
                  [] {
                    return inputs({{2, 4, 6, 3}, {2, 1, 6, 3}, {2, 1, 6, 3}});
                  },
                  [](const V& x) {
                    return sdpa_with(x, {.dropout_p = 0.3, .is_causal = true, .enable_gqa = true}, 3, 42);
                  }});
  rows.push_back({"sdpa/gqa_mask_bool",
                  [] {
                    return inputs({{2, 4, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 2}});
                  },
                  [](const V& x) {
                    return sdpa_with(x, {.attn_mask = bool_mask({2, 1, 5, 6}), .enable_gqa = true});
                  }});
  rows.push_back({"sdpa/gqa_mask_float/block2",
                  [] {
                    return inputs({{2, 4, 5, 3}, {2, 2, 6, 3}, {2, 2, 6, 2}, {4, 5, 6}});
                  },
                  [](const V& x) { return sdpa_with(x, {.enable_gqa = true}, 2); }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Attention, OpGradcheck, ::testing::ValuesIn(attention_rows()), row_name);

}  // namespace xgrad::testing
