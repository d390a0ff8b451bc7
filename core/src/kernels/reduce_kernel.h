// core/src/kernels/reduce_kernel.h (private, the kernel floor): the passes of the
// reductions in core/src/ops/reduce.cpp over one contiguous (A, R, B) block, reducing R:
// reduce_pass (sum, max, min through an Op: init/step/merge/repeat) and arg_pass (max/min
// with the first index), and cumsum_pass (running sums along R). B == 1 reduces contiguous rows with 16
// independent lanes the compiler vectorises; B > 1 accumulates whole rows of B. float32 sums add short blocks
// in float and the block sums in double (torch's cascade idea); float64 and int64 accumulate natively.
// Threads split rows or output columns, never one output's summation, so results do not depend on the thread
// count.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels.h"

namespace xgrad::kernels {

template <class Acc>
struct SumOp {
  static Acc init() { return Acc(0); }
  template <class X>
  static Acc step(Acc acc, X x) {
    return acc + static_cast<Acc>(x);
  }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static Acc repeat(Acc a, int64_t n) { return a * static_cast<Acc>(n); }  // n equal terms
};
// max/min propagate NaN (x != x), like torch.
template <class Acc>
struct MaxOp {
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return -std::numeric_limits<Acc>::infinity();
    else return std::numeric_limits<Acc>::lowest();
  }
  template <class X>
  static Acc step(Acc acc, X x) {
    return (x > acc || x != x) ? Acc(x) : acc;
  }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
  static Acc repeat(Acc a, int64_t) { return a; }
};
template <class Acc>
struct MinOp {
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return std::numeric_limits<Acc>::infinity();
    else return std::numeric_limits<Acc>::max();
  }
  template <class X>
  static Acc step(Acc acc, X x) {
    return (x < acc || x != x) ? Acc(x) : acc;
  }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
  static Acc repeat(Acc a, int64_t) { return a; }
};

// float32 sums, torch-style cascade: float lanes over short blocks, block sums in double
// (fewer conversions than converting every element; relative error ~1e-10 on long rows).
inline double sum_row_f32(const float* row, int64_t R) {
  constexpr int L = 32, kBlock = 256;
  if (R <= kBlock) {  // a short row is one block: 16 float lanes of <= 16 terms each, merged in float
    float f[16] = {};
    int64_t r = 0;
    for (; r + 16 <= R; r += 16) {
#pragma GCC unroll 1
      for (int k = 0; k < 16; ++k) f[k] += row[r + k];
    }
    for (int k = 0; r < R; ++r, ++k) f[k] += row[r];
    for (int w = 8; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) f[k] += f[k + w];
    return f[0];
  }
  double lane[L] = {};
  int64_t r = 0;
  for (; r + kBlock <= R; r += kBlock) {
    float f[L] = {};
    for (int64_t q = r; q < r + kBlock; q += L) {
#pragma GCC unroll 1
      for (int k = 0; k < L; ++k) f[k] += row[q + k];
    }
    for (int k = 0; k < L; ++k) lane[k] += f[k];
  }
  for (; r + L <= R; r += L) {
#pragma GCC unroll 1
    for (int k = 0; k < L; ++k) lane[k] += row[r + k];
  }
  for (int k = 0; r < R; ++r, ++k) lane[k] += row[r];
  for (int w = L / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) lane[k] += lane[k + w];
  return lane[0];
}

// acc[b] += sum over R rows of x[r * ld + b], b < B (float32): 8 rows added in float, then
// into double.
inline void sum_rows_f32(const float* x, double* acc, int64_t R, int64_t B, int64_t ld) {
  int64_t r = 0;
  for (; r + 8 <= R; r += 8) {
    const float* p = x + r * ld;
    for (int64_t b = 0; b < B; ++b) {
      const float s = ((p[b] + p[ld + b]) + (p[2 * ld + b] + p[3 * ld + b])) +
                      ((p[4 * ld + b] + p[5 * ld + b]) + (p[6 * ld + b] + p[7 * ld + b]));
      acc[b] += static_cast<double>(s);
    }
  }
  for (; r < R; ++r)
    for (int64_t b = 0; b < B; ++b) acc[b] += static_cast<double>(x[r * ld + b]);
}

// y[b] = Op over r of x[r, b] for the columns b0 <= b < b1 of one contiguous (R, B) block.
template <class Op, class Acc, class In, class Out>
void reduce_cols(const In* x, Out* y, int64_t R, int64_t B, int64_t b0, int64_t b1) {
  constexpr bool kSumF32 = std::is_same_v<Op, SumOp<double>> && std::is_same_v<In, float>;
  std::vector<Acc> acc(static_cast<std::size_t>(b1 - b0), Op::init());
  Acc* pa = acc.data();
  if constexpr (kSumF32) {
    sum_rows_f32(x + b0, pa, R, b1 - b0, B);
  } else {
    for (int64_t r = 0; r < R; ++r) {
      const In* row = x + r * B + b0;
      for (int64_t b = 0; b < b1 - b0; ++b) pa[b] = Op::step(pa[b], row[b]);
    }
  }
  for (int64_t b = b0; b < b1; ++b) y[b] = static_cast<Out>(pa[b - b0]);
}

