// core/src/ops/elementwise.cpp: arithmetic (add, sub, mul, div, neg, pow), math (exp, log,
// sqrt, rsqrt, tanh, abs, clamp), maximum/minimum, where, and sum_to, the helper that undoes
// broadcasting in every backward. (silu, softplus, sin, cos, log1p, expm1, erf and atan2 are
// in elementwise_math.cpp; the comparisons and logical_not in compare.cpp.)
//
// Every op is one map_* call: a loop over the broadcast output, row by row
// (kernels/elementwise_kernel.h's map_same, on kernels.h's parallel_for_each_row: split over
// xgrad's threads above kernels::kGrain elements, with the same per-element arithmetic, so
// results do not depend on the thread count), whose contiguous rows are plain loops the
// compiler vectorises. Backward
// closures reuse the same maps to fuse their formula into one pass (tanh: dout * (1 - y^2)).
// When the backward itself is recorded (grad mode on: a pass with create_graph), a closure
// computes its formula with recorded ops instead, so it can be differentiated again; both
// paths sit together and the gradcheck table checks both (gradcheck and gradgradcheck).
// Adding an op: forward = map_*(...), then record(...) with the backward right under it, and
// a row in tests/core/gradcheck_rows_elementwise.cpp.
//
// dtypes: math is float32/float64/bfloat16 with both operands of one dtype; add, sub, mul,
// maximum, minimum, clamp and where also take int64. bfloat16 computes each element in
// float32 and rounds once (map_same's InFloat); a number meeting a bfloat16 tensor is first
// rounded to bfloat16 (scalar_as), and a bfloat16 tensor meeting another dtype is promoted
// as torch does (promote, op_helpers.h), both at the top of the op.
#include <cmath>
#include <tuple>
#include <utility>

#include "elementwise_kernel.h"
#include "kernels.h"
#include "op_helpers.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

using kernels::map_same;
using kernels::map_typed;
using kernels::types;

template <class F>
Tensor map1(const char* op, const Tensor& a, F f, bool allow_int = false) {
  return map_same<1>(op, a.shape(), {a}, f, allow_int);
}

// Unary math with a SIMD body (vec_math.h: xsimd's exp/log/tanh/sqrt when available, about
// 1 ulp) for contiguous inputs. f is called with batches and with scalars, so it calls the
// math function unqualified after `using std::exp;` (ADL picks xsimd's for batches).
template <class F>
Tensor map1_simd(const char* op, const Tensor& a, F f) {
  if (!a.is_contiguous()) return map1(op, a, f);
  Tensor out = empty(a.shape(), a.dtype());
  kernels::map_simd(op, a, out, f);
  return out;
}

template <class F>
Tensor map2(const char* op, const Tensor& a, const Tensor& b, F f, bool allow_int = false) {
  check_same_dtype(op, a, b);
  const Shape shape = kernels::broadcast_shapes(op, a.shape(), b.shape());
  return map_same<2>(op, shape, {a, b}, f, allow_int);
}

// An int64 tensor with a fractional (or non-finite, or huge) scalar computes in float32, as
// torch does; only exactly representable integers stay in int64.
bool int_with_fraction(const Tensor& a, double s) {
  return a.dtype() == kInt64 && !(s == std::floor(s) && std::fabs(s) < 9.2e18);
}

template <class T>
constexpr T c(double v) {
  return static_cast<T>(v);
}

}  // namespace

// ---------------------------------------------------------------- sum_to
Tensor sum_to(const Tensor& grad, const Shape& shape) {
  profiler::RecordFunction rec("sum_to");
  const Shape& g = grad.shape();
  if (g == shape) return grad;  // the common no-broadcast case: no copy
  const int64_t lead = static_cast<int64_t>(g.size()) - static_cast<int64_t>(shape.size());
  if (lead < 0) fail("sum_to", "cannot sum a gradient of shape ", g, " to the larger shape ", shape);
  Shape dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const int64_t have = g[lead + i];
    if (shape[i] == have) continue;
    if (shape[i] != 1)
      fail("sum_to", "cannot sum a gradient of shape ", g, " to shape ", shape, " (dim ", i, ": ", have,
           " vs ", shape[i], ")");
    dims.push_back(lead + static_cast<int64_t>(i));
  }
  if (dims.empty()) return grad.reshape(shape);  // only size-1 leading dims differ
  return sum(grad, dims, /*keepdim=*/true).reshape(shape);
}

