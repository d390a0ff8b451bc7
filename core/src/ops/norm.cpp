// core/src/ops/norm.cpp: rms_norm, torch 2.4's F.rms_norm, as a fused forward/backward pair; and
// norm, the p-norm over dims (torch.norm / linalg.vector_norm), composed of recorded ops.
//
// reference: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; torch 2.4's
// rms_norm (aten/src/ATen/native/layer_norm.cpp). Over the trailing dims normalized_shape:
//   y = x * rstd * w,   rstd = 1 / sqrt(mean(x^2) + eps)
// The forward kernel saves rstd per row (kernels/norm_kernel.h); the backward closure right
// below calls the backward kernel in an ordinary backward, and under grad mode (backward with
// create_graph) computes the same gradients from recorded ops, so they can be differentiated
// again (tests/core/test_rms_norm_rotary.cpp pins that the two agree).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "kernels.h"
#include "norm_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// The backward in recorded ops, normalising over x's last k dims. rstd is computed again from
// x here, rather than taken from the forward, so that dx's dependence on x through it is
// recorded too. With xhat = x * rstd and g = dy * w:
//   dx = rstd * (g - xhat * mean(g * xhat)),   dw = sum_rows(dy * xhat)
void rms_norm_backward_recorded(const Tensor& x, const Tensor& w, const Tensor& dy, int64_t k, double eps,
                                Grads& grads) {
  Shape rows, cols;  // the leading dims (one per normalised row) and the normalised ones
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? rows : cols).push_back(d);
  const Dims over_cols(cols);
  const Tensor rs = rsqrt(mean(x * x, over_cols, true) + eps);
  const Tensor xhat = x * rs;
  if (grads.wants(0)) {
    const Tensor g = w.defined() ? dy * w : dy;
    grads.add(0, rs * (g - xhat * mean(g * xhat, over_cols, true)));
  }
  if (grads.wants(1)) grads.add(1, rows.empty() ? dy * xhat : sum(dy * xhat, Dims(rows)));
}

// The checks: normalized_shape non-empty and trailing in x, x floating, weight (if any) of
// normalized_shape and x's dtype.
void check_rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight) {
  const auto k = static_cast<int64_t>(normalized_shape.size());
  if (k == 0) fail("rms_norm", "normalized_shape must have at least one dim, got ", normalized_shape);
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.shape()[x.dim() - k + i] == normalized_shape[i];
  if (!ok)
    fail("rms_norm", "normalized_shape ", normalized_shape,
         " does not match the trailing dims of input shape ", x.shape());
  kernels::check_floating("rms_norm", x);
  if (!weight.defined()) return;
  if (weight.shape() != normalized_shape)
    fail("rms_norm", "weight of shape ", weight.shape(), " does not match normalized_shape ",
         normalized_shape);
  check_same_dtype("rms_norm", x, weight);
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  profiler::RecordFunction rec("rms_norm");
  check_rms_norm(x, normalized_shape, weight);
  // torch.finfo(x.dtype).eps when eps is None
  const double e = eps.value_or(x.dtype() == kFloat32 ? std::numeric_limits<float>::epsilon()
                                                      : std::numeric_limits<double>::epsilon());
  if (!(e >= 0)) fail("rms_norm", "eps must be >= 0, got ", e, " (input of shape ", x.shape(), ")");
  const int64_t N = numel_of(normalized_shape);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  Tensor out = empty(x.shape(), x.dtype());
  Tensor rstd = empty({M}, x.dtype());
  kernels::rms_norm_forward(contig(x), weight.defined() ? contig(weight) : Tensor(), e, M, N, out, rstd);
  return record(
      "RmsNormBackward0", out, {x, weight},
      [xs = save(x), ws = save(weight), rstd, normalized_shape, M, N, e](const Tensor& dout, Grads& grads) {
        // in the forward pass y = xhat * w with xhat = x * rstd, so
        //   dweight = sum_rows(dy * xhat), dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w
        const Tensor w = ws.defined() ? ws.get() : Tensor();
        if (GradMode::is_enabled()) {
          rms_norm_backward_recorded(xs.get(), w, dout, static_cast<int64_t>(normalized_shape.size()), e,
                                     grads);
          return;
        }
        const DType dt = xs.get().dtype();
        Tensor dx = grads.wants(0) ? empty(xs.get().shape(), dt) : Tensor();
        Tensor dw = grads.wants(1) ? zeros(normalized_shape, dt) : Tensor();
        kernels::rms_norm_backward(contig(xs.get()), w.defined() ? contig(w) : Tensor(), contig(dout), rstd,
                                   M, N, dx, dw);
        if (dx.defined()) grads.add(0, std::move(dx));
        if (dw.defined()) grads.add(1, std::move(dw));
      });
}

// ---------------------------------------------------------------- norm (torch.linalg.vector_norm)

Tensor norm(const Tensor& a, double p, Dims dims, Flag keepdim) {
  profiler::RecordFunction rec("norm");
  kernels::check_floating("norm", a);
  if (!(p > 0.0)) fail("norm", "p must be positive or inf, got ", p, " (shape ", a.shape(), ")");
  Shape keep = a.shape();  // the output with reduced dims kept as size 1
  for (int64_t d : dims) {
    const int64_t r = a.dim();
    if (d < -std::max<int64_t>(r, 1) || d >= std::max<int64_t>(r, 1))
      fail("norm", "dimension ", d, " is out of range for a tensor of shape ", a.shape());
    if (r > 0) keep[d < 0 ? d + r : d] = 1;
  }
  if (dims.empty()) std::fill(keep.begin(), keep.end(), 1);
  Tensor out;
  {
    NoGradGuard no_grad;
    if (std::isinf(p)) out = amax(abs(a), dims, keepdim);
    else if (p == 1.0) out = sum(abs(a), dims, keepdim);
    else if (p == 2.0) out = sqrt(sum(mul(a, a), dims, keepdim));
    else out = pow(sum(pow(abs(a), p), dims, keepdim), 1.0 / p);
  }
  return record("NormBackward1", out, {a},
                [as = save(a), outs = save(out), keep, p, dims](const Tensor& dout, Grads& grads) {
                  const Tensor& x = as.get();
                  const Tensor n = outs.get().reshape(keep);
                  const Tensor g = dout.reshape(keep);
                  const Tensor sgn = sub(gt(x, 0.0).to(x.dtype()), lt(x, 0.0).to(x.dtype()));
                  if (std::isinf(p)) {
                    // in the forward pass out = max |x|: the gradient is split among the elements reaching
                    // it, with their sign
                    const Tensor hit = eq(abs(x), n).to(x.dtype());
                    grads.add(0, mul(mul(sgn, hit), div(g, sum(hit, dims, true))));
                  } else if (p == 1.0) {
                    // out = sum |x|, so dx = sign(x) * dout
                    grads.add(0, mul(sgn, g.expand(x.shape())));
                  } else {
                    // out = (sum |x|^p)^(1/p), so dx = sign(x) |x|^(p-1) / out^(p-1) * dout (for p = 2:
                    // x / out); torch takes 0 where out == 0
                    const Tensor scale = masked_fill(div(g, pow(n, p - 1.0)), eq(n, 0.0), 0.0);
                    grads.add(0, mul(mul(sgn, pow(abs(x), p - 1.0)), scale));
                  }
                });
}

}  // namespace xgrad
