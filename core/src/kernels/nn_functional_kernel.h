// core/src/kernels/nn_functional_kernel.h (private, the kernel floor): the forward/backward
// kernel pairs of core/src/ops/nn_functional.cpp: dropout, embedding, layer_norm,
// cross_entropy (classes in the last dim), mse_loss.
//
// The operands are contiguous tensors of one float dtype (the op checks them, and makes them
// contiguous; bfloat16 layer_norm and cross_entropy keep their statistics in float32); a
// backward writes gradient tensors, never accumulating into them. Rows are split
// over xgrad's pool, each computed whole; layer_norm's weight/bias gradients add per-block
// partials in block order and cross_entropy sums its per-row losses in row order, so the
// results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "bf16_kernel.h"
#include "kernels.h"
#include "vec_math.h"

namespace xgrad::kernels {

// ---------------------------------------------------------------- dropout
// out = x * noise with noise = keep / (1 - p) (keep: the bool mask), rounded as torch's
// noise.div_(1 - p) rounds it. The backward is the same map on dy.
// bfloat16: torch's noise tensor is bfloat16 too, so noise = 1 / bfloat16(1 - p) rounded to
// bfloat16, and out = x * noise computed in float32 and rounded once.
inline void dropout_bf16(const Tensor& x, const Tensor& keep, double p, const Tensor& out) {
  const float scale = widen(to_bf16(1.0f / widen(to_bf16(static_cast<float>(1.0 - p)))));
  const bool* pm = keep.data_ptr<bool>();
  const bf16* px = x.data_ptr<bf16>();
  bf16* po = out.data_ptr<bf16>();
  parallel_elems(out.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    map_bf16_blocks(px + lo, po + lo, hi - lo, [&](int64_t i, const float* xf, float* yf, int64_t m) {
      vec::mul_keep_mask(xf, pm + lo + i, scale, yf, m);
    });
  });
}

inline void dropout_forward(const Tensor& x, const Tensor& keep, double p, const Tensor& out) {
  if (x.dtype() == kBFloat16) return dropout_bf16(x, keep, p, out);
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1) / static_cast<T>(1.0 - p);
    const bool* pm = keep.data_ptr<bool>();
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    parallel_elems(out.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      vec::mul_keep_mask(px + lo, pm + lo, scale, po + lo, hi - lo);
    });
  });
}

inline void dropout_backward(const Tensor& dy, const Tensor& keep, double p, const Tensor& dx) {
  if (dy.dtype() == kBFloat16) return dropout_bf16(dy, keep, p, dx);
  dispatch_float(dy.dtype(), "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1) / static_cast<T>(1.0 - p);
    const bool* pm = keep.data_ptr<bool>();
    const T* pd = dy.data_ptr<T>();
    T* px = dx.data_ptr<T>();
    parallel_elems(dx.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      vec::mul_keep_mask(pd + lo, pm + lo, scale, px + lo, hi - lo);
    });
  });
}

// ---------------------------------------------------------------- embedding
// out[i] = weight[ids[i]] for the n ids (checked in range), rows of D elements; weight's rows
// must each be contiguous (stride(1) == 1), their stride may be anything.
inline void embedding_forward(const Tensor& weight, const int64_t* ids, int64_t n, const Tensor& out) {
  const int64_t D = weight.size(1);
  const std::size_t item = itemsize(weight.dtype());
  const std::size_t row_bytes = static_cast<std::size_t>(D) * item;
  const std::size_t stride_bytes = static_cast<std::size_t>(weight.stride(0)) * item;
  const char* pw = static_cast<const char*>(weight.raw_data_ptr());
  char* po = static_cast<char*>(out.raw_data_ptr());
  parallel_rows(n, D, kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(po + static_cast<std::size_t>(i) * row_bytes,
                  pw + static_cast<std::size_t>(ids[i]) * stride_bytes, row_bytes);
  });
}

// dweight[ids[i]] += dy[i] into the zeroed (V, D) dw; repeated ids accumulate. Threads split
// the embedding columns, so repeated ids still add in the order of i.
inline void embedding_backward(const Tensor& ids, const Tensor& dy, const Tensor& dw) {
  const int64_t D = dw.size(1);
  dispatch_float(dy.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t* pid = ids.data_ptr<int64_t>();
    const T* pd = dy.data_ptr<T>();
    T* pw = dw.data_ptr<T>();
    const int64_t n = ids.numel();
    parallel_rows(D, n, kGrain, [&](int64_t k0, int64_t k1) {
      for (int64_t i = 0; i < n; ++i) {
        T* row = pw + pid[i] * D;
        const T* src = pd + i * D;
        for (int64_t k = k0; k < k1; ++k) row[k] += src[k];
      }
    });
  });
}

