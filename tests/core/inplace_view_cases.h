// tests/core/inplace_view_cases.h: in-place ops through views of tensors in the autograd graph,
// written once and checked twice: against PyTorch's gradients (test_inplace_views.cpp reads
// tests/fixtures/inplace_views.txt, made by gen_inplace_views.py from the same functions) and
// against finite differences (gradcheck_rows_inplace.cpp). To add a case: add it here and to
// gen_inplace_views.py under the same name, and re-run the generator.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "xgrad/xgrad.h"

namespace xgrad::testing {

struct InplaceViewCase {
  std::string name;           // the fixture's case name
  std::vector<Shape> shapes;  // float64 leaves p, q
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

// gtest prints a failing case by its name rather than as a byte dump
inline void PrintTo(const InplaceViewCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<InplaceViewCase> inplace_view_cases() {
  using V = const std::vector<Tensor>&;
  const Tensor mask4 = tensor({true, false, true, false});
  return {
      // ---- each in-place op through a view
      {"masked_fill_slice",
       {{3, 4}},
       [mask4](V in) {
         Tensor x = in[0].clone();
         x.slice(0, 0, 1).masked_fill_(mask4, 0.0);
         return x * 2.0;
       }},
      {"mul_select",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x[1].mul_(2.5);
         return x;
       }},
      {"add_transpose",
       {{3, 4}, {4, 3}},
       [](V in) {
         Tensor x = in[0].clone();
         x.t().add_(in[1], -0.5);
         return x;
       }},
      {"add_bcast_slice",
       {{3, 4}, {4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.slice(0, 1, 3).add_(in[1], 2.0);
         return x;
       }},
      {"copy_view",
       {{3, 4}, {3, 2}},
       [](V in) {
         Tensor x = in[0].clone();
         x.view({6, 2}).slice(0, 1, 4).copy_(in[1]);
         return x;
       }},
      {"fill_column",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.select(1, 2).fill_(0.5);
         return x;
       }},
      {"zero_step_slice",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.slice(1, 0, 4, 2).zero_();
         return x;
       }},
      {"clamp_rows",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.slice(0, 1, 3).clamp_(-0.3, 0.4);
         return x;
       }},
      {"clamp_min_chained",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.t().slice(0, 1, 3).clamp_(0.0);
         return x;
       }},
      {"mul_chained_views",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.view({2, 2, 3}).transpose(0, 2)[1].mul_(-2.0);
         return x;
       }},
      // ---- the base modified while a view is held, then either is used
      {"base_mul_view_used",
       {{3, 4}, {3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor v = x.slice(0, 1, 3);
         x.mul_(3.0);
         x.add_(in[1]);
         return v * v;
       }},
      {"base_mul_then_view_inplace",
       {{3, 4}, {4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor v = x[0];
         x.mul_(2.0);
         v.add_(in[1]);
         return x;
       }},
      {"expanded_view_after_base_write",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor e = x.slice(0, 0, 1).expand({3, 4});
         x.mul_(2.0);
         return e * e;
       }},
      // ---- two in-place ops on overlapping views; a view used after another was written
      {"overlapping_views",
       {{3, 4}, {2, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor a = x.slice(0, 0, 2), b = x.slice(0, 1, 3);
         a.mul_(2.0);
         b.add_(in[1]);
         return x * x;
       }},
      {"row_then_column_view",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor row = x[0], col = x.select(1, 1);
         row.fill_(2.0);
         return col * col;
       }},
      // ---- in-place, then a view op, then backward
      {"inplace_then_view_op",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         Tensor s = x.slice(0, 1, 3);
         s.mul_(3.0);
         return s.t() * 1.0;
       }},
      {"inplace_view_then_reshape_base",
       {{3, 4}, {4}},
       [](V in) {
         Tensor x = in[0].clone();
         x.slice(1, 1, 3).masked_fill_(tensor({{true, false}, {false, true}, {true, true}}), -1.0);
         x[2].copy_(in[1]);
         return x.view({2, 6}).transpose(0, 1).exp();
       }},
      // ---- a buffer without grad filled through views (torch's out[i] = f(...))
      {"buffer_rows",
       {{3, 4}, {4}},
       [](V in) {
         Tensor buf = zeros({2, 4}, kFloat64);
         buf[0].copy_(in[0][0] * 2.0);
         buf[1].copy_(in[1]);
         return buf * buf;
       }},
      {"noncontig_buffer",
       {{3, 4}},
       [](V in) {
         Tensor buf = zeros({4, 3}, kFloat64).t().detach();  // a root base with strides (1, 3)
         buf[1].copy_(in[0][1]);
         buf.select(1, 0).add_(in[0].select(1, 0).exp());
         return buf * 3.0;
       }},
      // ---- attention-like: masked_fill_ on a view of a matmul result, then softmax
      {"scores_masked_block",
       {{3, 2}, {3, 2}},
       [](V in) {
         Tensor s = matmul(in[0], in[1].t());  // (3, 3)
         s.slice(1, 1, 3).masked_fill_(tensor({{true, true}, {false, true}, {false, false}}), -1e9);
         return softmax(s, -1);
       }},
      // ---- the other operand is a view of the same base
      {"add_row_of_same_base",
       {{3, 4}},
       [](V in) {
         Tensor x = in[0].clone();
         x[0].add_(x[2], 2.0);
         x.select(1, 3).mul_(0.5);
         return x * x;
       }},
  };
}

}  // namespace xgrad::testing
