// fuzz/fuzz_shapes.cpp: Tensor shape / view / stride arithmetic on random shapes.
//
// The input is a little program: a base tensor (up to 4 dims, at most 4096 elements, holding
// 0, 1, 2, ... so every element names its place), then up to 16 ops among view, reshape,
// expand, slice, permute, and creation of a random (possibly huge) shape. Sizes are drawn
// from small numbers and from edge values (2^31, 2^32, 2^62, INT64_MAX, -1, -2).
//
// A reference computes each op in 128-bit integers: whether it is valid, the result's shape,
// and (when the result has at most 2^16 elements) which base element sits at each position.
// xgrad must either throw xgrad::Error where the reference says invalid (view may also refuse
// a layout that needs a copy, then reshape must give the same elements), or give exactly the
// reference's shape and elements; a contiguous result must have contiguous strides.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "one_thread.h"
#include "xgrad/xgrad.h"

using xgrad::Shape;
using xgrad::Tensor;
using i128 = __int128;

namespace {

struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  int64_t size() {  // a size or index: mostly small, sometimes an edge value
    uint8_t b = byte();
    static const int64_t edges[] = {-1,
                                    -2,
                                    0,
                                    1,
                                    int64_t{1} << 31,
                                    int64_t{1} << 32,
                                    int64_t{1} << 62,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    int64_t{3} << 40};
    if (b < 200) return b % 9;
    return edges[b % 10];
  }
};

constexpr i128 kMaxI64 = std::numeric_limits<int64_t>::max();
constexpr i128 kCheck = 1 << 16;  // elements compared one by one up to this many

// numel in 128 bits, saturated: > kMaxI64 means "overflows int64"
i128 numel128(const Shape& s) {
  i128 n = 1;
  for (int64_t d : s)
    if (d == 0) return 0;
  for (int64_t d : s) {
    n *= d;
    if (n > kMaxI64 || n < -kMaxI64) return kMaxI64 + 1;
  }
  return n;
}

// The reference tensor: a shape and, for small ones, the base element at each position.
struct Ref {
  Shape shape;
  std::vector<int64_t> elems;  // row-major; empty when numel > kCheck (not tracked)
  bool tracked = true;
};

std::vector<int64_t> unravel(int64_t k, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    idx[d] = k % s[d];
    k /= s[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t k = 0;
  for (size_t d = 0; d < s.size(); ++d) k = k * s[d] + idx[d];
  return k;
}

[[noreturn]] void mismatch() { __builtin_trap(); }

void compare(const Tensor& t, const Ref& r) {
  if (t.shape() != r.shape) mismatch();
  if (numel128(r.shape) > kMaxI64) mismatch();  // xgrad made an overflowing tensor
  if (t.numel() != static_cast<int64_t>(numel128(r.shape))) mismatch();
  if (t.is_contiguous() && t.numel() > 0) {
    Shape cs = xgrad::contiguous_strides(t.shape());
    for (size_t d = 0; d < cs.size(); ++d)
      if (t.shape()[d] != 1 && t.strides()[d] != cs[d]) mismatch();
  }
  if (!r.tracked || t.numel() > kCheck) return;
  std::vector<double> v = t.to_vector<double>();
  if (v.size() != r.elems.size()) mismatch();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != static_cast<double>(r.elems[i])) mismatch();
}

Ref track(Shape shape, const std::function<int64_t(const std::vector<int64_t>&)>& src) {
  Ref r;
  r.shape = std::move(shape);
  i128 n = numel128(r.shape);
  if (n > kCheck) {
    r.tracked = false;
    return r;
  }
  r.elems.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) r.elems[k] = src(unravel(k, r.shape));
  return r;
}

Shape read_shape(Input& in, int max_rank) {
  Shape s(in.byte() % (max_rank + 1));
  for (int64_t& d : s) d = in.size();
  return s;
}