// ---------------------------------------------------------------- add / sub
namespace {
// float32 + bfloat16 (either order; a residual stream plus a bfloat16 block output) in one
// pass that widens the bfloat16 operand as it reads it: the bits of b.to(kFloat32) + a with
// no float32 copy. Each gradient is dout summed to its input's shape and converted to its
// dtype (the bfloat16 one rounded once, as to()'s backward would).
Tensor add_float32_bf16(const Tensor& a, const Tensor& b) {
  const Shape shape = kernels::broadcast_shapes("add", a.shape(), b.shape());
  using kernels::widen;
  Tensor out =
      a.dtype() == kFloat32
          ? map_typed<float>(
                kFloat32, shape, {a, b}, [](float x, bf16 y) { return x + widen(y); }, types<float, bf16>{})
          : map_typed<float>(
                kFloat32, shape, {a, b}, [](bf16 x, float y) { return widen(x) + y; }, types<bf16, float>{});
  return record(
      "AddBackward0", out, {a, b},
      [sa = a.shape(), sb = b.shape(), ta = a.dtype(), tb = b.dtype()](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a + b, so da = dout and db = dout (summed where broadcast)
        if (grads.wants(0)) grads.add(0, sum_to(dout, sa).to(ta));
        if (grads.wants(1)) grads.add(1, sum_to(dout, sb).to(tb));
      });
}
bool float32_with_bf16(const Tensor& a, const Tensor& b) {
  return (a.dtype() == kFloat32 && b.dtype() == kBFloat16) ||
         (a.dtype() == kBFloat16 && b.dtype() == kFloat32);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("add");
  if (float32_with_bf16(a, b)) return add_float32_bf16(a, b);
  if (auto p = promote(a, b)) return add(p->first, p->second);
  Tensor out = map2(
      "add", a, b, [](auto x, auto y) { return x + y; }, /*allow_int=*/true);
  return record("AddBackward0", out, {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a + b, so da = dout and db = dout (summed where broadcast)
                  if (grads.wants(0)) grads.add(0, sum_to(dout, sa));
                  if (grads.wants(1)) grads.add(1, sum_to(dout, sb));
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("sub");
  if (auto p = promote(a, b)) return sub(p->first, p->second);
  Tensor out = map2(
      "sub", a, b, [](auto x, auto y) { return x - y; }, /*allow_int=*/true);
  return record("SubBackward0", out, {a, b},
                [sa = a.shape(), sb = b.shape()](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a - b, so da = dout and db = -dout
                  if (grads.wants(0)) grads.add(0, sum_to(dout, sa));
                  if (grads.wants(1)) grads.add(1, neg(sum_to(dout, sb)));
                });
}

Tensor add(const Tensor& a, double b) {
  profiler::RecordFunction rec("add");
  b = scalar_as(a, b);
  if (int_with_fraction(a, b)) return add(a.to(kFloat32), b);
  Tensor out = map1(
      "add", a, [b](auto x) { return x + c<decltype(x)>(b); }, true);
  return record("AddBackward0", out, {a}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a + b, so da = dout
    grads.add(0, dout);
  });
}

Tensor sub(const Tensor& a, double b) {
  profiler::RecordFunction rec("sub");
  b = scalar_as(a, b);
  if (int_with_fraction(a, b)) return sub(a.to(kFloat32), b);
  Tensor out = map1(
      "sub", a, [b](auto x) { return x - c<decltype(x)>(b); }, true);
  return record("SubBackward0", out, {a}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a - b, so da = dout
    grads.add(0, dout);
  });
}

Tensor sub(double a, const Tensor& b) {
  profiler::RecordFunction rec("sub");
  a = scalar_as(b, a);
  if (int_with_fraction(b, a)) return sub(a, b.to(kFloat32));
  Tensor out = map1(
      "rsub", b, [a](auto y) { return c<decltype(y)>(a) - y; }, true);
  return record("RsubBackward1", out, {b}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a - b, so db = -dout
    grads.add(0, neg(dout));
  });
}