// ---------------------------------------------------------------- layer_norm
// reference: llm.c train_gpt2.c layernorm_forward/layernorm_backward; torch's
// layer_norm_kernel (biased variance, rstd = 1 / sqrt(var + eps)). x is M rows of N; w and b
// (N) may be undefined. The row loops, with their math, are vec::layer_norm_rows and
// vec::layer_norm_backward_rows.
constexpr int64_t kLayerNormRowBlock = 64;  // rows per partial dw / db sum in the backward

// A bfloat16 vector (w or b, N) widened, or empty when undefined.
inline std::vector<float> widened_vector(const Tensor& t, int64_t N) {
  std::vector<float> v(t.defined() ? N : 0);
  if (t.defined()) bf16_to_float_n(&t.data_ptr<bf16>()->bits, v.data(), N);
  return v;
}

// layer_norm_forward for bfloat16 x, w, b (y bfloat16, mean and rstd float32): each thread's
// rows widened into a float32 buffer, normalised by the float32 rows, rounded once into y.
// The same bits as the float32 kernel on widened copies (rows are independent).
inline void layer_norm_forward_bf16(const Tensor& x, const Tensor& w, const Tensor& b, double eps, int64_t M,
                                    int64_t N, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const std::vector<float> wf = widened_vector(w, N), bf = widened_vector(b, N);
  const bf16* px = x.data_ptr<bf16>();
  bf16* py = y.data_ptr<bf16>();
  float* pm = mean.data_ptr<float>();
  float* pr = rstd.data_ptr<float>();
  parallel_rows(M, N, kGrain, [&](int64_t r0, int64_t r1) {
    constexpr int64_t kRows = 16;  // rows per float32 buffer, reused: it stays in the cache
    std::vector<float> xf(kRows * N), yf(kRows * N);
    for (int64_t s0 = r0; s0 < r1; s0 += kRows) {
      const int64_t rows = std::min(kRows, r1 - s0);
      bf16_to_float_n(&px[s0 * N].bits, xf.data(), rows * N);
      vec::layer_norm_rows<float>(xf.data(), wf.empty() ? nullptr : wf.data(),
                                  bf.empty() ? nullptr : bf.data(), yf.data(), pm + s0, pr + s0, N, eps, 0,
                                  rows);
      float_to_bf16_n(yf.data(), &py[s0 * N].bits, rows * N);
    }
  });
}

// y = (x - mean) * rstd * w + b row by row, saving each row's mean and rstd (M each).
inline void layer_norm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, int64_t M,
                               int64_t N, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  if (x.dtype() == kBFloat16) return layer_norm_forward_bf16(x, w, b, eps, M, N, y, mean, rstd);
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    const T* pb = b.defined() ? b.data_ptr<T>() : nullptr;
    T* py = y.data_ptr<T>();
    T* pm = mean.data_ptr<T>();
    T* pr = rstd.data_ptr<T>();
    parallel_rows(M, N, kGrain, [&](int64_t r0, int64_t r1) {
      vec::layer_norm_rows<T>(px, pw, pb, py, pm, pr, N, eps, r0, r1);
    });
  });
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, dw = sum_rows(dy * xhat),
// db = sum_rows(dy), into dx (M, N) and the zeroed dw, db (N); any of them may be undefined
// (not wanted). Rows go in fixed blocks of kLayerNormRowBlock: a block computes dx for its
// rows and its own partial dw / db (its rows summed in order), and dw / db add the partials
// up in block order. The blocks do not depend on the thread count, so neither do the bits,
// and x and dy are read once whatever the threads.
// layer_norm_backward for bfloat16 x, w, dy, dx (mean, rstd, dw, db float32): each block of
// rows widened into float32 buffers and run by the float32 rows, dx rounded once; the same
// blocks and block order as the float32 kernel, so the same bits as it on widened copies.
inline void layer_norm_backward_bf16(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& mean,
                                     const Tensor& rstd, int64_t M, int64_t N, const Tensor& dx,
                                     const Tensor& dw, const Tensor& db) {
  const std::vector<float> wf = widened_vector(w, N);
  const bf16* px = x.data_ptr<bf16>();
  const bf16* pd = dy.data_ptr<bf16>();
  const float* pm = mean.data_ptr<float>();
  const float* pr = rstd.data_ptr<float>();
  bf16* pdx = dx.defined() ? dx.data_ptr<bf16>() : nullptr;
  float* pdw = dw.defined() ? dw.data_ptr<float>() : nullptr;
  float* pdb = db.defined() ? db.data_ptr<float>() : nullptr;
  const int64_t blocks = (M + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
  std::vector<float> part_w(pdw ? blocks * N : 0, 0.0f), part_b(pdb ? blocks * N : 0, 0.0f);
  parallel_rows(blocks, kLayerNormRowBlock * N, kGrain, [&](int64_t b0, int64_t b1) {
    std::vector<float> xf(kLayerNormRowBlock * N), df(kLayerNormRowBlock * N), dxf(kLayerNormRowBlock * N);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * kLayerNormRowBlock, rows = std::min(M, r0 + kLayerNormRowBlock) - r0;
      bf16_to_float_n(&px[r0 * N].bits, xf.data(), rows * N);
      bf16_to_float_n(&pd[r0 * N].bits, df.data(), rows * N);
      vec::layer_norm_backward_rows<float>(xf.data(), df.data(), wf.empty() ? nullptr : wf.data(), pm + r0,
                                           pr + r0, pdx ? dxf.data() : nullptr,
                                           pdw ? part_w.data() + b * N : nullptr,
                                           pdb ? part_b.data() + b * N : nullptr, N, 0, rows);
      if (pdx) float_to_bf16_n(dxf.data(), &pdx[r0 * N].bits, rows * N);
    }
  });
  for (int64_t b = 0; b < blocks; ++b) {
    if (pdw)
      for (int64_t i = 0; i < N; ++i) pdw[i] += part_w[b * N + i];
    if (pdb)
      for (int64_t i = 0; i < N; ++i) pdb[i] += part_b[b * N + i];
  }
}

