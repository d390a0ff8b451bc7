// tests/core/gradcheck_rows_attention.cpp: gradcheck rows for scaled_dot_product_attention.
// Rows named ".../blockN" call detail::scaled_dot_product_attention_blocked with a small row
// strip so that a few rows span several strips and register tiles (the causal skipping in all
// six products is exercised); dropout rows rebuild their Generator inside fn so every
// evaluation draws the same mask. "mha_views" rows feed (B, H, T, D) views of (B, T, H, D)
// leaves, read in place by the kernel; "noncontig" rows feed transposed leaves, which the op
// copies first.
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
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Attention, OpGradcheck, ::testing::ValuesIn(attention_rows()), row_name);

}  // namespace xgrad::testing
