// core/src/ops/rotary.cpp: apply_rotary_emb, rotary position embeddings in the rotate-half
// convention (Llama, GPT-NeoX), as a fused forward/backward pair.
//
// reference: Su et al. 2021, "RoFormer", https://arxiv.org/abs/2104.09864; the rotate-half
// form of Hugging Face's apply_rotary_pos_emb and of the book's Llama apply_rope. With x's
// last dim split in halves x = (x1, x2) and cos, sin (t, D) broadcast over x's leading dims:
//   out = x * cos + rotate_half(x) * sin,   rotate_half(x) = cat(-x2, x1)
// rotate_half is a linear map R with R^T = -R, so
//   dx = dout * cos - rotate_half(dout * sin)
//   dcos = sum over the leading dims of dout * x,  dsin = ... of dout * rotate_half(x)
// The kernels (kernels/rotary_kernel.h) compute out and dx; the closure below calls the
// backward kernel in an ordinary backward and recorded ops under grad mode (backward with
// create_graph), so the gradient can be differentiated again. The tables' gradients (rarely
// wanted: the tables are usually constants) are always recorded ops.
#include <utility>

#include "kernels.h"
#include "rotary_kernel.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// cat(-x2, x1) along the last dim, in recorded ops
Tensor rotate_half(const Tensor& x) {
  const int64_t last = x.dim() - 1, h = x.size(last) / 2;
  return cat({neg(x.narrow(last, h, h)), x.narrow(last, 0, h)}, last);
}

// x (..., t, D) with D even and positive; cos and sin both (t, D) of x's dtype, or float32 or
// bfloat16 for a bfloat16 x.
void check_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  if (x.dim() < 2)
    fail("apply_rotary_emb", "x must have at least 2 dims (..., seq, head_dim), got shape ", x.shape());
  const int64_t t = x.size(x.dim() - 2), D = x.size(x.dim() - 1);
  if (D <= 0 || D % 2 != 0)
    fail("apply_rotary_emb", "head_dim (x's last dim) must be even and positive, got x of shape ", x.shape());
  if (cos.shape() != Shape{t, D} || sin.shape() != Shape{t, D})
    fail("apply_rotary_emb", "cos and sin must both be (seq, head_dim) = [", t, ", ", D, "] for x of shape ",
         x.shape(), ", got cos of shape ", cos.shape(), " and sin of shape ", sin.shape());
  if (x.dtype() == kBFloat16) {
    for (const Tensor* table : {&cos, &sin})
      if (table->dtype() != kFloat32 && table->dtype() != kBFloat16)
        fail("apply_rotary_emb", "a bfloat16 x (shape ", x.shape(),
             ") takes float32 or bfloat16 cos and sin, got cos of dtype ", dtype_name(cos.dtype()),
             " and sin of dtype ", dtype_name(sin.dtype()));
    return;
  }
  kernels::check_floating("apply_rotary_emb", x);
  check_same_dtype("apply_rotary_emb", x, cos);
  check_same_dtype("apply_rotary_emb", x, sin);
}

}  // namespace

Tensor apply_rotary_emb(const Tensor& x, const Tensor& cos_in, const Tensor& sin_in) {
  profiler::RecordFunction rec("apply_rotary_emb");
  check_rotary(x, cos_in, sin_in);
  // a bfloat16 x is rotated in float32 and rounded once, as the book's apply_rope computes
  // (x * cos + rotated * sin) with float32 tables and converts the result to x's dtype
  const Tensor cos = x.dtype() == kBFloat16 ? cos_in.to(kFloat32) : cos_in;
  const Tensor sin = x.dtype() == kBFloat16 ? sin_in.to(kFloat32) : sin_in;
  Tensor out = empty(x.shape(), x.dtype());  // (..., t, D)
  kernels::rotary_emb_forward(x.stride(x.dim() - 1) == 1 ? x : contig(x), contig(cos), contig(sin), out);
  const bool tables_grad = cos.requires_grad() || sin.requires_grad();  // x is saved for them only
  return record("RotaryEmbBackward0", out, {x, cos, sin},
                [xs = save(tables_grad ? x : Tensor()), cs = save(cos), ss = save(sin)](const Tensor& dout,
                                                                                        Grads& grads) {
                  // in the forward pass out = x * cos + rotate_half(x) * sin, so
                  //   dx = dout * cos - rotate_half(dout * sin)
                  //   dcos = dout * x, dsin = dout * rotate_half(x)   (summed over x's leading dims)
                  // (a bfloat16 x: in float32 on the widened dout and x, dx rounded once)
                  const Tensor c = cs.get(), s = ss.get();
                  if (grads.wants(0)) {
                    if (GradMode::is_enabled()) {
                      grads.add(0, (dout * c - rotate_half(dout * s)).to(dout.dtype()));
                    } else {
                      const Tensor d = dout.stride(dout.dim() - 1) == 1 ? dout : contig(dout);
                      Tensor dx = empty(dout.shape(), dout.dtype());
                      kernels::rotary_emb_backward(d, contig(c), contig(s), dx);
                      grads.add(0, std::move(dx));
                    }
                  }
                  if (grads.wants(1) || grads.wants(2)) {
                    const Tensor d = dout.to(c.dtype()), xw = xs.get().to(c.dtype());
                    if (grads.wants(1)) grads.add(1, sum_to(d * xw, c.shape()));
                    if (grads.wants(2)) grads.add(2, sum_to(d * rotate_half(xw), s.shape()));
                  }
                });
}

}  // namespace xgrad
