// core/src/kernels/elementwise_kernel.h (private, the kernel floor): the elementwise maps of
// core/src/ops/elementwise.cpp. map_same: out = f(in0, in1, ...) over the broadcast output
// shape, row by row (parallel_for_each_row), for inputs of one dtype; map_simd: a unary map
// on xsimd batches (vec_math.h) over a contiguous tensor; map_unary: either, by layout.
// bfloat16 inputs run the same f in float32 (InFloat, map_bf16_blocks): each element widened,
// f's arithmetic in float32, the result rounded once to bfloat16, as torch's CPU loops do.
#pragma once
#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "bf16_kernel.h"
#include "kernels.h"
#include "vec_math.h"

namespace xgrad::kernels {

template <class... Ts>
struct types {};
template <class T, std::size_t>
using always = T;

// f on bfloat16 elements: each widened to float32, f computed in float32, rounded once.
template <class F>
struct InFloat {
  F f;
  template <class... X>
  bf16 operator()(X... x) const {
    return to_bf16(static_cast<float>(f(widen(x)...)));
  }
};

// out[i] = f(in0[i], in1[i], ...) with every input broadcast to out's shape (out contiguous).
template <class O, class F, class... Ts, std::size_t... I>
void run_map(const Tensor& out, const std::array<Tensor, sizeof...(Ts)>& in, F& f, types<Ts...>,
             std::index_sequence<I...>) {
  constexpr std::size_t N = sizeof...(Ts);
  O* po = out.data_ptr<O>();
  const std::tuple<const Ts*...> base{in[I].template data_ptr<Ts>()...};
  const std::array<Shape, N + 1> st{out.strides(), broadcast_strides(in[I], out.shape())...};
  parallel_for_each_row<N + 1>(
      out.shape(), st, kGrain,
      [&](const std::array<int64_t, N + 1>& off, int64_t n, const std::array<int64_t, N + 1>& s) {
        const F fn = f;      // a local copy: the output stores cannot alias its captures
        O* o = po + off[0];  // out is contiguous: its rows have stride 1
        const std::tuple<const Ts*...> x{(std::get<I>(base) + off[I + 1])...};
        if (((s[I + 1] == 1) && ...)) {
          for (int64_t i = 0; i < n; ++i) o[i] = fn(std::get<I>(x)[i]...);
          return;
        }
        if constexpr (N == 2) {  // (B, T, C) * (B, T, 1) and friends: one operand fixed per row
          const auto* x0 = std::get<0>(x);
          const auto* x1 = std::get<1>(x);
          if (s[1] == 1 && s[2] == 0) {
            const auto v = *x1;
            for (int64_t i = 0; i < n; ++i) o[i] = fn(x0[i], v);
            return;
          }
          if (s[1] == 0 && s[2] == 1) {
            const auto v = *x0;
            for (int64_t i = 0; i < n; ++i) o[i] = fn(v, x1[i]);
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) o[i] = fn(std::get<I>(x)[i * s[I + 1]]...);
      });
}

// A fresh tensor of `shape` and `out_dtype` (element type O) from inputs of types Ts.
template <class O, class... Ts, class F>
Tensor map_typed(DType out_dtype, const Shape& shape, const std::array<Tensor, sizeof...(Ts)>& in, F f,
                 types<Ts...> tags) {
  Tensor out = empty(shape, out_dtype);
  run_map<O>(out, in, f, tags, std::index_sequence_for<Ts...>{});
  return out;
}

// Inputs and output share in[0]'s dtype: float32/float64, or int64 too when allow_int.
template <std::size_t N, class F>
Tensor map_same(const char* op, const Shape& shape, const std::array<Tensor, N>& in, F f,
                bool allow_int = false) {
  const DType dt = in[0].dtype();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return map_typed<T>(dt, shape, in, f, types<always<T, I>...>{});
    }
    (std::make_index_sequence<N>{});
  };
  if (allow_int && dt == kInt64) return run(int64_t{});
  if (dt == kBFloat16) return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return map_typed<bf16>(dt, shape, in, InFloat<F>{f}, types<always<bf16, I>...>{});
    }
  (std::make_index_sequence<N>{});
  if (allow_int && !is_floating(dt))
    fail(op, "expected a float32, float64 or int64 tensor, got ", dtype_name(dt), " of shape ",
         in[0].shape());
  return dispatch_float(dt, op, run);
}

// out = f(a) for a contiguous a of a float dtype (out: a fresh tensor of a's shape and dtype),
// f called with batches and with scalars (the tail): vec::map, split over xgrad's threads.
template <class F>
void map_simd(const char* op, const Tensor& a, const Tensor& out, F& f) {
  if (a.dtype() == kBFloat16) {  // float32 SIMD on widened blocks, rounded once
    const bf16* pa = a.data_ptr<bf16>();
    bf16* po = out.data_ptr<bf16>();
    parallel_elems(a.numel(), kGrainMath, [&](int64_t lo, int64_t hi) {
      map_bf16_blocks(pa + lo, po + lo, hi - lo,
                      [&](int64_t, const float* x, float* y, int64_t m) { vec::map(x, y, m, f); });
    });
    return;
  }
  dispatch_float(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    T* po = out.data_ptr<T>();
    parallel_elems(a.numel(), kGrainMath,
                   [&](int64_t lo, int64_t hi) { vec::map(pa + lo, po + lo, hi - lo, f); });
  });
}

// out = f(a) as a fresh tensor: map_simd for a contiguous a, else map_same's strided loop
// (the same f, called with scalars).
template <class F>
Tensor map_unary(const char* op, const Tensor& a, F f) {
  if (!a.is_contiguous()) return map_same<1>(op, a.shape(), {a}, f);
  Tensor out = empty(a.shape(), a.dtype());
  map_simd(op, a, out, f);
  return out;
}

}  // namespace xgrad::kernels
