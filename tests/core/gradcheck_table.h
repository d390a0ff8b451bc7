// tests/core/gradcheck_table.h: the one table-driven gradient check over every op.
//
// Each op family has a file gradcheck_rows_<family>.cpp that returns its rows and
// instantiates the shared parameterised test OpGradcheck with them:
//
//   std::vector<GradcheckRow> elementwise_rows() {
//     return {
//       {"mul/broadcast", [] { return inputs({{3, 4}, {4}}); },
//        [](const std::vector<Tensor>& x) { return mul(x[0], x[1]); }},
//     };
//   }
//   INSTANTIATE_TEST_SUITE_P(Elementwise, OpGradcheck, ::testing::ValuesIn(elementwise_rows()),
//                            row_name);
//
// Adding an op adds a row. Inputs are float64 leaves that require grad; use noncontig() for a
// non-contiguous leaf (a transposed view) and keep several shapes per op.
//
// Every row runs in every layout, by the table's rule rather than per op:
//  - inputs (input_layouts): as the row makes them; "strided", each contiguous input that
//    requires grad stored transposed (all dims reversed) or, for 1-D, every other element from
//    an offset; "broadcast", each such input replaced by its first slice along its first dim
//    longer than 1, expanded back (stride 0) inside fn, so the op reads repeated rows and its
//    gradient is summed over them;
//  - upstream gradients: gradcheck's dout layouts (contiguous, offset, transposed, step-sliced,
//    expanded), for each input layout.
// A row opts out of a layout (strided_inputs / broadcast_inputs = false) only where the op
// rejects that layout by design (view merging dims that are not contiguous); say why in the
// row. (Ties from repeated rows are no reason: the tied copies are one leaf element, whose
// derivative is the same whichever copy wins.)
//
// Every row also runs gradgradcheck (the second derivatives, through the op's double
// backward) on its inputs as made, with a non-contiguous grad_output. A row that cannot (its
// op has no second derivative to check) says why in no_gradgradcheck.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "xgrad/xgrad.h"

namespace xgrad::testing {

struct GradcheckRow {
  std::string name;  // "softmax/dim-1/noncontig" (any chars)
  std::function<std::vector<Tensor>()> make_inputs;
  GradcheckFn fn;
  double atol = 1e-6;
  double rtol = 1e-4;
  bool strided_inputs = true;  // see above: false only with a reason
  bool broadcast_inputs = true;
  std::string no_gradgradcheck;  // why gradgradcheck cannot run on this row ("": it runs)
};

// One way to lay out a row's inputs: the leaves gradcheck perturbs and the fn that reads them.
struct InputLayout {
  std::string name;  // "as made", "strided", "broadcast"
  std::vector<Tensor> inputs;
  GradcheckFn fn;
};
// The row's inputs as made, then "strided" and "broadcast" when they change some input.
std::vector<InputLayout> input_layouts(const GradcheckRow& row);

// float64 randn leaves requiring grad, one per shape, from a fixed generator.
std::vector<Tensor> inputs(const std::vector<Shape>& shapes, uint64_t seed = 7);
// A non-contiguous float64 leaf of `shape` (the transpose of a contiguous tensor).
Tensor noncontig(const Shape& shape, uint64_t seed = 11);
// A float64 leaf with values in [lo, hi] (for log, sqrt, pow...).
Tensor positive(const Shape& shape, double lo = 0.5, double hi = 2.0, uint64_t seed = 13);

std::string row_name(const ::testing::TestParamInfo<GradcheckRow>& info);

// gtest prints a failing row by its name rather than as a byte dump
inline void PrintTo(const GradcheckRow& row, std::ostream* os) { *os << row.name; }

class OpGradcheck : public ::testing::TestWithParam<GradcheckRow> {};

}  // namespace xgrad::testing