Tensor neg(const Tensor& a) {
  profiler::RecordFunction rec("neg");
  Tensor out = map1(
      "neg", a, [](auto x) { return -x; }, true);
  return record("NegBackward0", out, {a}, [](const Tensor& dout, Grads& grads) {
    // in the forward pass out = -a, so da = -dout
    grads.add(0, neg(dout));
  });
}

// ---------------------------------------------------------------- mul / div
Tensor mul(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("mul");
  if (auto p = promote(a, b)) return mul(p->first, p->second);
  Tensor out = map2(
      "mul", a, b, [](auto x, auto y) { return x * y; }, /*allow_int=*/true);
  // each input's gradient needs only the other input: save just that
  return record("MulBackward0", out, {a, b},
                [sa = a.shape(), sb = b.shape(), as = b.requires_grad() ? save(a) : SavedTensor(),
                 bs = a.requires_grad() ? save(b) : SavedTensor()](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a * b, so da = dout * b and db = dout * a
                  if (grads.wants(0)) grads.add(0, sum_to(mul(dout, bs.get()), sa));
                  if (grads.wants(1)) grads.add(1, sum_to(mul(dout, as.get()), sb));
                });
}

Tensor mul(const Tensor& a, double b) {
  profiler::RecordFunction rec("mul");
  b = scalar_as(a, b);
  if (int_with_fraction(a, b)) return mul(a.to(kFloat32), b);
  Tensor out = map1(
      "mul", a, [b](auto x) { return x * c<decltype(x)>(b); }, true);
  return record("MulBackward0", out, {a}, [b](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a * b, so da = dout * b
    grads.add(0, mul(dout, b));
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("div");
  if (auto p = promote(a, b)) return div(p->first, p->second);
  if (a.dtype() == kInt64 && b.dtype() == kInt64) return div(a.to(kFloat32), b.to(kFloat32));
  Tensor out = map2("div", a, b, [](auto x, auto y) { return x / y; });
  return record("DivBackward0", out, {a, b},
                [sa = a.shape(), sb = b.shape(), as = b.requires_grad() ? save(a) : SavedTensor(),
                 bs = save(b)](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = a / b, so da = dout / b and db = -dout * a / b^2
                  if (grads.wants(0)) grads.add(0, sum_to(div(dout, bs.get()), sa));
                  if (!grads.wants(1)) return;
                  const Tensor x = as.get(), y = bs.get();
                  if (GradMode::is_enabled()) return grads.add(1, sum_to(neg(dout) * x / (y * y), sb));
                  grads.add(1, sum_to(map_same<3>("div", dout.shape(), {dout, x, y},
                                                  [](auto g, auto x, auto y) { return -g * x / (y * y); }),
                                      sb));
                });
}

Tensor div(const Tensor& a, double b) {
  profiler::RecordFunction rec("div");
  if (a.dtype() == kInt64) return div(a.to(kFloat32), b);  // true division, as torch
  b = scalar_as(a, b);
  Tensor out = map1("div", a, [b](auto x) { return x / c<decltype(x)>(b); });
  return record("DivBackward0", out, {a}, [b](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a / b, so da = dout / b
    grads.add(0, div(dout, b));
  });
}

// torch computes 2 / x as x.reciprocal() * 2, hence its MulBackward0 name.
Tensor div(double a, const Tensor& b) {
  profiler::RecordFunction rec("div");
  if (b.dtype() == kInt64) return div(a, b.to(kFloat32));
  if (b.dtype() == kBFloat16) return mul(pow(b, -1.0), a);  // two roundings, as torch's reciprocal() * a
  Tensor out = map1("div", b, [a](auto y) { return c<decltype(y)>(a) / y; });
  return record("MulBackward0", out, {b}, [a, bs = save(b)](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a / b, so db = -dout * a / b^2
    if (GradMode::is_enabled()) return grads.add(0, dout * -a / (bs.get() * bs.get()));
    grads.add(0, map_same<2>("div", dout.shape(), {dout, bs.get()},
                             [a](auto g, auto y) { return -g * c<decltype(y)>(a) / (y * y); }));
  });
}

// ---------------------------------------------------------------- pow
Tensor pow(const Tensor& a, double e) {
  profiler::RecordFunction rec("pow");
  e = scalar_as(a, e);
  // the exponents torch special-cases (pow_tensor_scalar_optimized_kernel), same results
  Tensor out;
  if (e == 2.0) out = map1("pow", a, [](auto x) { return x * x; });
  else if (e == 3.0) out = map1("pow", a, [](auto x) { return x * x * x; });
  else if (e == 1.0) out = map1("pow", a, [](auto x) { return x; });
  else if (e == 0.5)
    out = map1_simd("pow", a, [](auto x) {
      using std::sqrt;
      return sqrt(x);
    });
  else if (e == -0.5)
    out = map1_simd("pow", a, [](auto x) {
      using std::sqrt;
      return decltype(x)(1) / sqrt(x);
    });
  else if (e == -1.0) out = map1("pow", a, [](auto x) { return decltype(x)(1) / x; });
  else if (e == -2.0) out = map1("pow", a, [](auto x) { return decltype(x)(1) / (x * x); });
  else out = map1("pow", a, [e](auto x) { return std::pow(x, c<decltype(x)>(e)); });
  return record("PowBackward0", out, {a}, [e, as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass out = a^e, so da = dout * e * a^(e-1) (zero when e == 0)
    const Tensor x = as.get();
    if (e == 0.0) return grads.add(0, zeros_like(x));
    if (GradMode::is_enabled()) return grads.add(0, dout * (pow(x, e - 1.0) * e));
    if (e == 2.0)
      return grads.add(0, map_same<2>("pow", x.shape(), {dout, x},
                                      [](auto g, auto v) { return g * (decltype(v)(2) * v); }));
    grads.add(0, map_same<2>("pow", x.shape(), {dout, x}, [e](auto g, auto v) {
                using T = decltype(v);
                return g * (c<T>(e) * std::pow(v, c<T>(e - 1.0)));
              }));
  });
}

Tensor pow(const Tensor& a, const Tensor& exponent) {
  profiler::RecordFunction rec("pow");
  if (auto p = promote(a, exponent)) return pow(p->first, p->second);
  Tensor out = map2("pow", a, exponent, [](auto x, auto y) { return std::pow(x, y); });
  return record(
      "PowBackward1", out, {a, exponent},
      [sa = a.shape(), sb = exponent.shape(), as = save(a), bs = save(exponent),
       outs = exponent.requires_grad() ? save(out) : SavedTensor()](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a^b, so da = dout * b * a^(b-1) and db = dout * out * log(a)
        // (torch's conventions: da = 0 where b == 0, db = 0 where a == 0 and b >= 0)
        const Shape& shape = dout.shape();
        if (GradMode::is_enabled()) {
          const Tensor x = as.get(), y = bs.get();
          if (grads.wants(0)) grads.add(0, sum_to(where(y == 0.0, 0.0, dout * (y * pow(x, y - 1.0))), sa));
          if (grads.wants(1)) {
            const Tensor db = dout * (outs.get() * log(x));
            grads.add(1, sum_to(where(x == 0.0, where(y >= 0.0, 0.0, db), db), sb));
          }
          return;
        }
        if (grads.wants(0))
          grads.add(0, sum_to(map_same<3>("pow", shape, {dout, as.get(), bs.get()},
                                          [](auto g, auto x, auto y) {
                                            using T = decltype(x);
                                            return y == T(0) ? T(0) : g * (y * std::pow(x, y - T(1)));
                                          }),
                              sa));
        if (grads.wants(1))
          grads.add(1, sum_to(map_same<4>("pow", shape, {dout, as.get(), bs.get(), outs.get()},
                                          [](auto g, auto x, auto y, auto r) {
                                            using T = decltype(x);
                                            return (x == T(0) && y >= T(0)) ? T(0) : g * (r * std::log(x));
                                          }),
                              sb));
      });
}

// ---------------------------------------------------------------- unary math
Tensor exp(const Tensor& a) {
  profiler::RecordFunction rec("exp");
  Tensor out = map1_simd("exp", a, [](auto x) {
    using std::exp;
    return exp(x);
  });
  return record("ExpBackward0", out, {a}, [outs = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = exp(a), so da = dout * y
    grads.add(0, mul(dout, outs.get()));
  });
}

Tensor log(const Tensor& a) {
  profiler::RecordFunction rec("log");
  Tensor out = map1_simd("log", a, [](auto x) {
    using std::log;
    return log(x);
  });
  return record("LogBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = log(a), so da = dout / a
    grads.add(0, div(dout, as.get()));
  });
}

Tensor sqrt(const Tensor& a) {
  profiler::RecordFunction rec("sqrt");
  Tensor out = map1_simd("sqrt", a, [](auto x) {
    using std::sqrt;
    return sqrt(x);
  });
  return record("SqrtBackward0", out, {a}, [outs = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = sqrt(a), so da = dout / (2 y)
    if (GradMode::is_enabled()) return grads.add(0, dout / (outs.get() * 2.0));
    grads.add(0, map_same<2>("sqrt", dout.shape(), {dout, outs.get()},
                             [](auto g, auto y) { return g / (decltype(y)(2) * y); }));
  });
}

Tensor rsqrt(const Tensor& a) {
  profiler::RecordFunction rec("rsqrt");
  Tensor out = map1_simd("rsqrt", a, [](auto x) {
    using std::sqrt;
    return decltype(x)(1) / sqrt(x);
  });
  return record("RsqrtBackward0", out, {a}, [outs = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = a^(-1/2), so da = -dout * y^3 / 2
    if (GradMode::is_enabled()) return grads.add(0, dout * pow(outs.get(), 3.0) * -0.5);
    grads.add(0, map_same<2>("rsqrt", dout.shape(), {dout, outs.get()},
                             [](auto g, auto y) { return decltype(y)(-0.5) * g * (y * y * y); }));
  });
}

Tensor tanh(const Tensor& a) {
  profiler::RecordFunction rec("tanh");
  Tensor out = map1_simd("tanh", a, [](auto x) {
    using std::tanh;
    return tanh(x);
  });
  return record("TanhBackward0", out, {a}, [outs = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = tanh(a), so da = dout * (1 - y^2)
    if (GradMode::is_enabled()) {
      const Tensor y = outs.get();
      return grads.add(0, dout * (1.0 - y * y));
    }
    grads.add(0, map_same<2>("tanh", dout.shape(), {dout, outs.get()},
                             [](auto g, auto y) { return g * (decltype(y)(1) - y * y); }));
  });
}

Tensor abs(const Tensor& a) {
  profiler::RecordFunction rec("abs");
  Tensor out = map1(
      "abs", a, [](auto x) { return x < decltype(x)(0) ? -x : x; }, true);
  return record("AbsBackward0", out, {a}, [as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = |a|, so da = dout * sign(a) (0 at a == 0)
    if (GradMode::is_enabled()) {
      const Tensor x = as.get();
      return grads.add(0, dout * ((x > 0.0).to(x.dtype()) - (x < 0.0).to(x.dtype())));
    }
    grads.add(0, map_same<2>("abs", dout.shape(), {dout, as.get()}, [](auto g, auto x) {
                using T = decltype(x);
                return x > T(0) ? g : (x < T(0) ? -g : T(0));
              }));
  });
}

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  profiler::RecordFunction rec("clamp");
  if (!min && !max)
    fail("clamp", "at least one of min and max must be given (tensor of shape ", a.shape(), ")");
  const bool has_lo = min.has_value(), has_hi = max.has_value();
  double lo = scalar_as(a, min.value_or(0.0)), hi = scalar_as(a, max.value_or(0.0));
  if (a.dtype() == kInt64) {  // keep the bounds representable before casting
    lo = std::fmax(std::fmin(lo, 9.2e18), -9.2e18);
    hi = std::fmax(std::fmin(hi, 9.2e18), -9.2e18);
  }
  // torch's order: max(min(x, hi)...) as min(max(x, lo), hi); NaN stays NaN
  Tensor out = map1(
      "clamp", a,
      [=](auto x) {
        using T = decltype(x);
        if (has_lo && x < c<T>(lo)) x = c<T>(lo);
        if (has_hi && x > c<T>(hi)) x = c<T>(hi);
        return x;
      },
      true);
  return record("ClampBackward1", out, {a}, [=, as = save(a)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = x inside [min, max], so dx = dout there and 0 outside
    if (GradMode::is_enabled()) {
      const Tensor x = as.get();
      Tensor dx = dout;
      if (has_lo) dx = where(x >= lo, dx, 0.0);
      if (has_hi) dx = where(x <= hi, dx, 0.0);
      return grads.add(0, dx);
    }
    grads.add(0, map_same<2>("clamp", dout.shape(), {dout, as.get()}, [=](auto g, auto x) {
                using T = decltype(x);
                return ((!has_lo || x >= c<T>(lo)) && (!has_hi || x <= c<T>(hi))) ? g : T(0);
              }));
  });
}

