// tests/core/gradcheck_rows_checkpoint.cpp: gradcheck rows for utils::checkpoint
// (core/src/checkpoint.cpp): the gradient a checkpoint hands its inputs, and the tensors fn
// uses without receiving them, from the rerun of fn in backward.
#include <string>
#include <vector>

#include "gradcheck_table.h"
#include "xgrad/checkpoint.h"

namespace xgrad::testing {

namespace {
using V = std::vector<Tensor>;

// A checkpoint cannot be differentiated twice: a pass that creates a graph through it throws.
const char* kNoDoubleBackward =
    "a pass that creates a graph (create_graph) through a checkpoint throws: the rerun's "
    "gradients are not recorded";

GradcheckRow checkpoint_row(std::string name, std::function<V()> make, GradcheckFn fn) {
  GradcheckRow row{std::move(name), std::move(make), std::move(fn)};
  row.no_gradgradcheck = kNoDoubleBackward;
  return row;
}
}  // namespace

std::vector<GradcheckRow> checkpoint_rows() {
  std::vector<GradcheckRow> rows;
  // the weight reaches fn by capture, not as an input: its gradient crosses the boundary
  rows.push_back(checkpoint_row(
      "checkpoint/captured-weight",
      [] {
        return inputs({{3, 4}, {5, 4}});
      },
      [](const V& x) {
        const Tensor w = x[1];  // by value: fn runs again in backward
        return utils::checkpoint([w](const Tensor& t) { return tanh(matmul(t, w.t())); }, x[0]);
      }));
  // two inputs, two outputs, and an input also used after the checkpoint
  rows.push_back(checkpoint_row(
      "checkpoint/two-in-two-out",
      [] {
        return inputs({{2, 3}, {2, 3}});
      },
      [](const V& x) {
        V out = utils::checkpoint([](const V& in) { return V{mul(in[0], in[1]), exp(in[0])}; }, {x[0], x[1]});
        return add(mul(out[0], out[1]), x[0]).sum(-1);
      }));
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, OpGradcheck, ::testing::ValuesIn(checkpoint_rows()), row_name);

}  // namespace xgrad::testing