// y[a, b] = Op over r of x[a, r, b], x contiguous (A, R, B). Threads split the rows a (B == 1,
// or many blocks) or the columns b (few blocks: the bias gradient (B*T, C) -> (C)); every
// output is still reduced over r in the same order, so results do not depend on the count.
template <class Op, class Acc, class In, class Out>
void reduce_pass(const In* x, Out* y, int64_t A, int64_t R, int64_t B) {
  constexpr bool kSumF32 = std::is_same_v<Op, SumOp<double>> && std::is_same_v<In, float>;
  if (B == 1) {
    constexpr int L = 16;  // independent lanes: vectorised, and a pairwise-ish float sum
    parallel_rows(A, R, kGrain, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        const In* row = x + a * R;
        if constexpr (kSumF32) {
          y[a] = static_cast<Out>(sum_row_f32(row, R));
          continue;
        }
        Acc lane[L];
        for (int k = 0; k < L; ++k) lane[k] = Op::init();
        int64_t r = 0;
        for (; r + L <= R; r += L) {
#pragma GCC \
    unroll 1  // keep the lane loop a loop: GCC vectorises it (fully unrolled, max/min's select is not)
          for (int k = 0; k < L; ++k) lane[k] = Op::step(lane[k], row[r + k]);
        }
        for (int k = 0; r < R; ++r, ++k) lane[k] = Op::step(lane[k], row[r]);
        for (int w = L / 2; w > 0; w /= 2)
          for (int k = 0; k < w; ++k) lane[k] = Op::merge(lane[k], lane[k + w]);
        y[a] = static_cast<Out>(lane[0]);
      }
    });
    return;
  }
  if (A >= get_num_threads()) {
    parallel_rows(A, R * B, kGrain, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) reduce_cols<Op, Acc>(x + a * R * B, y + a * B, R, B, 0, B);
    });
    return;
  }
  for (int64_t a = 0; a < A; ++a)
    parallel_rows(B, R, kGrain, [&](int64_t b0, int64_t b1) {
      reduce_cols<Op, Acc>(x + a * R * B, y + a * B, R, B, b0, b1);
    });
}

// values[a, b] and indices[a, b] of the best x[a, r, b] over r (x contiguous (A, R, B)); the
// first index wins ties; a NaN beats everything (the first NaN).
template <bool kMax, class T>
void arg_pass(const T* x, T* val, int64_t* idx, int64_t A, int64_t R, int64_t B) {
  const auto better = [](T v, T best) {
    if constexpr (std::is_floating_point_v<T>) {
      if (best != best) return false;
      if (v != v) return true;
    }
    return kMax ? v > best : v < best;
  };
  if (B == 1) {  // rows: the extreme value by the vectorised pass, then its first index
    using Op = std::conditional_t<kMax, MaxOp<T>, MinOp<T>>;
    reduce_pass<Op, T>(x, val, A, R, 1);
    for (int64_t a = 0; a < A; ++a) {
      const T* row = x + a * R;
      const T v = val[a];
      int64_t r = 0;
      if (v != v) {
        while (r < R - 1 && row[r] == row[r]) ++r;  // the first NaN
      } else {
        while (r < R - 1 && row[r] != v) ++r;
      }
      idx[a] = r;
    }
    return;
  }
  for (int64_t a = 0; a < A; ++a) {
    const T* base = x + a * R * B;
    T* pv = val + a * B;
    int64_t* pi = idx + a * B;
    for (int64_t b = 0; b < B; ++b) {
      pv[b] = base[b];
      pi[b] = 0;
    }
    for (int64_t r = 1; r < R; ++r) {
      const T* row = base + r * B;
      for (int64_t b = 0; b < B; ++b)
        if (better(row[b], pv[b])) {
          pv[b] = row[b];
          pi[b] = r;
        }
    }
  }
}

// Running sums along R of a contiguous (A, R, B) block: y[a, r, b] = sum of x[a, j, b] for
// j <= r (reverse: j >= r), accumulated in Acc (double for float32, as torch's acc_type on
// the CPU) and rounded to T at each step. Threads split the A * B independent columns.
template <class T, class Acc>
void cumsum_pass(const T* x, T* y, int64_t A, int64_t R, int64_t B, bool reverse) {
  parallel_elems(A * B, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      const int64_t base = (c / B) * R * B + c % B;
      Acc acc = 0;
      for (int64_t k = 0; k < R; ++k) {
        const int64_t i = base + (reverse ? R - 1 - k : k) * B;
        acc += static_cast<Acc>(x[i]);
        y[i] = static_cast<T>(acc);
      }
    }
  });
}

}  // namespace xgrad::kernels