inline void layer_norm_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor& mean,
                                const Tensor& rstd, int64_t M, int64_t N, const Tensor& dx, const Tensor& dw,
                                const Tensor& db) {
  if (x.dtype() == kBFloat16) return layer_norm_backward_bf16(x, w, dy, mean, rstd, M, N, dx, dw, db);
  dispatch_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data_ptr<T>();
    const T* pw = w.defined() ? w.data_ptr<T>() : nullptr;
    const T* pd = dy.data_ptr<T>();
    const T* pm = mean.data_ptr<T>();
    const T* pr = rstd.data_ptr<T>();
    T* pdx = dx.defined() ? dx.data_ptr<T>() : nullptr;
    T* pdw = dw.defined() ? dw.data_ptr<T>() : nullptr;
    T* pdb = db.defined() ? db.data_ptr<T>() : nullptr;
    const int64_t blocks = (M + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
    std::vector<T> part_w(pdw ? blocks * N : 0, T(0)), part_b(pdb ? blocks * N : 0, T(0));
    parallel_rows(blocks, kLayerNormRowBlock * N, kGrain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        vec::layer_norm_backward_rows<T>(px, pd, pw, pm, pr, pdx, pdw ? part_w.data() + b * N : nullptr,
                                         pdb ? part_b.data() + b * N : nullptr, N, b * kLayerNormRowBlock,
                                         std::min(M, (b + 1) * kLayerNormRowBlock));
    });
    for (int64_t b = 0; b < blocks; ++b) {
      if (pdw)
        for (int64_t i = 0; i < N; ++i) pdw[i] += part_w[b * N + i];
      if (pdb)
        for (int64_t i = 0; i < N; ++i) pdb[i] += part_b[b * N + i];
    }
  });
}

// ---------------------------------------------------------------- cross_entropy
// x: N rows of C logits; t: N targets (in [0, C) or ignore_index); e: label smoothing.
// loss_r = lse_r - sum_c q_c x[r, c] with lse_r = log(sum(exp(x[r]))) and
// q = (1 - e) onehot(t_r) + e/C; ignored rows have loss 0.
struct CrossEntropyRows {
  int64_t N = 0, C = 0;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
};

// The losses of `rows` rows into row_loss and their lse into pl (0 for ignored rows): x, pt,
// pl and row_loss point at the first of them. Each row's result is its own.
template <class T>
void cross_entropy_row_range(const T* x, const int64_t* pt, const CrossEntropyRows& g, int64_t rows, T* pl,
                             T* row_loss) {
  const int64_t C = g.C;
  const double eps = g.label_smoothing;
  const T keep = static_cast<T>(1.0 - eps), spread = static_cast<T>(eps / static_cast<double>(C));
  vec::logsumexp_rows(x, C, 0, rows, pl);  // lse = log(sum(exp(row))), every row
  for (int64_t r = 0; r < rows; ++r) {
    if (pt[r] == g.ignore_index) {
      pl[r] = T(0);
      row_loss[r] = T(0);
      continue;
    }
    const T* xr = x + r * C;
    // -log_softmax(x)[t] = lse - x[t]; smoothed: lse - (1 - e) x[t] - e/C sum_c x[c]
    row_loss[r] = eps == 0.0
                      ? pl[r] - xr[pt[r]]
                      : keep * (pl[r] - xr[pt[r]]) + spread * (static_cast<T>(C) * pl[r] - vec::sum(xr, C));
  }
}

