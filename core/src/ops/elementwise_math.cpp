// core/src/ops/elementwise_math.cpp: the elementwise math beyond elementwise.cpp's: silu,
// softplus, sin, cos, log1p, expm1, erf and atan2.
//
// The unary maps run kernels::map_unary (elementwise_kernel.h): xsimd's sin, cos, log1p,
// expm1, erf and exp on batches for a contiguous input (f is called with batches and with
// scalars, so it calls the math function unqualified after `using std::sin;`), the strided
// row loop otherwise. Each backward is written with recorded ops (each differentiable itself);
// silu's also has a fused kernel (activation_kernel.h) that an ordinary backward (grad mode
// off) runs instead, as activation.cpp's ops do.
//
// dtypes as torch's: sin, cos, log1p, expm1, erf and atan2 compute an int64 or bool input in
// float32; silu and softplus take float32/float64 only; atan2's operands share one dtype.
//
// Adding an op: forward = kernels::map_unary(...) (map_same for two operands), record(...) with
// the backward right under it, a row in tests/core/gradcheck_rows_math.cpp and a case in
// tests/fixtures/gen_math.py.
#include <cmath>
#include <numbers>
#include <utility>

#include "activation_kernel.h"
#include "elementwise_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

// torch's integer-to-float rule for the math functions: int64 and bool compute in float32.
Tensor as_float(const Tensor& a) { return is_floating(a.dtype()) ? a : a.to(kFloat32); }

// The element type of a scalar or of an xsimd batch (a map's functor sees both).
template <class V>
struct element {
  using type = V;
};
template <class T, class A>
struct element<xsimd::batch<T, A>> {
  using type = T;
};

}  // namespace

// ---------------------------------------------------------------- silu / softplus
Tensor silu(const Tensor& a) {
  profiler::RecordFunction rec("silu");
  check_floating_any("silu", a);
  Tensor out = kernels::map_unary("silu", a, [](auto x) {
    using std::exp;
    return x / (decltype(x)(1) + exp(-x));
  });
  return record("SiluBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = x * s with s = sigmoid(x), so dx = dout * s * (1 + x * (1 - s))
    const Tensor& x = as.get();
    if (GradMode::is_enabled()) {  // create_graph: recorded ops, differentiable again
      const Tensor s = sigmoid(x);
      grads.add(0, mul(mul(dout, s), add(mul(x, sub(1.0, s)), 1.0)));
      return;
    }
    grads.add(0, in_float(x, dout, [](const Tensor& xc, const Tensor& g, const Tensor& dx) {
                kernels::silu_backward(xc, g, dx);
              }));
  });
}

Tensor softplus(const Tensor& a, double beta, double threshold) {
  profiler::RecordFunction rec("softplus");
  check_floating_any("softplus", a);
  Tensor out = kernels::map_unary("softplus", a, [beta, threshold](auto x) {
    using std::exp;
    using std::log1p;
    using V = decltype(x);
    using T = typename element<V>::type;
    const V b(static_cast<T>(beta));
    const V bx = x * b;
    return vec::vselect(bx > V(static_cast<T>(threshold)), x, V(log1p(exp(bx)) / b));
  });
  return record("SoftplusBackward0", out, {a},
                [as = save(a), beta, threshold](const Tensor& dout, Grads& grads) {
                  // in the forward pass y = log(1 + exp(beta x)) / beta (y = x where beta x > threshold),
                  // so dx = dout * sigmoid(beta x) (dout where beta x > threshold)
                  const Tensor bx = mul(as.get(), beta);
                  grads.add(0, where(gt(bx, threshold), dout, mul(dout, sigmoid(bx))));
                });
}

// ---------------------------------------------------------------- sin / cos
Tensor sin(const Tensor& a) {
  profiler::RecordFunction rec("sin");
  if (!is_floating(a.dtype())) return sin(as_float(a));
  Tensor out = kernels::map_unary("sin", a, [](auto x) {
    using std::sin;
    return sin(x);
  });
  return record("SinBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = sin(x), so dx = dout * cos(x)
    grads.add(0, mul(dout, cos(as.get())));
  });
}

Tensor cos(const Tensor& a) {
  profiler::RecordFunction rec("cos");
  if (!is_floating(a.dtype())) return cos(as_float(a));
  Tensor out = kernels::map_unary("cos", a, [](auto x) {
    using std::cos;
    return cos(x);
  });
  return record("CosBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = cos(x), so dx = -dout * sin(x)
    grads.add(0, mul(dout, neg(sin(as.get()))));
  });
}

// ---------------------------------------------------------------- log1p / expm1 / erf
Tensor log1p(const Tensor& a) {
  profiler::RecordFunction rec("log1p");
  if (!is_floating(a.dtype())) return log1p(as_float(a));
  Tensor out = kernels::map_unary("log1p", a, [](auto x) {
    using std::log1p;
    return log1p(x);
  });
  return record("Log1PBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = log(1 + x), so dx = dout / (1 + x)
    grads.add(0, div(dout, add(as.get(), 1.0)));
  });
}

Tensor expm1(const Tensor& a) {
  profiler::RecordFunction rec("expm1");
  if (!is_floating(a.dtype())) return expm1(as_float(a));
  Tensor out = kernels::map_unary("expm1", a, [](auto x) {
    using std::expm1;
    return expm1(x);
  });
  return record("Expm1Backward0", out, {a}, [outs = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = exp(x) - 1, so dx = dout * (y + 1)
    grads.add(0, mul(dout, add(outs.get(), 1.0)));
  });
}

Tensor erf(const Tensor& a) {
  profiler::RecordFunction rec("erf");
  if (!is_floating(a.dtype())) return erf(as_float(a));
  Tensor out = kernels::map_unary("erf", a, [](auto x) {
    using std::erf;
    return erf(x);
  });
  return record("ErfBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = erf(x), so dx = dout * 2 / sqrt(pi) * exp(-x^2)
    const Tensor& x = as.get();
    grads.add(0, mul(dout, mul(exp(neg(mul(x, x))), 2.0 / std::sqrt(std::numbers::pi))));
  });
}

// ---------------------------------------------------------------- atan2
Tensor atan2(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("atan2");
  if (!is_floating(a.dtype()) && !is_floating(b.dtype())) return atan2(as_float(a), as_float(b));
  if (auto p = promote(a, b)) return atan2(p->first, p->second);
  if (a.dtype() != b.dtype())
    fail("atan2", "dtype mismatch: ", dtype_name(a.dtype()), " tensor of shape ", a.shape(), " and ",
         dtype_name(b.dtype()), " tensor of shape ", b.shape(),
         " (xgrad does not promote dtypes; convert one with .to(...))");
  const Shape shape = kernels::broadcast_shapes("atan2", a.shape(), b.shape());
  Tensor out = kernels::map_same<2>("atan2", shape, {a, b}, [](auto y, auto x) { return std::atan2(y, x); });
  return record(
      "Atan2Backward0", out, {a, b},
      [sa = a.shape(), sb = b.shape(), as = save(a), bs = save(b)](const Tensor& dout, Grads& grads) {
        // in the forward pass out = atan2(a, b), the angle of the point (b, a), so
        // da = dout * b / (a^2 + b^2) and db = -dout * a / (a^2 + b^2)
        const Tensor& y = as.get();
        const Tensor& x = bs.get();
        const Tensor r2 = add(mul(y, y), mul(x, x));
        if (grads.wants(0)) grads.add(0, sum_to(div(mul(dout, x), r2), sa));
        if (grads.wants(1)) grads.add(1, sum_to(div(mul(dout, neg(y)), r2), sb));
      });
}

}  // namespace xgrad