// Python-style slice bounds, as torch: negative counts from the end, then clamp.
void slice_bounds(int64_t n, i128& start, i128& end) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<i128>(start, 0, n);
  end = std::clamp<i128>(end, start, n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  // the base: small non-negative sizes, at most 4096 elements
  Shape base_shape(in.byte() % 5);
  for (int64_t& d : base_shape) d = in.byte() % 9;
  if (numel128(base_shape) > 4096) return 0;
  const int64_t n0 = static_cast<int64_t>(numel128(base_shape));
  Tensor cur = xgrad::arange(0, double(n0), 1, xgrad::kFloat64).reshape(base_shape);
  Ref ref = track(base_shape, [&](const std::vector<int64_t>& i) { return ravel(i, base_shape); });
  compare(cur, ref);

  for (int step = 0; step < 16 && in.n > 0; ++step) {
    const uint8_t op = in.byte() % 6;
    const int64_t rank = static_cast<int64_t>(ref.shape.size());
    std::optional<Ref> want;  // nullopt: the reference says the op is invalid
    std::optional<Tensor> got;
    bool view_refused = false;
    try {
      switch (op) {
        case 0:
        case 1: {  // view / reshape, one -1 allowed
          Shape to = read_shape(in, 5);
          int infer = -1, bad = 0;
          Shape known;
          for (size_t i = 0; i < to.size(); ++i) {
            if (to[i] == -1 && infer < 0) infer = static_cast<int>(i);
            else if (to[i] < 0) bad = 1;
            else known.push_back(to[i]);
          }
          const i128 n = numel128(ref.shape), k = numel128(known);
          Shape out = to;
          if (!bad && k <= kMaxI64) {
            if (infer >= 0) {
              if (k != 0 && n % k == 0) {
                out[infer] = static_cast<int64_t>(n / k);
                want = track(out, [&](const std::vector<int64_t>& i) { return ref.elems[ravel(i, out)]; });
              }
            } else if (k == n) {
              want = track(out, [&](const std::vector<int64_t>& i) { return ref.elems[ravel(i, out)]; });
            }
          }
          if (want && !ref.tracked) want->tracked = false;
          if (op == 0) {
            try {
              got = cur.view(to);
            } catch (const xgrad::Error& e) {
              if (!want) throw;
              if (std::string(e.what()).find("contiguously") == std::string::npos) mismatch();
              view_refused = true;  // a layout that needs a copy: reshape gives the elements
              got = cur.reshape(to);
            }
          } else {
            got = cur.reshape(to);  // cur is small (<= 2^16 elements): a copy is cheap
          }
          break;
        }
        case 2: {  // expand
          Shape to = read_shape(in, 6);
          bool ok = to.size() >= ref.shape.size();
          const size_t lead = ok ? to.size() - ref.shape.size() : 0;
          Shape out = to;
          for (size_t i = 0; ok && i < to.size(); ++i) {
            if (i < lead) {
              ok = to[i] >= 0;
              continue;
            }
            const int64_t have = ref.shape[i - lead];
            if (to[i] == -1) out[i] = have;
            else if (to[i] != have && have != 1) ok = false;
            else if (to[i] < 0) ok = false;
          }
          if (ok && numel128(out) <= kMaxI64)
            want = track(out, [&](const std::vector<int64_t>& i) {
              std::vector<int64_t> j(i.begin() + lead, i.end());
              for (size_t d = 0; d < j.size(); ++d)
                if (ref.shape[d] == 1) j[d] = 0;
              return ref.elems[ravel(j, ref.shape)];
            });
          if (want && !ref.tracked) want->tracked = false;
          got = cur.expand(to);
          break;
        }
        case 3: {  // slice(dim, start, end, step)
          const int64_t d = in.size(), a = in.size(), b = in.size(), st = in.size();
          if (rank > 0 && d >= -rank && d < rank && st > 0) {
            const int64_t dd = d < 0 ? d + rank : d;
            i128 s0 = a, e0 = b;
            slice_bounds(ref.shape[dd], s0, e0);
            Shape out = ref.shape;
            out[dd] = static_cast<int64_t>((e0 - s0 + st - 1) / st);
            want = track(out, [&](const std::vector<int64_t>& i) {
              std::vector<int64_t> j = i;
              j[dd] = static_cast<int64_t>(s0 + i128(i[dd]) * st);
              return ref.elems[ravel(j, ref.shape)];
            });
            if (!ref.tracked) want->tracked = false;
          }
          got = cur.slice(d, a, b, st);
          break;
        }
        case 4: {  // permute
          Shape dims(in.byte() % 6);
          for (int64_t& x : dims) x = static_cast<int64_t>(in.byte() % 8) - 4;
          bool ok = static_cast<int64_t>(dims.size()) == rank;
          std::vector<int64_t> wrapped;
          std::vector<bool> used(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
          for (int64_t x : dims) {
            if (!ok) break;
            const int64_t r = std::max<int64_t>(rank, 1);
            if (x < -r || x >= r) {
              ok = false;
              break;
            }
            const int64_t w = x < 0 ? x + r : x;
            if (used[w]) {
              ok = false;
              break;
            }
            used[w] = true;
            wrapped.push_back(w);
          }
          if (ok) {
            Shape out(wrapped.size());
            for (size_t i = 0; i < wrapped.size(); ++i) out[i] = ref.shape[wrapped[i]];
            want = track(out, [&](const std::vector<int64_t>& i) {
              std::vector<int64_t> j(i.size());
              for (size_t k = 0; k < i.size(); ++k) j[wrapped[k]] = i[k];
              return ref.elems[ravel(j, ref.shape)];
            });
            if (!ref.tracked) want->tracked = false;
          }
          got = cur.permute(dims);
          break;
        }
        default: {  // creation of a random shape: overflow must throw, never wrap
          Shape s = read_shape(in, 4);
          bool neg = std::any_of(s.begin(), s.end(), [](int64_t x) { return x < 0; });
          const i128 n = numel128(s);
          if (!neg && n <= 4096) {
            Tensor z = xgrad::zeros(s);
            if (z.numel() != static_cast<int64_t>(n)) mismatch();
          } else if (neg || n > kMaxI64) {
            try {
              xgrad::zeros(s);
              mismatch();
            } catch (const xgrad::Error&) {
            }
          }
          continue;  // the current tensor stays
        }
      }
    } catch (const xgrad::Error&) {
      if (want && !view_refused) mismatch();  // refused a valid op
      continue;
    }
    if (!want) mismatch();  // accepted an invalid op
    compare(*got, *want);
    if (want->tracked && numel128(want->shape) <= kCheck) {  // continue from small results only
      cur = *got;
      ref = std::move(*want);
    }
  }
  return 0;
}
