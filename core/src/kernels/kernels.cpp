// core/src/kernels/kernels.cpp: broadcasting rules and the strided, converting copy (split over
// xgrad's threads for large tensors; bfloat16 converts through float32, bf16_kernel.h).
#include "kernels.h"

#include "bf16_kernel.h"

namespace xgrad::kernels {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(op, "shapes ", a, " and ", b, " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& target) {
  const Shape& s = t.shape();
  if (s.size() > target.size()) fail("broadcast", "shape ", s, " cannot be broadcast to ", target);
  Shape out(target.size(), 0);
  const std::size_t lead = target.size() - s.size();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == target[lead + i]) {
      out[lead + i] = t.strides()[i];
    } else if (s[i] == 1) {
      out[lead + i] = 0;
    } else {
      fail("broadcast", "shape ", s, " cannot be broadcast to ", target);
    }
  }
  return out;
}

namespace {

// A bfloat16 element inside copy_into: its bits, converted through float32 (bf16_kernel.h).
struct Bf16 {
  uint16_t bits;
};

// Calls f with a value of t's element type, Bf16 for bfloat16.
template <class F>
void dispatch_storage(DType t, F&& f) {
  if (t == kBFloat16) return f(Bf16{});
  dispatch_all(t, "copy", f);
}

// One element converted as torch converts it: to bfloat16 through float32 (double, int64 and
// bool first become the nearest float32, as in c10::BFloat16's constructor), from bfloat16 by
// widening to float32 first.
template <class D, class S>
D convert(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (std::is_same_v<S, Bf16>) {
    return convert<D>(bf16_to_float(x.bits));
  } else if constexpr (std::is_same_v<D, Bf16>) {
    return Bf16{float_to_bf16(static_cast<float>(x))};
  } else {
    return static_cast<D>(x);
  }
}

// A dense run of n elements as one block copy or one SIMD conversion; false where only the
// element loop converts (a function template, so the branches not taken are never compiled).
template <class D, class S>
bool copy_dense_run(D* o, const S* x, int64_t n) {
  if constexpr (std::is_same_v<D, S>) {
    std::memcpy(o, x, static_cast<std::size_t>(n) * sizeof(D));
    return true;
  } else if constexpr (std::is_same_v<D, Bf16> && std::is_same_v<S, float>) {
    float_to_bf16_n(x, &o->bits, n);
    return true;
  } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, Bf16>) {
    bf16_to_float_n(&x->bits, o, n);
    return true;
  } else {
    return false;
  }
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  std::array<Shape, 2> st{dst.strides(), broadcast_strides(src, dst.shape())};
  dispatch_storage(dst.dtype(), [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_storage(src.dtype(), [&](auto stag) {
      using S = decltype(stag);
      D* pd = static_cast<D*>(dst.raw_data_ptr());
      const S* ps = static_cast<const S*>(src.raw_data_ptr());
      parallel_for_each_row<2>(
          dst.shape(), st, kGrain,
          [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& in) {
            D* o = pd + off[0];
            const S* x = ps + off[1];
            if (in[0] == 1 && in[1] == 1 && copy_dense_run(o, x, n)) return;
            for (int64_t i = 0; i < n; ++i) o[i * in[0]] = convert<D>(x[i * in[1]]);
          });
    });
  });
}

}  // namespace xgrad::kernels
