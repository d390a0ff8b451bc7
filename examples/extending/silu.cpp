// examples/extending/silu.cpp: the silu op (see silu.h). The forward is a plain loop over a
// contiguous buffer; the backward closure sits right under it and uses public ops.
#include "silu.h"

#include <cmath>

namespace ext {

using namespace xgrad;

namespace {
// out[i] = x[i] * sigmoid(x[i]) = x[i] / (1 + exp(-x[i])), on contiguous buffers
template <class T>
void silu_kernel(const T* x, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] / (T(1) + std::exp(-x[i]));
}
}  // namespace

Tensor silu(const Tensor& x) {
  if (!x.defined()) fail("silu", "got an undefined tensor");
  if (!x.is_floating_point())
    fail("silu", "expected a float32 or float64 tensor, got ", dtype_name(x.dtype()), " tensor of shape ",
         x.shape());

  // forward: read x through a contiguous handle (detach() first, so a copy made for a
  // strided x is not recorded), write a fresh contiguous tensor
  Tensor xc = x.detach().contiguous();
  Tensor out = empty(x.shape(), x.dtype());
  if (x.dtype() == kFloat32) silu_kernel(xc.data_ptr<float>(), out.data_ptr<float>(), out.numel());
  else silu_kernel(xc.data_ptr<double>(), out.data_ptr<double>(), out.numel());

  return record("SiluBackward0", out, {x}, [x = save(x)](const Tensor& dout, Grads& grads) {
    // in the forward pass out = x * s with s = sigmoid(x), and ds/dx = s * (1 - s),
    // so the gradient is dx = dout * (s + x * s * (1 - s)) = dout * s * (1 + x * (1 - s))
    if (grads.wants(0)) {
      const Tensor& xv = x.get();
      Tensor s = sigmoid(xv);
      grads.add(0, dout * s * (1.0 + xv * (1.0 - s)));
    }
  });
}

}  // namespace ext
