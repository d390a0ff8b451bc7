// core/src/ops/silu_mul.cpp: silu_mul(a, b) = silu(a) * b, the gated product of a SwiGLU
// feed-forward (Llama's fc3(silu(fc1(x)) * fc2(x))), as a fused forward/backward pair.
//
// reference: Shazeer 2020, "GLU Variants Improve Transformer", https://arxiv.org/abs/2002.05202
// With s = sigmoid(a):
//   out = a * s * b
//   da = dout * b * s * (1 + a * (1 - s)),   db = dout * a * s
// The kernels (kernels/silu_mul_kernel.h) make one pass each way where silu then mul make two;
// the closure calls the backward kernel in an ordinary backward and recorded ops under grad
// mode (backward with create_graph), so the gradient can be differentiated again.
#include <utility>

#include "kernels.h"
#include "op_helpers.h"
#include "silu_mul_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

Tensor silu_mul(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("silu_mul");
  if (a.shape() != b.shape())
    fail("silu_mul", "a and b must have one shape, got a of shape ", a.shape(), " and b of shape ",
         b.shape());
  check_floating_any("silu_mul", a);  // bfloat16: float32 arithmetic, each result rounded once
  check_same_dtype("silu_mul", a, b);
  Tensor out = empty(a.shape(), a.dtype());
  kernels::silu_mul_forward(contig(a), contig(b), out);
  return record("SiluMulBackward0", out, {a, b},
                [as = save(a), bs = save(b)](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a * s * b with s = sigmoid(a), so
                  //   da = dout * b * s * (1 + a * (1 - s)), db = dout * a * s
                  const Tensor &x = as.get(), &y = bs.get();
                  if (GradMode::is_enabled()) {  // create_graph: recorded ops, differentiable again
                    // (bfloat16: in float32 on widened copies, each gradient rounded once)
                    const DType dt = x.dtype(), compute = dt == kBFloat16 ? kFloat32 : dt;
                    const Tensor xw = x.to(compute), yw = y.to(compute), d = dout.to(compute);
                    const Tensor s = sigmoid(xw);
                    if (grads.wants(0)) grads.add(0, (d * yw * s * (xw * (1.0 - s) + 1.0)).to(dt));
                    if (grads.wants(1)) grads.add(1, (d * xw * s).to(dt));
                    return;
                  }
                  Tensor da = grads.wants(0) ? empty(x.shape(), x.dtype()) : Tensor();
                  Tensor db = grads.wants(1) ? empty(y.shape(), y.dtype()) : Tensor();
                  kernels::silu_mul_backward(contig(x), contig(y), contig(dout), da, db);
                  if (da.defined()) grads.add(0, std::move(da));
                  if (db.defined()) grads.add(1, std::move(db));
                });
}

}  // namespace xgrad