// ---------------------------------------------------------------- maximum / minimum / where
// NaN propagates; on ties the gradient is split half/half, as torch does.
namespace {
// The recorded backward of maximum (sign 1) and minimum (sign -1): a gets dout where it won,
// b where it did, each half on ties; a NaN comparison hands dout to both (as the fused path).
void split_by_weight(const Tensor& x, const Tensor& y, const Shape& sa, const Shape& sb, const Tensor& dout,
                     Grads& grads, double sign) {
  const DType t = dout.dtype();
  const Tensor a_lost = (sign > 0 ? x < y : x > y).to(t), b_lost = (sign > 0 ? x > y : x < y).to(t);
  const Tensor tie = (x == y).to(t) * 0.5;
  if (grads.wants(0)) grads.add(0, sum_to(dout * (1.0 - a_lost - tie), sa));
  if (grads.wants(1)) grads.add(1, sum_to(dout * (1.0 - b_lost - tie), sb));
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("maximum");
  if (auto p = promote(a, b)) return maximum(p->first, p->second);
  Tensor out = map2(
      "maximum", a, b, [](auto x, auto y) { return (x > y || x != x) ? x : y; }, true);
  return record(
      "MaximumBackward0", out, {a, b},
      [sa = a.shape(), sb = b.shape(), as = save(a), bs = save(b)](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a where a > b else b, so the gradient goes to the larger one
        const Shape& shape = dout.shape();
        if (GradMode::is_enabled()) return split_by_weight(as.get(), bs.get(), sa, sb, dout, grads, 1.0);
        if (grads.wants(0))
          grads.add(0, sum_to(map_same<3>("maximum", shape, {dout, as.get(), bs.get()},
                                          [](auto g, auto x, auto y) {
                                            using T = decltype(x);
                                            return x == y ? g * T(0.5) : (x < y ? T(0) : g);
                                          }),
                              sa));
        if (grads.wants(1))
          grads.add(1, sum_to(map_same<3>("maximum", shape, {dout, as.get(), bs.get()},
                                          [](auto g, auto x, auto y) {
                                            using T = decltype(x);
                                            return x == y ? g * T(0.5) : (x > y ? T(0) : g);
                                          }),
                              sb));
      });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("minimum");
  if (auto p = promote(a, b)) return minimum(p->first, p->second);
  Tensor out = map2(
      "minimum", a, b, [](auto x, auto y) { return (x < y || x != x) ? x : y; }, true);
  return record(
      "MinimumBackward0", out, {a, b},
      [sa = a.shape(), sb = b.shape(), as = save(a), bs = save(b)](const Tensor& dout, Grads& grads) {
        // in the forward pass out = a where a < b else b, so the gradient goes to the smaller one
        const Shape& shape = dout.shape();
        if (GradMode::is_enabled()) return split_by_weight(as.get(), bs.get(), sa, sb, dout, grads, -1.0);
        if (grads.wants(0))
          grads.add(0, sum_to(map_same<3>("minimum", shape, {dout, as.get(), bs.get()},
                                          [](auto g, auto x, auto y) {
                                            using T = decltype(x);
                                            return x == y ? g * T(0.5) : (x > y ? T(0) : g);
                                          }),
                              sa));
        if (grads.wants(1))
          grads.add(1, sum_to(map_same<3>("minimum", shape, {dout, as.get(), bs.get()},
                                          [](auto g, auto x, auto y) {
                                            using T = decltype(x);
                                            return x == y ? g * T(0.5) : (x < y ? T(0) : g);
                                          }),
                              sb));
      });
}

namespace {
// m ? x : y over cond (bool) and two tensors of one dtype (any), broadcast together.
Tensor select_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape) {
  return kernels::dispatch_any(a.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    return map_typed<T>(
        a.dtype(), shape, {cond, a, b}, [](bool m, T x, T y) { return m ? x : y; }, types<bool, T, T>{});
  });
}
}  // namespace

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  profiler::RecordFunction rec("where");
  if (cond.dtype() != kBool)
    fail("where", "the condition must be a bool tensor, got ", dtype_name(cond.dtype()), " of shape ",
         cond.shape(), " (compare first, e.g. where(x > 0, a, b))");
  if (auto p = promote(a, b)) return where(cond, p->first, p->second);
  check_same_dtype("where", a, b);
  const Shape shape = kernels::broadcast_shapes(
      "where", kernels::broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  Tensor out = select_where(cond, a, b, shape);
  return record("WhereBackward0", out, {a, b},
                [sa = a.shape(), sb = b.shape(), cs = save(cond)](const Tensor& dout, Grads& grads) {
                  // in the forward pass out = cond ? a : b, so da = dout where cond and db = dout elsewhere
                  if (GradMode::is_enabled()) {
                    if (grads.wants(0)) grads.add(0, sum_to(where(cs.get(), dout, 0.0), sa));
                    if (grads.wants(1)) grads.add(1, sum_to(where(cs.get(), 0.0, dout), sb));
                    return;
                  }
                  const Tensor zero = zeros({}, dout.dtype());
                  if (grads.wants(0))
                    grads.add(0, sum_to(select_where(cs.get(), dout, zero, dout.shape()), sa));
                  if (grads.wants(1))
                    grads.add(1, sum_to(select_where(cs.get(), zero, dout, dout.shape()), sb));
                });
}

// torch.where with a number for a branch: the number becomes a 0-d tensor of the other
// branch's dtype (float32 when an int64 branch meets a fraction, as add() does).
Tensor where(const Tensor& cond, const Tensor& a, double b) {
  profiler::RecordFunction rec("where");
  if (int_with_fraction(a, b)) return where(cond, a.to(kFloat32), b);
  return where(cond, a, scalar_tensor(b, a.dtype()));
}
Tensor where(const Tensor& cond, double a, const Tensor& b) {
  profiler::RecordFunction rec("where");
  if (int_with_fraction(b, a)) return where(cond, a, b.to(kFloat32));
  return where(cond, scalar_tensor(a, b.dtype()), b);
}

}  // namespace xgrad
