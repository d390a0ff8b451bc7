// tests/core/gradcheck_rows_inplace.cpp: gradcheck rows for in-place ops through views of tensors
// in the graph (core/src/inplace.cpp): every case of inplace_view_cases.h (also checked against
// PyTorch in test_inplace_views.cpp), plus compositions on non-contiguous leaves and with a view
// used after its base was written. Adding a case adds a row (see gradcheck_table.h).
#include "gradcheck_table.h"
#include "inplace_view_cases.h"

namespace xgrad::testing {
namespace {

using V = const std::vector<Tensor>&;

std::vector<GradcheckRow> inplace_rows() {
  std::vector<GradcheckRow> rows;
  for (const InplaceViewCase& c : inplace_view_cases())
    rows.push_back({"inplace/" + c.name, [s = c.shapes] { return inputs(s); }, c.fn});
  const std::vector<GradcheckRow> more = {
      {"inplace/noncontig-leaf-select-add",
       [] {
         return std::vector<Tensor>{noncontig({3, 4}), inputs({{3}})[0]};
       },
       [](V x) {
         Tensor y = x[0] * 1.0;  // non-contiguous like its leaf: a (3, 4) with strides (1, 3)
         y.select(1, 2).add_(x[1], 3.0);
         return y.exp();
       }},
      {"inplace/two-writes-same-view",
       [] {
         return inputs({{4, 3}, {2, 3}});
       },
       [](V x) {
         Tensor y = x[0] * x[0];  // (mul saves its inputs, not y: y may be written)
         Tensor v = y.slice(0, 1, 3);
         v.mul_(-1.5);
         v.add_(x[1]);
         v.clamp_(-0.8, 0.8);
         return y * x[0];
       }},
      {"inplace/view-written-then-base-used-by-matmul",
       [] {
         return inputs({{3, 3}, {3, 2}});
       },
       [](V x) {
         Tensor y = x[0].clone();
         y.t()[0].copy_(x[1].select(1, 0) * x[1].select(1, 1));  // a column of y
         return matmul(y, x[1]);
       }},
      {"inplace/base-written-views-both-used",
       [] {
         return inputs({{2, 6}});
       },
       [](V x) {
         Tensor y = x[0] * x[0];
         Tensor a = y.view({3, 4}), b = y.slice(1, 2, 5);
         y.masked_fill_(tensor({true, false, false, true, false, false}), 0.25);
         return cat({a.flatten(), (b * b).flatten()}, 0);
       }},
  };
  rows.insert(rows.end(), more.begin(), more.end());
  return rows;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Inplace, OpGradcheck, ::testing::ValuesIn(inplace_rows()), row_name);

}  // namespace xgrad::testing