// dx = (softmax(x) - q) * g_r for `rows` rows, with g_r = dloss_rows[r] (the reduction "none")
// or gall (sum: dloss, mean: dloss / count); 0 for ignored rows. x, pt, pl, dloss_rows and dx
// point at the first of them.
template <class T>
void cross_entropy_backward_row_range(const T* x, const int64_t* pt, const T* pl, const CrossEntropyRows& g,
                                      const T* dloss_rows, T gall, int64_t rows, T* dx) {
  const int64_t C = g.C;
  const double eps = g.label_smoothing;
  const T keep = static_cast<T>(1.0 - eps), spread = static_cast<T>(eps / static_cast<double>(C));
  for (int64_t r = 0; r < rows; ++r) {
    T* dr = dx + r * C;
    if (pt[r] == g.ignore_index) {
      std::fill(dr, dr + C, T(0));
      continue;
    }
    const T gscale = dloss_rows ? dloss_rows[r] : gall;
    const T l = pl[r];
    vec::map(x + r * C, dr, C, [=](auto v) { return vec::exp_nonpositive<T>(v - l) * gscale; });
    if (eps == 0.0) {
      dr[pt[r]] -= gscale;
    } else {
      for (int64_t c = 0; c < C; ++c) dr[c] -= spread * gscale;
      dr[pt[r]] -= keep * gscale;
    }
  }
}

// bfloat16 logits are computed in float32 a block of rows at a time: each thread widens its
// rows into a float32 buffer of at most kCrossEntropyWidenFloats (one row at least) and runs
// the float32 rows on it (the backward in place, then rounded back). Rows are independent, so
// lse, the losses and the gradient (rounded once) have the bits of the float32 kernel on a
// widened copy of the logits, which is never made whole.
constexpr int64_t kCrossEntropyWidenFloats = int64_t{1} << 16;

// body(s0, xf, rows) for the blocks of rows [s0, s0 + rows) of [r0, r1), xf their C values
// each widened to float32 (body may write over them).
template <class Body>
void for_widened_row_blocks(const bf16* x, int64_t C, int64_t r0, int64_t r1, Body&& body) {
  const int64_t block = std::max<int64_t>(1, kCrossEntropyWidenFloats / C);
  std::vector<float> xf(static_cast<std::size_t>(std::min(block, r1 - r0) * C));
  for (int64_t s0 = r0; s0 < r1; s0 += block) {
    const int64_t rows = std::min(block, r1 - s0);
    bf16_to_float_n(&x[s0 * C].bits, xf.data(), rows * C);
    body(s0, xf.data(), rows);
  }
}

// The per-row losses (T: the compute dtype, float32 for bfloat16 logits) into row_loss (N)
// and lse (N, 0 for ignored rows), rows split over threads.
template <class T>
void cross_entropy_rows(const Tensor& x, const int64_t* pt, const CrossEntropyRows& g, T* pl, T* row_loss) {
  const int64_t C = g.C;
  if constexpr (std::is_same_v<T, float>) {
    if (x.dtype() == kBFloat16) {
      parallel_rows(g.N, C, kGrainMath, [&](int64_t r0, int64_t r1) {
        for_widened_row_blocks(x.data_ptr<bf16>(), C, r0, r1, [&](int64_t s0, float* xf, int64_t rows) {
          cross_entropy_row_range<float>(xf, pt + s0, g, rows, pl + s0, row_loss + s0);
        });
      });
      return;
    }
  }
  const T* px = x.data_ptr<T>();
  parallel_rows(g.N, C, kGrainMath, [&](int64_t r0, int64_t r1) {
    cross_entropy_row_range<T>(px + r0 * C, pt + r0, g, r1 - r0, pl + r0, row_loss + r0);
  });
}

// Stores v into out's element i, rounded to out's dtype (float32 or bfloat16) when it differs.
template <class T>
void store_as(const Tensor& out, int64_t i, T v) {
  if (out.dtype() == kBFloat16) out.data_ptr<bf16>()[i] = to_bf16(static_cast<float>(v));
  else out.data_ptr<T>()[i] = v;
}

