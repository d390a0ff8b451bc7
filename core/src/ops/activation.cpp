// core/src/ops/activation.cpp: softmax, log_softmax, relu, sigmoid, gelu.
//
// Each op computes into a fresh contiguous tensor from a contiguous view of its input (a
// strided input is copied once, unrecorded), then records its backward right below. The
// transcendental maps run through vec_math.h (xsimd batches when available). Adding an
// activation: forward with vec::map, backward with vec::map2 on (dout, saved), a row in
// tests/core/gradcheck_rows_activation.cpp and a case in tests/fixtures/gen_activation_nn.py.
//
// softmax / log_softmax see the input as (outer, C, inner) with C the softmax dim: inner == 1
// (the last dim) runs row by row; otherwise the loops run over C with the inner positions as
// the vectorised axis, so no transpose is needed. Rows are shifted by their max, so -inf
// entries give exactly 0 (softmax) / -inf (log_softmax) and finite gradients; a row that is
// entirely -inf gives NaN, as in torch (softmax of [-inf, -inf] is 0/0).
#include <cmath>
#include <utility>
#include <vector>

#include "kernels.h"
#include "vec_math.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"

namespace xgrad {

namespace {

int64_t wrap_dim(const char* op, int64_t d, const Tensor& a) {
  const int64_t r = std::max<int64_t>(a.dim(), 1);
  if (d < -r || d >= r)
    fail(op, "dimension ", d, " is out of range for a tensor of shape ", a.shape(), " (expected in [", -r,
         ", ", r - 1, "])");
  return d < 0 ? d + r : d;
}

// `t` itself when contiguous, else an unrecorded contiguous copy (callers record against t).
Tensor contig(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

// A tensor seen as (outer, C, inner) around dim d.
struct Rows {
  int64_t outer = 1, C = 1, inner = 1;
};
Rows rows_around(const Shape& s, int64_t d) {
  Rows g;
  if (s.empty()) return g;  // a 0-d tensor is one row of one element
  for (int64_t i = 0; i < d; ++i) g.outer *= s[i];
  g.C = s[d];
  for (std::size_t i = d + 1; i < s.size(); ++i) g.inner *= s[i];
  return g;
}

// y = softmax(x) or log_softmax(x) over C, for contiguous x and y of geometry g, outer
// slices [o0, o1).
template <class T, bool Log>
void softmax_forward(const T* x, T* y, Rows g, int64_t o0, int64_t o1) {
  const int64_t C = g.C, inner = g.inner;
  if (inner == 1) {
    for (int64_t r = o0; r < o1; ++r) {
      const T* xr = x + r * C;
      T* yr = y + r * C;
      const T m = vec::max(xr, C);
      if constexpr (Log) {
        // reference: torch's vec_log_softmax_lastdim: x - max - log(sum(exp(x - max)))
        const T lse = std::log(vec::exp_sub_sum<T>(xr, nullptr, C, m));
        for (int64_t i = 0; i < C; ++i) yr[i] = (xr[i] - m) - lse;
      } else {
        const T inv = T(1) / vec::exp_sub_sum<T>(xr, yr, C, m);
        for (int64_t i = 0; i < C; ++i) yr[i] *= inv;
      }
    }
    return;
  }
  std::vector<T> m(inner), s(inner);
  for (int64_t o = o0; o < o1; ++o) {
    const T* xo = x + o * C * inner;
    T* yo = y + o * C * inner;
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < inner; ++j) m[j] = std::max(m[j], xo[c * inner + j]);
    std::fill(s.begin(), s.end(), T(0));
    for (int64_t c = 0; c < C; ++c) {
      const T* xc = xo + c * inner;
      T* yc = yo + c * inner;
      for (int64_t j = 0; j < inner; ++j) yc[j] = xc[j] - m[j];
      vec::map(yc, yc, inner, [](auto v) { return vec::vexp(v); });
      for (int64_t j = 0; j < inner; ++j) s[j] += yc[j];
    }
    if constexpr (Log) {
      for (int64_t j = 0; j < inner; ++j) s[j] = std::log(s[j]);
      for (int64_t c = 0; c < C; ++c) {
        const T* xc = xo + c * inner;
        T* yc = yo + c * inner;
        for (int64_t j = 0; j < inner; ++j) yc[j] = (xc[j] - m[j]) - s[j];
      }
    } else {
      for (int64_t j = 0; j < inner; ++j) s[j] = T(1) / s[j];
      for (int64_t c = 0; c < C; ++c) {
        T* yc = yo + c * inner;
        for (int64_t j = 0; j < inner; ++j) yc[j] *= s[j];
      }
    }
  }
}

// Backward of softmax_forward given y (its output) and dy, both contiguous:
//   softmax:     dx = y * (dy - sum_C(dy * y))
//   log_softmax: dx = dy - exp(y) * sum_C(dy)
template <class T, bool Log>
void softmax_backward(const T* y, const T* dy, T* dx, Rows g, int64_t o0, int64_t o1) {
  const int64_t C = g.C, inner = g.inner;
  if (inner == 1) {
    for (int64_t r = o0; r < o1; ++r) {
      const T* yr = y + r * C;
      const T* dyr = dy + r * C;
      T* dxr = dx + r * C;
      if constexpr (Log) {
        const T s = vec::sum(dyr, C);
        vec::map2(dyr, yr, dxr, C, [s](auto d, auto v) { return d - vec::vexp(v) * s; });
      } else {
        const T s = vec::dot(dyr, yr, C);
        for (int64_t i = 0; i < C; ++i) dxr[i] = yr[i] * (dyr[i] - s);
      }
    }
    return;
  }
  std::vector<T> s(inner);
  for (int64_t o = o0; o < o1; ++o) {
    const int64_t base = o * C * inner;
    std::fill(s.begin(), s.end(), T(0));
    for (int64_t c = 0; c < C; ++c) {
      const T* yc = y + base + c * inner;
      const T* dyc = dy + base + c * inner;
      if constexpr (Log) {
        for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j];
      } else {
        for (int64_t j = 0; j < inner; ++j) s[j] += dyc[j] * yc[j];
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      const T* yc = y + base + c * inner;
      const T* dyc = dy + base + c * inner;
      T* dxc = dx + base + c * inner;
      if constexpr (Log) {
        vec::map(yc, dxc, inner, [](auto v) { return vec::vexp(v); });
        for (int64_t j = 0; j < inner; ++j) dxc[j] = dyc[j] - dxc[j] * s[j];
      } else {
        for (int64_t j = 0; j < inner; ++j) dxc[j] = yc[j] * (dyc[j] - s[j]);
      }
    }
  }
}

template <bool Log>
Tensor softmax_impl(const char* op, const char* node, const Tensor& a, int64_t dim) {
  const int64_t d = wrap_dim(op, dim, a);
  const Rows g = rows_around(a.shape(), d);
  Tensor out = empty(a.shape(), a.dtype());
  const Tensor x = contig(a);
  kernels::dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    if (out.numel() > 0)  // outer slices split over threads, each computed whole
      kernels::parallel_rows(g.outer, g.C * g.inner, kernels::kGrainMath,
                             [&](int64_t o0, int64_t o1) { softmax_forward<T, Log>(px, py, g, o0, o1); });
  });
  return record(node, out, {a}, [y = save(out), g](const Tensor& dout, Grads& grads) {
    // in the forward pass y = softmax(x) along C, so dx = y * (dy - sum(dy * y));
    // for y = log_softmax(x), dx = dy - exp(y) * sum(dy)
    const Tensor& yv = y.get();
    const Tensor dy = contig(dout);
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::dispatch_float(yv.dtype(), "softmax_backward", [&](auto tag) {
      using T = decltype(tag);
      const T* py = yv.data_ptr<T>();
      const T* pdy = dy.data_ptr<T>();
      T* pdx = dx.data_ptr<T>();
      if (dx.numel() > 0)
        kernels::parallel_rows(g.outer, g.C * g.inner, kernels::kGrainMath, [&](int64_t o0, int64_t o1) {
          softmax_backward<T, Log>(py, pdy, pdx, g, o0, o1);
        });
    });
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
  Tensor out = empty(a.shape(), a.dtype());
  const Tensor x = contig(a);
  kernels::dispatch_float(a.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    // NaN stays NaN (torch's clamp_min(0) propagates it)
    kernels::parallel_elems(out.numel(), kernels::kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) py[i] = px[i] < T(0) ? T(0) : px[i];
    });
  });
  return record("ReluBackward0", out, {a}, [y = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = max(x, 0), so dx = dy where y > 0, else 0
    // reference: torch's threshold_backward(grad, result, 0)
    const Tensor& yv = y.get();
    const Tensor dy = contig(dout);
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::dispatch_float(yv.dtype(), "relu_backward", [&](auto tag) {
      using T = decltype(tag);
      const T* py = yv.data_ptr<T>();
      const T* pd = dy.data_ptr<T>();
      T* px = dx.data_ptr<T>();
      kernels::parallel_elems(dx.numel(), kernels::kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) px[i] = py[i] > T(0) ? pd[i] : T(0);
      });
    });
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- sigmoid
Tensor sigmoid(const Tensor& a) {
  profiler::RecordFunction rec("sigmoid");
  Tensor out = empty(a.shape(), a.dtype());
  const Tensor x = contig(a);
  kernels::dispatch_float(a.dtype(), "sigmoid", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    kernels::parallel_elems(out.numel(), kernels::kGrainMath, [&](int64_t lo, int64_t hi) {
      vec::map(px + lo, py + lo, hi - lo, [](auto v) { return T(1) / (T(1) + vec::vexp(-v)); });
    });
  });
  return record("SigmoidBackward0", out, {a}, [y = save(out)](const Tensor& dout, Grads& grads) {
    // in the forward pass y = 1 / (1 + exp(-x)), so dx = dy * (1 - y) * y
    const Tensor& yv = y.get();
    const Tensor dy = contig(dout);
    Tensor dx = empty(yv.shape(), yv.dtype());
    kernels::dispatch_float(yv.dtype(), "sigmoid_backward", [&](auto tag) {
      using T = decltype(tag);
      const T* py = yv.data_ptr<T>();
      const T* pd = dy.data_ptr<T>();
      T* px = dx.data_ptr<T>();
      kernels::parallel_elems(dx.numel(), kernels::kGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) px[i] = pd[i] * (T(1) - py[i]) * py[i];
      });
    });
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- gelu
// The formulas (torch's, with their derivatives) are vec::gelu_tanh(_grad) and
// vec::gelu_erf(_grad) in vec_math.h. The forward saves x, as torch's GeluBackward0 does, and the backward
// evaluates the derivative again from x in the same loop that multiplies it by dy. Saving dy/dx from the
// forward instead (which computes it almost for free) makes the backward a plain multiply,
// but then the forward writes two tensors instead of one and the backward reads it back:
// at (32, 64, 256) float, forward + backward, recomputing is the cheaper of the two (395 vs
// 449 us, one thread's CPU time, best of 200; tensors that size do not fit in L2, so the
// extra store and reload cost more than a second exp and division). The derivative is the
// same expression either way, and so are the bits of dx.
Tensor gelu(const Tensor& a, const std::string& approximate) {
  profiler::RecordFunction rec("gelu");
  const bool tanh_approx = approximate == "tanh";
  if (!tanh_approx && approximate != "none")
    fail("gelu", "approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  Tensor out = empty(a.shape(), a.dtype());
  const Tensor x = contig(a);
  kernels::dispatch_float(a.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = out.data_ptr<T>();
    // y = gelu(x) (vec_math.h)
    kernels::parallel_elems(out.numel(), kernels::kGrainMath, [&](int64_t lo, int64_t hi) {
      if (tanh_approx) vec::map(px + lo, py + lo, hi - lo, [](auto v) { return vec::gelu_tanh<T>(v); });
      else vec::map(px + lo, py + lo, hi - lo, [](auto v) { return vec::gelu_erf<T>(v); });
    });
  });
  return record("GeluBackward0", out, {a}, [xs = save(x), tanh_approx](const Tensor& dout, Grads& grads) {
    // in the forward pass y = gelu(x), so dx = dout * gelu'(x), gelu' from the saved x
    const Tensor& xv = xs.get();
    const Tensor dy = contig(dout);
    Tensor dx = empty(xv.shape(), xv.dtype());
    kernels::dispatch_float(xv.dtype(), "gelu_backward", [&](auto tag) {
      using T = decltype(tag);
      const T* px = xv.data_ptr<T>();
      const T* pdy = dy.data_ptr<T>();
      T* pdx = dx.data_ptr<T>();
      kernels::parallel_elems(dx.numel(), kernels::kGrainMath, [&](int64_t lo, int64_t hi) {
        if (tanh_approx)
          vec::map2(pdy + lo, px + lo, pdx + lo, hi - lo,
                    [](auto d, auto v) { return d * vec::gelu_tanh_grad<T>(v); });
        else
          vec::map2(pdy + lo, px + lo, pdx + lo, hi - lo,
                    [](auto d, auto v) { return d * vec::gelu_erf_grad<T>(v); });
      });
    });
    grads.add(0, std::move(dx));
  });
}

}  // namespace xgrad
