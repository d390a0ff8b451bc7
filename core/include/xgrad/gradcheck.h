// xgrad/gradcheck.h: check an op's backward against central finite differences (gradcheck),
// and its backward's backward (gradgradcheck).
//
// The loss is a randomly weighted sum of the output (a plain sum would hide a wrong softmax
// backward, since softmax rows sum to one). Inputs should be float64 for tight tolerances;
// every input that requires grad is perturbed element by element, including non-contiguous
// and broadcast (stride-0) views. On failure the result names the op, the input, the element
// and both derivatives.
//
// Backward is run once per layout of its upstream gradient (dout): contiguous, then, with
// dout_layouts on, the same weights as the op above would hand them over: offset into a
// larger buffer, transposed (all dims reversed), sliced with a step (every other element of a
// buffer twice as wide along the last dim longer than 1) and expanded (stride 0 along the last dim longer
// than 1 that is not the last dim -- the rows of a row-wise op -- or along the last dim of a vector; the
// weights then repeat). The finite differences are taken once per element, as a whole column of the Jacobian,
// and dotted with each layout's weights: the extra layouts cost backward passes only.
//
//   auto x = randn({3, 4}, nullptr, kFloat64).requires_grad_();
//   auto r = gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0], -1); }, {x},
//                      {.name = "softmax"});
//   EXPECT_TRUE(r.ok) << r.message;
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xgrad/tensor.h"

namespace xgrad {

struct GradcheckOptions {
  std::string name = "fn";  // reported in messages
  double eps = 1e-6;        // finite-difference step
  double atol = 1e-5;       // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-3;
  uint64_t seed = 1234;      // for the loss weights
  bool dout_layouts = true;  // also hand backward strided, offset and expanded douts
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // empty when ok
  double max_abs_error = 0.0;
  // the dout layouts backward was run with: "contiguous", "offset", "transposed",
  // "step-sliced", "expanded" (a layout a shape cannot have, e.g. transposed for 1-D, is left out)
  std::vector<std::string> layouts;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// torch.autograd.gradgradcheck: checks that the first-order gradient is itself differentiated
// right. With random grad_outputs v (float64 randn of fn's output shape, a leaf that requires
// grad), the function (inputs, v) -> autograd::grad(fn(inputs), inputs, v, create_graph) (the
// gradients of the inputs that require grad, flattened and concatenated; one an input does not
// reach counts as zeros) goes through gradcheck: its backward (the double backward of every op
// in fn) against central differences of the first-order gradient, with respect to the inputs
// and to v. A backward that does not record under create_graph fails here (its gradient has no
// history, or the wrong one).
//
// v is checked contiguous and non-contiguous (every other element of a buffer twice as wide
// along its last dim longer than 1, as torch's gen_non_contig_grad_outputs); dout_layouts
// applies to the second-order pass (the layouts of the gradient flowing into the gradients).
//
//   auto r = gradgradcheck([](const std::vector<Tensor>& in) { return tanh(in[0]); }, {x},
//                          {.name = "tanh"});
//   EXPECT_TRUE(r.ok) << r.message;
struct GradgradcheckOptions {
  std::string name = "fn";
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;                    // for v and the second-order loss weights
  bool contiguous_grad_outputs = true;     // check with v contiguous
  bool noncontiguous_grad_outputs = true;  // and with v laid out with a step
  bool dout_layouts = true;                // gradcheck's dout layouts for the second-order pass
};

GradcheckResult gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                              const GradgradcheckOptions& options = {});

}  // namespace xgrad