// out = the per-row losses (none: out has N elements), or their sum in row order (sum), or
// that sum / count (mean: count = the rows not ignored); lse (N) is saved for the backward.
// bfloat16 logits: lse is float32, the losses are computed in float32 and out is float32
// (autocast's loss) or bfloat16 (rounded once, from the float32 result).
inline void cross_entropy_forward(const Tensor& x, const int64_t* pt, const CrossEntropyRows& g, bool reduce,
                                  bool mean, int64_t count, const Tensor& lse, const Tensor& out) {
  dispatch_float(lse.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> row_loss(static_cast<std::size_t>(g.N));
    cross_entropy_rows<T>(x, pt, g, lse.data_ptr<T>(), row_loss.data());
    if (!reduce) {
      for (int64_t r = 0; r < g.N; ++r) store_as<T>(out, r, row_loss[r]);
      return;
    }
    double total = 0.0;  // summed in row order whatever the thread count
    for (int64_t r = 0; r < g.N; ++r)
      if (pt[r] != g.ignore_index) total += static_cast<double>(row_loss[r]);
    store_as<T>(out, 0, static_cast<T>(mean ? total / static_cast<double>(count) : total));
  });
}

// The backward of cross_entropy_forward: dloss has N elements (reduce false) or is 0-d, in the
// loss's dtype; dx has x's. bfloat16 x: computed in float32 from the widened rows (and a
// widened dloss), dx rounded once. dx may be x itself (Grads::reuse_saved): every row, or
// block of rows, is read before it is written.
inline void cross_entropy_backward(const Tensor& x, const Tensor& t, const Tensor& lse,
                                   const CrossEntropyRows& g, bool reduce, bool mean, int64_t count,
                                   const Tensor& dloss, const Tensor& dx) {
  dispatch_float(lse.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T gall = !reduce ? T(0)
                   : mean  ? static_cast<T>(dloss.item() / static_cast<double>(count))
                           : static_cast<T>(dloss.item());
    const Tensor dloss_rows = reduce ? Tensor() : dloss.to(lse.dtype());  // exact: bfloat16 widens
    const T* pdl = reduce ? nullptr : dloss_rows.template data_ptr<T>();
    const int64_t* pt = t.data_ptr<int64_t>();
    const T* pl = lse.data_ptr<T>();
    const int64_t C = g.C;
    if constexpr (std::is_same_v<T, float>) {
      if (x.dtype() == kBFloat16) {
        bf16* pdx = dx.data_ptr<bf16>();
        parallel_rows(g.N, C, kGrainMath, [&](int64_t r0, int64_t r1) {
          for_widened_row_blocks(x.data_ptr<bf16>(), C, r0, r1, [&](int64_t s0, float* xf, int64_t rows) {
            cross_entropy_backward_row_range<float>(xf, pt + s0, pl + s0, g, pdl ? pdl + s0 : nullptr, gall,
                                                    rows, xf);
            float_to_bf16_n(xf, &pdx[s0 * C].bits, rows * C);
          });
        });
        return;
      }
    }
    const T* px = x.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    parallel_rows(g.N, C, kGrainMath, [&](int64_t r0, int64_t r1) {
      cross_entropy_backward_row_range<T>(px + r0 * C, pt + r0, pl + r0, g, pdl ? pdl + r0 : nullptr, gall,
                                          r1 - r0, pdx + r0 * C);
    });
  });
}

// ---------------------------------------------------------------- mse_loss
// out = sum((a - b)^2) / n, summed in double in element order.
inline void mse_loss_forward(const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_float(a.dtype(), "mse_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    const int64_t n = a.numel();
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(pa[i]) - static_cast<double>(pb[i]);
      total += d * d;
    }
    *out.data_ptr<T>() = static_cast<T>(total / static_cast<double>(n));
  });
}

// da = 2 (a - b) dloss / n, and db = -da when db is defined.
inline void mse_loss_backward(const Tensor& a, const Tensor& b, double dloss, const Tensor& da,
                              const Tensor& db) {
  dispatch_float(a.dtype(), "mse_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = a.numel();
    const T norm = static_cast<T>(2.0 * dloss / static_cast<double>(n));
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    T* pd = da.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) pd[i] = norm * (pa[i] - pb[i]);
    if (!db.defined()) return;
    T* pdb = db.data_ptr<T>();
    for (int64_t i = 0; i < n; ++i) pdb[i] = -pd[i];
  });
}

}  // namespace xgrad::kernels
