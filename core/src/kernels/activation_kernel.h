// core/src/kernels/activation_kernel.h (private, the kernel floor): the forward/backward
// kernel pairs of core/src/ops/activation.cpp: softmax and log_softmax, relu, sigmoid, gelu;
// and silu's backward (its forward is elementwise_math.cpp's map).
//
// Each pair reads and writes contiguous tensors of one float dtype (the op checks the dtype
// and makes its operands contiguous), splits the work over xgrad's threads and runs the
// transcendental maps on vec_math.h's batches. A forward writes y from x; its backward
// writes dx from dy and what the forward saved (y, or x for gelu), never accumulating.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "bf16_kernel.h"
#include "kernels.h"
#include "vec_math.h"

namespace xgrad::kernels {

// A tensor seen as (outer, C, inner) around dim d.
struct Rows {
  int64_t outer = 1, C = 1, inner = 1;
};
inline Rows rows_around(const Shape& s, int64_t d) {
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
void softmax_rows(const T* x, T* y, Rows g, int64_t o0, int64_t o1) {
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

// Backward of softmax_rows given y (its output) and dy, both contiguous:
//   softmax:     dx = y * (dy - sum_C(dy * y))
//   log_softmax: dx = dy - exp(y) * sum_C(dy)
template <class T, bool Log>
void softmax_backward_rows(const T* y, const T* dy, T* dx, Rows g, int64_t o0, int64_t o1) {
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

// bfloat16 softmax: each outer slice (C * inner elements) widened into a float32 buffer of
// the thread, computed by the float32 rows above and rounded once into the output; the
// backward the same on (y, dy). Same bits as the float32 kernel on a widened copy.
template <bool Log, bool Backward>
void softmax_bf16(const Tensor& a, const Tensor& dy, const Tensor& out, Rows g) {
  const bf16* pa = a.data_ptr<bf16>();
  const bf16* pd = Backward ? dy.data_ptr<bf16>() : nullptr;
  bf16* po = out.data_ptr<bf16>();
  const int64_t slice = g.C * g.inner;
  const Rows one{1, g.C, g.inner};
  if (out.numel() == 0) return;
  parallel_rows(g.outer, slice, kGrainMath, [&](int64_t o0, int64_t o1) {
    std::vector<float> af(slice), df(Backward ? slice : 0), of(slice);
    for (int64_t o = o0; o < o1; ++o) {
      bf16_to_float_n(&pa[o * slice].bits, af.data(), slice);
      if constexpr (Backward) {
        bf16_to_float_n(&pd[o * slice].bits, df.data(), slice);
        softmax_backward_rows<float, Log>(af.data(), df.data(), of.data(), one, 0, 1);
      } else {
        softmax_rows<float, Log>(af.data(), of.data(), one, 0, 1);
      }
      float_to_bf16_n(of.data(), &po[o * slice].bits, slice);
    }
  });
}

// y = softmax(x) (Log: log_softmax) over C of geometry g. Outer slices are split over
// threads, each computed whole.
template <bool Log>
void softmax_forward(const Tensor& x, const Tensor& y, Rows g) {
  if (x.dtype() == kBFloat16) return softmax_bf16<Log, false>(x, Tensor(), y, g);
  dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    if (y.numel() > 0)
      parallel_rows(g.outer, g.C * g.inner, kGrainMath,
                    [&](int64_t o0, int64_t o1) { softmax_rows<T, Log>(px, py, g, o0, o1); });
  });
}

// dx from y = softmax(x) (Log: log_softmax) and dy, as softmax_forward splits the rows.
template <bool Log>
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, Rows g) {
  if (y.dtype() == kBFloat16) return softmax_bf16<Log, true>(y, dy, dx, g);
  dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = y.data_ptr<T>();
    const T* pdy = dy.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    if (dx.numel() > 0)
      parallel_rows(g.outer, g.C * g.inner, kGrainMath,
                    [&](int64_t o0, int64_t o1) { softmax_backward_rows<T, Log>(py, pdy, pdx, g, o0, o1); });
  });
}

// y = max(x, 0); NaN stays NaN (torch's clamp_min(0) propagates it).
inline void relu_forward(const Tensor& x, const Tensor& y) {
  if (x.dtype() == kBFloat16) {  // exact: each element is kept or zeroed
    const bf16* px = x.data_ptr<bf16>();
    bf16* py = y.data_ptr<bf16>();
    return parallel_elems(y.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) py[i] = widen(px[i]) < 0.0f ? bf16{0} : px[i];
    });
  }
  dispatch_float(x.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_elems(y.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) py[i] = px[i] < T(0) ? T(0) : px[i];
    });
  });
}

// dx = dy where y > 0, else 0 (torch's threshold_backward(grad, result, 0)).
inline void relu_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  if (y.dtype() == kBFloat16) {  // exact: each element of dy is kept or zeroed
    const bf16* py = y.data_ptr<bf16>();
    const bf16* pd = dy.data_ptr<bf16>();
    bf16* px = dx.data_ptr<bf16>();
    return parallel_elems(dx.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) px[i] = widen(py[i]) > 0.0f ? pd[i] : bf16{0};
    });
  }
  dispatch_float(y.dtype(), "relu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = y.data_ptr<T>();
    const T* pd = dy.data_ptr<T>();
    T* px = dx.data_ptr<T>();
    parallel_elems(dx.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) px[i] = py[i] > T(0) ? pd[i] : T(0);
    });
  });
}

