// tests/core/gradcheck_rows_shape.cpp: gradcheck rows for the views (views.cpp) and the shape
// ops (shape.cpp): several shapes each, non-contiguous inputs, and masked_fill_ on a non-leaf.
// Adding an op adds a row (see gradcheck_table.h).
#include "gradcheck_table.h"

namespace xgrad::testing {
namespace {

using V = const std::vector<Tensor>&;

std::vector<Tensor> one(const Tensor& t) { return {t}; }

// view merges dims only where they are contiguous in memory (like torch): the merge row is
// checked on contiguous inputs only; the other view rows take every layout
GradcheckRow contiguous_only(GradcheckRow row) {
  row.strided_inputs = row.broadcast_inputs = false;
  return row;
}

std::vector<GradcheckRow> shape_rows() {
  return {
      // ---- views
      contiguous_only({"view/merge",
                       [] {
                         return inputs({{2, 3, 4}});
                       },
                       [](V x) {
                         return x[0].view({6, 4});
                       }}),
      {"view/split-infer",
       [] {
         return inputs({{6, 4}});
       },
       [](V x) {
         return x[0].view({2, -1, 4});
       }},
      {"view/noncontig-keeps-dims",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) {
         return x[0].view({3, 4, 1});
       }},
      {"reshape/view",
       [] {
         return inputs({{2, 6}});
       },
       [](V x) {
         return x[0].reshape({3, 4});
       }},
      {"reshape/copy",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) { return x[0].reshape({12}); }},
      {"flatten/1",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) { return x[0].flatten(1); }},
      {"flatten/noncontig",
       [] {
         return one(noncontig({2, 3, 4}));
       },
       [](V x) { return x[0].flatten(); }},
      {"transpose/3d",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) { return x[0].transpose(0, 2); }},
      {"transpose/neg",
       [] {
         return one(noncontig({2, 3, 4}));
       },
       [](V x) { return x[0].transpose(-1, -3); }},
      {"t",
       [] {
         return inputs({{3, 5}});
       },
       [](V x) { return x[0].t(); }},
      {"permute",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) {
         return x[0].permute({2, 0, 1});
       }},
      {"permute/noncontig",
       [] {
         return one(noncontig({2, 3, 4}));
       },
       [](V x) {
         return x[0].permute({1, 2, 0});
       }},
      {"slice/range",
       [] {
         return inputs({{4, 5}});
       },
       [](V x) { return x[0].slice(1, 1, 4); }},
      {"slice/step",
       [] {
         return inputs({{7, 3}});
       },
       [](V x) { return x[0].slice(0, 1, 7, 3); }},
      {"slice/noncontig",
       [] {
         return one(noncontig({4, 6}));
       },
       [](V x) { return x[0].slice(1, -4, 6, 2); }},
      {"slice/of-slice",
       [] {
         return inputs({{6, 4}});
       },
       [](V x) { return x[0].slice(0, 1, 5).slice(0, 1, 3); }},
      {"narrow",
       [] {
         return inputs({{3, 5}});
       },
       [](V x) { return x[0].narrow(1, 2, 2); }},
      {"select/0",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return x[0].select(0, 1); }},
      {"select/neg",
       [] {
         return one(noncontig({2, 3, 4}));
       },
       [](V x) { return x[0].select(-1, -1); }},
      {"select/index-op",
       [] {
         return inputs({{3, 2, 2}});
       },
       [](V x) { return x[0][2][1]; }},
      {"unsqueeze",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return x[0].unsqueeze(1); }},
      {"squeeze/all",
       [] {
         return inputs({{1, 3, 1, 2}});
       },
       [](V x) { return x[0].squeeze(); }},
      {"squeeze/dim",
       [] {
         return inputs({{3, 1, 2}});
       },
       [](V x) { return x[0].squeeze(1); }},
      {"expand/size1",
       [] {
         return inputs({{3, 1}});
       },
       [](V x) {
         return x[0].expand({3, 4});
       }},
      {"expand/leading",
       [] {
         return inputs({{2, 1, 3}});
       },
       [](V x) {
         return x[0].expand({4, 2, 5, 3});
       }},
      {"expand/noncontig",
       [] {
         return one(noncontig({1, 3}));
       },
       [](V x) {
         return x[0].expand({4, -1});
       }},
      {"contiguous",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) { return x[0].contiguous(); }},
      {"clone",
       [] {
         return inputs({{2, 3}});
       },
       [](V x) { return x[0].clone(); }},
      {"views/attention-heads",
       [] {
         return inputs({{2, 5, 6}});
       },
       [](V x) {
         return x[0].view({2, 5, 3, 2}).transpose(1, 2).contiguous().view({2, 3, 10});
       }},

      // ---- cat / stack / split / chunk
      {"cat/dim0",
       [] {
         return inputs({{2, 3}, {1, 3}, {4, 3}});
       },
       [](V x) {
         return cat({x[0], x[1], x[2]}, 0);
       }},
      {"cat/dim1-noncontig",
       [] {
         return std::vector<Tensor>{noncontig({2, 3}), inputs({{2, 2}})[0]};
       },
       [](V x) {
         return cat({x[0], x[1]}, 1);
       }},
      {"cat/last-3d",
       [] {
         return inputs({{2, 3, 1}, {2, 3, 4}});
       },
       [](V x) { return cat(x, -1); }},
      {"cat/same-input-twice",
       [] {
         return inputs({{2, 2}});
       },
       [](V x) {
         return cat({x[0], x[0]}, 0);
       }},
      {"stack/0",
       [] {
         return inputs({{2, 3}, {2, 3}});
       },
       [](V x) { return stack(x, 0); }},
      {"stack/last-noncontig",
       [] {
         return std::vector<Tensor>{noncontig({3, 2}), inputs({{3, 2}})[0]};
       },
       [](V x) { return stack(x, -1); }},
      {"split/size",
       [] {
         return inputs({{5, 3}});
       },
       [](V x) { return split(x[0], 2, 0)[2]; }},
      {"split/sizes",
       [] {
         return inputs({{2, 6}});
       },
       [](V x) {
         return split(x[0], std::vector<int64_t>{1, 3, 2}, 1)[1];
       }},
      {"chunk/recombined",
       [] {
         return inputs({{2, 7}});
       },
       [](V x) {
         auto c = chunk(x[0], 3, 1);
         return cat({c[2], c[0], c[1]}, 1);
       }},

      // ---- index_select
      {"index_select/dim0-repeats",
       [] {
         return inputs({{5, 3}});
       },
       [](V x) {
         return index_select(x[0], 0, tensor({4, 0, 4, 2, 4}));
       }},
      {"index_select/dim1",
       [] {
         return inputs({{2, 4, 3}});
       },
       [](V x) {
         return index_select(x[0], 1, tensor({3, 3, 1}));
       }},
      {"index_select/noncontig-last",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) {
         return index_select(x[0], -1, tensor({0, 2, 0}));
       }},

      // ---- masked_fill
      {"masked_fill/same",
       [] {
         return inputs({{2, 3}});
       },
       [](V x) {
         return masked_fill(x[0], tensor({{true, false, true}, {false, false, true}}), -1.5);
       }},
      {"masked_fill/bcast-mask",
       [] {
         return inputs({{4, 2, 3}});
       },
       [](V x) {
         return masked_fill(x[0], tensor({true, false, true}), 2.0);
       }},
      {"masked_fill/bcast-self", [] { return inputs({{3}}); },
       [](V x) {
         return masked_fill(x[0], tensor({{true, false, true}, {false, false, true}}), 0.5);
       }},
      {"masked_fill/noncontig",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) {
         return x[0].masked_fill(triu(ones({3, 4}, kBool), 1), 0.0);
       }},
      {"masked_fill_/non-leaf",
       [] {
         return inputs({{2, 3, 3}});
       },
       [](V x) {
         Tensor y = x[0].clone();
         y.masked_fill_(triu(ones({3, 3}, kBool), 1), -3.0);
         return y;
       }},
      {"masked_fill_/after-matmul",
       [] {
         return inputs({{2, 4, 3}, {2, 4, 3}});
       },
       [](V x) {
         Tensor s = matmul(x[0], x[1].transpose(1, 2));
         s.masked_fill_(triu(ones({4, 4}, kBool), 1), -2.0);
         return s;
       }},
      {"masked_fill_/view-of-non-leaf",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) {
         Tensor y = x[0].clone().t();
         y.masked_fill_(tensor({true, false, true}), 1.0);
         return y;
       }},

      // ---- triu / tril
      {"triu/0",
       [] {
         return inputs({{4, 5}});
       },
       [](V x) { return triu(x[0]); }},
      {"triu/batched-diag1",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) { return triu(x[0], 1); }},
      {"triu/neg-noncontig",
       [] {
         return one(noncontig({4, 3}));
       },
       [](V x) { return triu(x[0], -1); }},
      {"tril/0",
       [] {
         return inputs({{4, 3}});
       },
       [](V x) { return tril(x[0]); }},
      {"tril/batched-diag2",
       [] {
         return inputs({{2, 2, 3, 5}});
       },
       [](V x) { return tril(x[0], 2); }},
      {"tril/neg-noncontig",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) { return tril(x[0], -1); }},
      {"triu_/non-leaf",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) {
         Tensor y = x[0] * 2.0;
         return y.triu_(1);
       }},
      {"tril_/free-fn-then-view",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) {
         Tensor y = x[0].clone();
         tril_(y, -1);
         return y.t();
       }},

      // ---- roll
      {"roll/flat",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return x[0].roll(5); }},
      {"roll/dim0-neg",
       [] {
         return inputs({{3, 4}});
       },
       [](V x) { return roll(x[0], -1, 0); }},
      {"roll/two-dims",
       [] {
         return inputs({{2, 3, 4}});
       },
       [](V x) {
         return roll(x[0], {1, -6}, {0, 2});
       }},
      {"roll/noncontig",
       [] {
         return one(noncontig({3, 4}));
       },
       [](V x) { return x[0].roll(2, -1); }},
  };
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Shape, OpGradcheck, ::testing::ValuesIn(shape_rows()), row_name);

}  // namespace xgrad::testing
