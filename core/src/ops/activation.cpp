// core/src/ops/activation.cpp: softmax, log_softmax, relu, sigmoid, gelu.
//
// Each op computes into a fresh contiguous tensor from a contiguous view of its input (a
// strided input is copied once, unrecorded), then records its backward right below. The
// kernels are forward/backward pairs in kernels/activation_kernel.h (xsimd batches through
// vec_math.h). Adding an activation: a kernel pair there (forward with vec::map, backward
// with vec::map2 on (dout, saved)), the op here (check, kernel call, record), a row in
// tests/core/gradcheck_rows_activation.cpp and a case in tests/fixtures/gen_activation_nn.py.
//
// Every backward has two paths side by side. With grad mode off (an ordinary backward) it
// calls the fused kernel. With grad mode on (backward with create_graph) it writes the same
// formula in recorded ops on the saved tensors, so the gradient can be differentiated again:
// softmax's is torch's _softmax_backward_data, y * (dy - sum(dy * y)), composed.
// tests/core/test_fused_composed.cpp pins that the two give the same gradient.
//
// softmax / log_softmax see the input as (outer, C, inner) with C the softmax dim: inner == 1
// (the last dim) runs row by row; otherwise the loops run over C with the inner positions as
// the vectorised axis, so no transpose is needed. Rows are shifted by their max, so -inf
// entries give exactly 0 (softmax) / -inf (log_softmax) and finite gradients; a row that is
// entirely -inf gives NaN, as in torch (softmax of [-inf, -inf] is 0/0).
//
// bfloat16: every kernel here reads and writes it itself (float32 blocks on the stack, or
// float32 rows per thread): the arithmetic is float32 and each result is rounded once,
// forward and backward (relu moves elements and is exact).
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "activation_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

template <bool Log>
Tensor softmax_impl(const char* op, const char* node, const Tensor& a, int64_t dim) {
  const int64_t d = wrap_dim(op, dim, a.shape());
  const kernels::Rows g = kernels::rows_around(a.shape(), d);
  check_floating_any(op, a);
  Tensor out = empty(a.shape(), a.dtype());  // the kernel reads bfloat16 itself (float32 rows)
  kernels::softmax_forward<Log>(contig(a), out, g);
  return record(node, out, {a}, [y = save(out), g, d](const Tensor& dout, Grads& grads) {
    // in the forward pass y = softmax(x) along C, so dx = y * (dy - sum(dy * y));
    // for y = log_softmax(x), dx = dy - exp(y) * sum(dy)
    const Tensor& yv = y.get();
    if (GradMode::is_enabled()) {
      grads.add(0, Log ? dout - exp(yv) * sum(dout, d, true) : yv * (dout - sum(dout * yv, d, true)));
      return;
    }
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::softmax_backward<Log>(yv, contig(dout), dx, g);
    grads.add(0, std::move(dx));
  });
}

}  // namespace

// ---------------------------------------------------------------- softmax / log_softmax
Tensor softmax(const Tensor& a, Int dim) {
  profiler::RecordFunction rec("softmax");
  return softmax_impl<false>("softmax", "SoftmaxBackward0", a, dim);
}

Tensor log_softmax(const Tensor& a, Int dim) {
  profiler::RecordFunction rec("log_softmax");
  return softmax_impl<true>("log_softmax", "LogSoftmaxBackward0", a, dim);
}

// ---------------------------------------------------------------- relu
Tensor relu(const Tensor& a) {
  profiler::RecordFunction rec("relu");
  check_floating_any("relu", a);
  Tensor out = empty(a.shape(), a.dtype());
  kernels::relu_forward(contig(a), out);
  return record("ReluBackward0", out, {a}, [y = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = max(x, 0), so dx = dy where y > 0, else 0
    const Tensor& yv = y.get();
    if (GradMode::is_enabled()) {
      grads.add(0, where(yv > 0.0, dout, 0.0));
      return;
    }
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::relu_backward(yv, contig(dout), dx);
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- sigmoid
Tensor sigmoid(const Tensor& a) {
  profiler::RecordFunction rec("sigmoid");
  check_floating_any("sigmoid", a);
  Tensor out = empty(a.shape(), a.dtype());
  kernels::sigmoid_forward(contig(a), out);
  return record("SigmoidBackward0", out, {a}, [y = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = 1 / (1 + exp(-x)), so dx = dy * (1 - y) * y
    const Tensor& yv = y.get();
    if (GradMode::is_enabled()) {
      grads.add(0, dout * (1.0 - yv) * yv);
      return;
    }
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::sigmoid_backward(yv, contig(dout), dx);
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- gelu
// The formulas (torch's, with their derivatives) are vec::gelu_tanh(_grad) and
// vec::gelu_erf(_grad) in vec_math.h. The forward saves x, as torch's GeluBackward0 does, and
// the backward evaluates the derivative again from x in the loop that multiplies it by dy:
// recomputing the derivative costs less than a forward that writes it as a second tensor and
// a backward that reads it back, once the tensors outgrow the L2 cache. The derivative is the
// same expression either way, and so are the bits of dx. A strided x is saved as it is (its
// history is what a recorded backward differentiates) and made contiguous for the kernel.
namespace {

// gelu'(x) in recorded ops, the expressions of vec::gelu_erf_grad and vec::gelu_tanh_grad:
//   none: Phi(x) + x phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt(2))), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3 kappa x^2), t = tanh(beta (x + kappa x^3))
Tensor gelu_derivative(const Tensor& x, bool tanh_approx) {
  if (!tanh_approx) {
    const Tensor cdf = 0.5 * (1.0 + erf(x * (1.0 / std::numbers::sqrt2)));
    const Tensor pdf = exp(x * x * -0.5) * (std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    return cdf + x * pdf;
  }
  const double beta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi, kappa = 0.044715;  // sqrt(2/pi)
  const Tensor t = tanh(beta * (x + kappa * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * (beta * (1.0 + 3.0 * kappa * x * x));
}

}  // namespace

Tensor gelu(const Tensor& a, const std::string& approximate) {
  profiler::RecordFunction rec("gelu");
  const bool tanh_approx = approximate == "tanh";
  if (!tanh_approx && approximate != "none")
    fail("gelu", "approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  check_floating_any("gelu", a);
  Tensor out = empty(a.shape(), a.dtype());  // the kernel reads bfloat16 itself (float32 blocks)
  kernels::gelu_forward(contig(a), out, tanh_approx);
  return record("GeluBackward0", out, {a}, [xs = save(a), tanh_approx](const Tensor& dout, Grads& grads) {
    // in the forward pass y = gelu(x), so dx = dout * gelu'(x), gelu' from the saved x
    const Tensor& xv = xs.get();
    if (GradMode::is_enabled()) {
      grads.add(0, dout * gelu_derivative(xv, tanh_approx));
      return;
    }
    Tensor dx = empty(xv.shape(), xv.dtype());  // the kernel reads bfloat16 itself (float32 blocks)
    kernels::gelu_backward(contig(xv), contig(dout), dx, tanh_approx);
    grads.add(0, std::move(dx));
  });
}

}  // namespace xgrad
