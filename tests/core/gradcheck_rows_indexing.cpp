// tests/core/gradcheck_rows_indexing.cpp: gradcheck rows for core/src/ops/indexing.cpp
// (gather, scatter_add, masked_select, topk): repeated indices (gradients that must
// accumulate), every dim, broadcasting masks and non-contiguous inputs.
#include "gradcheck_table.h"

namespace xgrad::testing {
namespace {

using V = const std::vector<Tensor>&;

std::vector<Tensor> one(const Tensor& t) { return {t}; }

std::vector<GradcheckRow> indexing_rows() {
  return {
      // ---- index_put_ (on a clone or a view of a non-leaf: the leaves are self and values)
      {"index_put_/accumulate-repeats",
       [] {
         return inputs({{4, 3}, {3, 3}});
       },
       [](V x) {
         return x[0].clone().index_put_({tensor({0, 2, 0})}, x[1], true);
       }},
      {"index_put_/bcast-indices-and-values",
       [] {
         return inputs({{3, 4}, {2}});
       },
       [](V x) {
         return x[0].clone().index_put_({tensor({{0}, {2}}), tensor({1, 3})}, x[1]);
       }},
      {"index_put_/through-a-view",
       [] {
         return inputs({{3, 4}, {2, 3}});
       },
       [](V x) {
         Tensor base = x[0] * 2.0;
         Tensor col = base.t();  // (4, 3)
         col.index_put_({tensor({3, 0})}, x[1]);
         return base;
       }},
      {"index_put/out-of-place-neg",
       [] {
         return std::vector<Tensor>{noncontig({2, 3, 4}), inputs({{4}})[0]};
       },
       [](V x) { return index_put(x[0], {tensor({-1})}, x[1]); }},

      // ---- gather
      {"gather/dim1-repeats",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) {
         return gather(x[0], 1, tensor({{0, 0}, {3, 1}, {2, 2}}));
       }},
      {"gather/dim0",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) {
         return x[0].gather(0, tensor({{2, 0, 1, 2}, {2, 2, 0, 1}}));
       }},
      {"gather/noncontig-3d",
       [] {
         return one(noncontig({2, 3, 4}));
       },
       [](V x) {
         return gather(x[0], -1, tensor({{{3, 0}, {1, 1}, {0, 2}}, {{2, 2}, {3, 0}, {1, 3}}}));
       }},

      // ---- scatter_add (both inputs get gradients; src larger than index)
      {"scatter_add/dim0",
       [] {
         return inputs({{3, 5}, {2, 5}});
       },
       [](V x) {
         return scatter_add(x[0], 0, tensor({{0, 1, 2, 0, 0}, {2, 0, 0, 1, 2}}), x[1]);
       }},
      {"scatter_add/dim1-src-larger",
       [] {
         return inputs({{2, 4}, {3, 5}});
       },
       [](V x) {
         return x[0].scatter_add(1, tensor({{3, 3, 0}, {1, 2, 1}}), x[1]);
       }},
      {"scatter_add/noncontig",
       [] {
         return std::vector<Tensor>{noncontig({3, 4}), noncontig({3, 4}, 5)};
       },
       [](V x) {
         return scatter_add(x[0], -1, tensor({{1, 1, 0, 3}, {2, 0, 0, 0}, {3, 2, 1, 0}}), x[1]);
       }},

      // ---- masked_select
      {"masked_select/bcast-mask",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) {
         return masked_select(
             x[0],
             tensor({{true, false, true, false}, {false, false, true, true}, {true, true, false, false}}));
       }},
      {"masked_select/bcast-self",
       [] {
         return inputs({{3, 1}});
       },
       [](V x) {
         return x[0].masked_select(tensor({{true, false, true}, {false, true, true}, {true, true, false}}));
       }},
      {"masked_select/noncontig",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) { return masked_select(x[0], x[0].detach() > 0.0); }},

      // ---- topk (randn inputs: no ties)
      {"topk/last",
       [] {
         return inputs({{3, 6}});
       },
       [](V x) { return topk(x[0], 3).values; }},
      {"topk/dim0-smallest",
       [] {
         return inputs({{5, 4}});
       },
       [](V x) { return x[0].topk(2, 0, false).values; }},
      {"topk/noncontig",
       [] {
         return one(noncontig({4, 5}));
       },
       [](V x) { return x[0].topk(4, -1).values; }},
      {"topk/all",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) { return topk(x[0], 3, 1).values; }},
  };
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Indexing, OpGradcheck, ::testing::ValuesIn(indexing_rows()), row_name);

}  // namespace xgrad::testing
