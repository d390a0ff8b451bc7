// tests/core/gradcheck_rows_nn_functional.cpp: gradcheck rows for dropout, embedding,
// layer_norm, cross_entropy and mse_loss. Integer inputs (ids, targets) are captured by the
// row's fn; dropout rebuilds its Generator inside fn so every evaluation draws the same mask.
#include "gradcheck_table.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;
}  // namespace

std::vector<GradcheckRow> nn_functional_rows() {
  std::vector<GradcheckRow> rows;
  // ---- dropout
  rows.push_back({"dropout/2d",
                  [] {
                    return inputs({{4, 5}});
                  },
                  [](const V& x) {
                    Generator g(42);
                    return dropout(x[0], 0.3, true, &g);
                  }});
  rows.push_back({"dropout/noncontig",
                  [] {
                    return V{noncontig({5, 6})};
                  },
                  [](const V& x) {
                    Generator g(42);
                    return dropout(x[0], 0.5, true, &g);
                  }});
  rows.push_back({"dropout/3d_p0.9",
                  [] {
                    return inputs({{2, 3, 4}});
                  },
                  [](const V& x) {
                    Generator g(7);
                    return dropout(x[0], 0.9, true, &g);
                  }});
  rows.push_back({"dropout/p1",
                  [] {
                    return inputs({{3, 3}});
                  },
                  [](const V& x) { return dropout(x[0], 1.0, true); }});

  // ---- embedding
  rows.push_back({"embedding/2d_ids_repeats",
                  [] {
                    return inputs({{10, 4}});
                  },
                  [](const V& x) {
                    return embedding(x[0], tensor({{1, 3, 3}, {9, 0, 1}}));
                  }});
  rows.push_back({"embedding/noncontig_weight",
                  [] {
                    return V{noncontig({6, 5})};
                  },
                  [](const V& x) {
                    return embedding(x[0], tensor({5, 0, 5, 2}));
                  }});
  rows.push_back({"embedding/noncontig_ids",
                  [] {
                    return inputs({{7, 3}});
                  },
                  [](const V& x) {
                    return embedding(x[0], tensor({{1, 2}, {6, 6}, {0, 4}}).t());
                  }});

  // ---- layer_norm
  rows.push_back({"layer_norm/2d",
                  [] {
                    return inputs({{3, 8}, {8}, {8}});
                  },
                  [](const V& x) { return layer_norm(x[0], {8}, x[1], x[2]); }});
  rows.push_back({"layer_norm/3d_over_2dims",
                  [] {
                    return inputs({{2, 3, 4}, {3, 4}, {3, 4}});
                  },
                  [](const V& x) {
                    return layer_norm(x[0], {3, 4}, x[1], x[2]);
                  }});
  rows.push_back({"layer_norm/noncontig",
                  [] {
                    auto wb = inputs({{6}, {6}});
                    return V{noncontig({5, 6}), wb[0], wb[1]};
                  },
                  [](const V& x) { return layer_norm(x[0], {6}, x[1], x[2]); }});
  rows.push_back({"layer_norm/no_affine",
                  [] {
                    return inputs({{4, 7}});
                  },
                  [](const V& x) { return layer_norm(x[0], {7}, Tensor(), Tensor()); }});
  rows.push_back({"layer_norm/weight_only",
                  [] {
                    return inputs({{4, 7}, {7}});
                  },
                  [](const V& x) { return layer_norm(x[0], {7}, x[1], Tensor(), 1e-3); }});
  rows.push_back({"layer_norm/wide",
                  [] {
                    return inputs({{3, 37}, {37}, {37}});
                  },
                  [](const V& x) { return layer_norm(x[0], {37}, x[1], x[2]); }});
  // 150 rows: the backward sums dw / db over blocks of 64 rows (two whole, one partial)
  rows.push_back({"layer_norm/row_blocks",
                  [] {
                    return inputs({{2, 75, 5}, {5}, {5}});
                  },
                  [](const V& x) { return layer_norm(x[0], {5}, x[1], x[2]); }});

  // ---- cross_entropy
  rows.push_back({"cross_entropy/nc",
                  [] {
                    return inputs({{5, 4}});
                  },
                  [](const V& x) {
                    return cross_entropy(x[0], tensor({0, 3, 1, 1, 2}));
                  }});
  rows.push_back({"cross_entropy/nct_ignore",
                  [] {
                    return inputs({{2, 4, 3}});
                  },
                  [](const V& x) {
                    return cross_entropy(x[0], tensor({{0, -100, 3}, {2, 2, 1}}));
                  }});
  rows.push_back(
      {"cross_entropy/ncd1d2_none",
       [] {
         return inputs({{2, 3, 2, 2}});
       },
       [](const V& x) {
         return cross_entropy(x[0], tensor({{{0, 2}, {1, 1}}, {{2, 0}, {1, 0}}}), {.reduction = "none"});
       }});
  rows.push_back({"cross_entropy/sum_smoothing",
                  [] {
                    return inputs({{4, 5}});
                  },
                  [](const V& x) {
                    return cross_entropy(x[0], tensor({1, 4, 0, 2}),
                                         {.ignore_index = 0, .reduction = "sum", .label_smoothing = 0.2});
                  }});
  rows.push_back(
      {"cross_entropy/none_smoothing_ignore",
       [] {
         return inputs({{3, 4}});
       },
       [](const V& x) {
         return cross_entropy(x[0], tensor({3, -100, 1}), {.reduction = "none", .label_smoothing = 0.4});
       }});
  rows.push_back({"cross_entropy/1d", [] { return inputs({{6}}); },
                  [](const V& x) { return cross_entropy(x[0], scalar_tensor(4, kInt64)); }});
  rows.push_back({"cross_entropy_last_dim/btc_ignore",
                  [] {
                    return inputs({{2, 3, 4}});
                  },
                  [](const V& x) {
                    return cross_entropy_last_dim(x[0], tensor({{0, -100, 3}, {2, 2, 1}}));
                  }});
  rows.push_back({"cross_entropy_last_dim/noncontig_smoothing",
                  [] {
                    return V{noncontig({4, 6})};
                  },
                  [](const V& x) {
                    return cross_entropy_last_dim(x[0], tensor({5, 0, 2, 2}), {.label_smoothing = 0.1});
                  }});
  rows.push_back({"cross_entropy/noncontig",
                  [] {
                    return V{noncontig({4, 6})};
                  },
                  [](const V& x) {
                    return cross_entropy(x[0], tensor({5, 0, 2, 2}));
                  }});
  rows.push_back({"cross_entropy/ignore_index",
                  [] {
                    return inputs({{4, 3}});
                  },
                  [](const V& x) {
                    return cross_entropy(x[0], tensor({1, 2, 0, 2}), {.ignore_index = 2});
                  }});
  rows.push_back({"cross_entropy/wide",
                  [] {
                    return inputs({{3, 41}});
                  },
                  [](const V& x) {
                    return cross_entropy(x[0] * 3.0, tensor({40, 0, 17}));
                  }});

  // ---- mse_loss
  rows.push_back({"mse_loss/both",
                  [] {
                    return inputs({{3, 4}, {3, 4}});
                  },
                  [](const V& x) { return mse_loss(x[0], x[1]); }});
  rows.push_back({"mse_loss/noncontig",
                  [] {
                    return V{noncontig({4, 5}), inputs({{4, 5}})[0]};
                  },
                  [](const V& x) { return mse_loss(x[0], x[1]); }});
  rows.push_back({"mse_loss/input_only", [] { return inputs({{6}}); },
                  [](const V& x) { return mse_loss(x[0], full({6}, 0.5, kFloat64)); }});
  return rows;
}

INSTANTIATE_TEST_SUITE_P(NnFunctional, OpGradcheck, ::testing::ValuesIn(nn_functional_rows()), row_name);

}  // namespace xgrad::testing