// y = 1 / (1 + exp(-x))
inline void sigmoid_forward(const Tensor& x, const Tensor& y) {
  if (x.dtype() == kBFloat16) {  // float32 on widened blocks, rounded once
    const bf16* px = x.data_ptr<bf16>();
    bf16* py = y.data_ptr<bf16>();
    return parallel_elems(y.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      map_bf16_blocks(px + lo, py + lo, hi - lo, [](int64_t, const float* xf, float* yf, int64_t m) {
        vec::map(xf, yf, m, [](auto v) { return vec::sigmoid<float>(v); });
      });
    });
  }
  dispatch_float(x.dtype(), "sigmoid", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_elems(y.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      vec::map(px + lo, py + lo, hi - lo, [](auto v) { return vec::sigmoid<T>(v); });
    });
  });
}

// dx = dy * (1 - y) * y
inline void sigmoid_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  if (y.dtype() == kBFloat16) {  // in float32, rounded once
    const bf16* py = y.data_ptr<bf16>();
    const bf16* pd = dy.data_ptr<bf16>();
    bf16* px = dx.data_ptr<bf16>();
    return parallel_elems(dx.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const float yv = widen(py[i]);
        px[i] = to_bf16(widen(pd[i]) * (1.0f - yv) * yv);
      }
    });
  }
  dispatch_float(y.dtype(), "sigmoid_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = y.data_ptr<T>();
    const T* pd = dy.data_ptr<T>();
    T* px = dx.data_ptr<T>();
    parallel_elems(dx.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) px[i] = pd[i] * (T(1) - py[i]) * py[i];
    });
  });
}

// y = gelu(x), the tanh approximation or the exact erf form (vec::gelu_tanh, vec::gelu_erf).
inline void gelu_forward(const Tensor& x, const Tensor& y, bool tanh_approx) {
  if (x.dtype() == kBFloat16) {  // float32 on widened blocks, rounded once
    const bf16* px = x.data_ptr<bf16>();
    bf16* py = y.data_ptr<bf16>();
    parallel_elems(x.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      map_bf16_blocks(px + lo, py + lo, hi - lo, [&](int64_t, const float* xf, float* yf, int64_t m) {
        if (tanh_approx) vec::map(xf, yf, m, [](auto v) { return vec::gelu_tanh<float>(v); });
        else vec::map(xf, yf, m, [](auto v) { return vec::gelu_erf<float>(v); });
      });
    });
    return;
  }
  dispatch_float(x.dtype(), "gelu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_elems(y.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      if (tanh_approx) vec::map(px + lo, py + lo, hi - lo, [](auto v) { return vec::gelu_tanh<T>(v); });
      else vec::map(px + lo, py + lo, hi - lo, [](auto v) { return vec::gelu_erf<T>(v); });
    });
  });
}

// dx = dy * gelu'(x), the derivative evaluated again from x in the loop that multiplies it
// by dy (no second tensor saved by the forward).
inline void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx, bool tanh_approx) {
  if (x.dtype() == kBFloat16) {  // float32 on widened blocks, rounded once
    const bf16 *px = x.data_ptr<bf16>(), *pd = dy.data_ptr<bf16>();
    bf16* po = dx.data_ptr<bf16>();
    parallel_elems(x.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      map2_bf16_blocks(
          pd + lo, px + lo, po + lo, hi - lo, [&](const float* d, const float* v, float* o, int64_t m) {
            if (tanh_approx)
              vec::map2(d, v, o, m, [](auto g, auto u) { return g * vec::gelu_tanh_grad<float>(u); });
            else vec::map2(d, v, o, m, [](auto g, auto u) { return g * vec::gelu_erf_grad<float>(u); });
          });
    });
    return;
  }
  dispatch_float(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pdy = dy.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    parallel_elems(dx.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      if (tanh_approx)
        vec::map2(pdy + lo, px + lo, pdx + lo, hi - lo,
                  [](auto d, auto v) { return d * vec::gelu_tanh_grad<T>(v); });
      else
        vec::map2(pdy + lo, px + lo, pdx + lo, hi - lo,
                  [](auto d, auto v) { return d * vec::gelu_erf_grad<T>(v); });
    });
  });
}

// dx = dy * silu'(x) = dy * s * (1 + x * (1 - s)) with s = sigmoid(x), evaluated again from
// x in the loop that multiplies it by dy.
inline void silu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  dispatch_float(x.dtype(), "silu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pdy = dy.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    parallel_elems(dx.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      vec::map2(pdy + lo, px + lo, pdx + lo, hi - lo, [](auto d, auto v) {
        using V = decltype(v);
        const V one(T(1));
        const V s = vec::sigmoid<T>(v);
        return d * s * (one + v * (one - s));
      });
    });
  });
}

}  // namespace xgrad::kernels
