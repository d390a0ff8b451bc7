// core/src/ops/nn_functional.cpp: the torch.nn.functional ops a GPT needs beyond the
// activations: dropout, embedding, layer_norm, cross_entropy (+ _last_dim), mse_loss.
//
// Each is one fused forward loop over contiguous buffers with its backward closure right
// below (saving the small per-row statistics the backward needs, never a second copy of a
// large tensor). Threads (kernels::parallel_rows): rows are split over xgrad's pool, each
// computed whole; layer_norm's weight/bias gradients split the features instead, and
// cross_entropy sums its per-row losses in row order, so results do not depend on the thread
// count. Adding an op: declare it in ops.h under nn_functional.cpp, write it here,
// add gradcheck rows in tests/core/gradcheck_rows_nn_functional.cpp and a torch case in
// tests/fixtures/gen_activation_nn.py.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "vec_math.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

// `t` itself when contiguous, else an unrecorded contiguous copy (callers record against t).
Tensor contig(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

void check_same_dtype(const char* op, const char* what, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    fail(op, what, " dtype mismatch: ", dtype_name(a.dtype()), " tensor of shape ", a.shape(), " and ",
         dtype_name(b.dtype()), " tensor of shape ", b.shape());
}

}  // namespace

// ---------------------------------------------------------------- dropout
// reference: torch aten/src/ATen/native/Dropout.cpp, _dropout_impl (what CPU tensors run):
//   noise = empty_like(input, contiguous).bernoulli_(1 - p); noise.div_(1 - p); input * noise
// so the mask is torch's stream for a contiguous tensor of input's shape, whatever its layout.
void check_dropout_p(const char* op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) fail(op, "dropout probability has to be between 0 and 1, but got ", p);
}

Tensor dropout(const Tensor& a, double p, Flag training, Generator* gen) {
  profiler::RecordFunction rec("dropout");
  check_dropout_p("dropout", p);
  if (!training || p == 0.0) return a;
  kernels::dispatch_float(a.dtype(), "dropout", [](auto) {});
  Tensor out = empty(a.shape(), a.dtype());
  if (p == 1.0) {  // torch: input * zeros({}), no draws
    std::memset(out.raw_data_ptr(), 0, static_cast<std::size_t>(out.numel()) * itemsize(a.dtype()));
    return record("MulBackward0", out, {a}, [](const Tensor& dout, Grads& grads) {
      // in the forward pass out = x * 0, so dx = dout * 0
      grads.add(0, zeros(dout.shape(), dout.dtype()));
    });
  }
  // The keep mask as bytes: the same draws as torch's float noise tensor, a quarter of the
  // memory; noise = mask / (1 - p) is applied as mask ? scale : 0 (what noise holds).
  Tensor mask = empty(a.shape(), kBool);
  (gen ? *gen : default_generator()).bernoulli(mask.data_ptr<bool>(), mask.numel(), 1.0 - p);
  const Tensor x = contig(a);
  kernels::dispatch_float(a.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T scale = T(1) / static_cast<T>(1.0 - p);  // noise.div_(1 - p), as torch rounds it
    const bool* pm = mask.data_ptr<bool>();
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    kernels::parallel_elems(out.numel(), kernels::kGrain, [&](int64_t lo, int64_t hi) {
      vec::mul_keep_mask(px + lo, pm + lo, scale, po + lo, hi - lo);
    });
  });
  return record("MulBackward0", out, {a}, [mask, p](const Tensor& dout, Grads& grads) {
    // in the forward pass out = x * noise (noise = mask / (1 - p)), so dx = dout * noise
    const Tensor dy = contig(dout);
    Tensor dx = empty(mask.shape(), dy.dtype());
    kernels::dispatch_float(dy.dtype(), "dropout_backward", [&](auto tag) {
      using T = decltype(tag);
      const T scale = T(1) / static_cast<T>(1.0 - p);
      const bool* pm = mask.data_ptr<bool>();
      const T* pd = dy.data_ptr<T>();
      T* px = dx.data_ptr<T>();
      kernels::parallel_elems(dx.numel(), kernels::kGrain, [&](int64_t lo, int64_t hi) {
        vec::mul_keep_mask(pd + lo, pm + lo, scale, px + lo, hi - lo);
      });
    });
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- embedding
Tensor embedding(const Tensor& weight, const Tensor& indices) {
  profiler::RecordFunction rec("embedding");
  if (weight.dim() != 2)
    fail("embedding", "weight must be 2-D (num_embeddings, embedding_dim), got shape ", weight.shape());
  if (indices.dtype() != kInt64)
    fail("embedding", "indices must be int64, got a ", dtype_name(indices.dtype()), " tensor of shape ",
         indices.shape());
  kernels::dispatch_float(weight.dtype(), "embedding", [](auto) {});
  const int64_t V = weight.size(0), D = weight.size(1);
  const Tensor idx = contig(indices);
  const int64_t* pi = idx.data_ptr<int64_t>();
  const int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i)
    if (pi[i] < 0 || pi[i] >= V)
      fail("embedding", "index ", pi[i], " is out of range for num_embeddings ", V, " (weight shape ",
           weight.shape(), ", indices shape ", indices.shape(), ")");
  Shape out_shape = indices.shape();
  out_shape.push_back(D);  // indices.shape + (D,)
  Tensor out = empty(out_shape, weight.dtype());
  // rows are read in place when each is contiguous (weight.stride(1) == 1)
  const Tensor w = weight.stride(1) == 1 || D == 1 ? weight : contig(weight);
  const std::size_t item = itemsize(w.dtype());
  const std::size_t row_bytes = static_cast<std::size_t>(D) * item;
  const std::size_t stride_bytes = static_cast<std::size_t>(w.stride(0)) * item;
  const char* pw = static_cast<const char*>(w.raw_data_ptr());
  char* po = static_cast<char*>(out.raw_data_ptr());
  kernels::parallel_rows(n, D, kernels::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(po + static_cast<std::size_t>(i) * row_bytes,
                  pw + static_cast<std::size_t>(pi[i]) * stride_bytes, row_bytes);
  });
  return record("EmbeddingBackward0", out, {weight},
                [ids = save(idx), V, D](const Tensor& dout, Grads& grads) {
                  // in the forward pass out[i] = weight[ids[i]], so dweight[ids[i]] += dout[i] (repeated ids
                  // accumulate)
                  const Tensor& iv = ids.get();
                  const Tensor dy = contig(dout);
                  Tensor dw = zeros({V, D}, dy.dtype());
                  kernels::dispatch_float(dy.dtype(), "embedding_backward", [&](auto tag) {
                    using T = decltype(tag);
                    const int64_t* pid = iv.data_ptr<int64_t>();
                    const T* pd = dy.data_ptr<T>();
                    T* pw = dw.data_ptr<T>();
                    const int64_t n = iv.numel();
                    // threads split the embedding columns: repeated ids still add in the order of i
                    kernels::parallel_rows(D, n, kernels::kGrain, [&](int64_t k0, int64_t k1) {
                      for (int64_t i = 0; i < n; ++i) {
                        T* row = pw + pid[i] * D;
                        const T* src = pd + i * D;
                        for (int64_t k = k0; k < k1; ++k) row[k] += src[k];
                      }
                    });
                  });
                  grads.add(0, std::move(dw));
                });
}

// ---------------------------------------------------------------- layer_norm
namespace {
constexpr int64_t kLayerNormRowBlock = 64;  // rows per partial dw / db sum in the backward
}  // namespace

// reference: llm.c train_gpt2.c layernorm_forward/layernorm_backward; torch's
// layer_norm_kernel (biased variance, rstd = 1 / sqrt(var + eps)). The row loops, forward and
// backward with their math, are vec::layer_norm_rows and vec::layer_norm_backward_rows.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  profiler::RecordFunction rec("layer_norm");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  if (k == 0) fail("layer_norm", "normalized_shape must have at least one dim, got ", normalized_shape);
  const Shape& xs = x.shape();
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = xs[x.dim() - k + i] == normalized_shape[i];
  if (!ok)
    fail("layer_norm", "normalized_shape ", normalized_shape,
         " does not match the trailing dims of input shape ", xs);
  kernels::dispatch_float(x.dtype(), "layer_norm", [](auto) {});
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    const char* what = p == &weight ? "weight" : "bias";
    if (p->shape() != normalized_shape)
      fail("layer_norm", what, " of shape ", p->shape(), " does not match normalized_shape ",
           normalized_shape);
    check_same_dtype("layer_norm", what, x, *p);
  }
  const int64_t N = numel_of(normalized_shape);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  const Tensor xc = contig(x);
  const Tensor wc = weight.defined() ? contig(weight) : Tensor();
  const Tensor bc = bias.defined() ? contig(bias) : Tensor();
  Tensor out = empty(xs, x.dtype());
  Tensor mean = empty({M}, x.dtype()), rstd = empty({M}, x.dtype());
  kernels::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data_ptr<T>();
    const T* pw = wc.defined() ? wc.data_ptr<T>() : nullptr;
    const T* pb = bc.defined() ? bc.data_ptr<T>() : nullptr;
    T* py = out.data_ptr<T>();
    T* pm = mean.data_ptr<T>();
    T* pr = rstd.data_ptr<T>();
    // y = (x - mean) * rstd * w + b, row by row (vec_math.h)
    kernels::parallel_rows(M, N, kernels::kGrain, [&](int64_t r0, int64_t r1) {
      vec::layer_norm_rows<T>(px, pw, pb, py, pm, pr, N, eps, r0, r1);
    });
  });
  return record("NativeLayerNormBackward0", out, {x, weight, bias},
                [xsv = save(x), wsv = save(weight), mean, rstd, normalized_shape, N, M](const Tensor& dout,
                                                                                        Grads& grads) {
                  // in the forward pass y = xhat * w + b with xhat = (x - mean) * rstd, so
                  //   dbias = sum_rows(dy), dweight = sum_rows(dy * xhat),
                  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w
                  const Tensor xc = contig(xsv.get());
                  const Tensor wc = wsv.defined() ? contig(wsv.get()) : Tensor();
                  const Tensor dy = contig(dout);
                  const bool want_x = grads.wants(0), want_w = grads.wants(1), want_b = grads.wants(2);
                  const DType dt = xc.dtype();
                  Tensor dx = want_x ? empty(xc.shape(), dt) : Tensor();
                  Tensor dw = want_w ? zeros(normalized_shape, dt) : Tensor();
                  Tensor db = want_b ? zeros(normalized_shape, dt) : Tensor();
                  kernels::dispatch_float(dt, "layer_norm_backward", [&](auto tag) {
                    using T = decltype(tag);
                    const T* px = xc.data_ptr<T>();
                    const T* pw = wc.defined() ? wc.data_ptr<T>() : nullptr;
                    const T* pd = dy.data_ptr<T>();
                    const T* pm = mean.data_ptr<T>();
                    const T* pr = rstd.data_ptr<T>();
                    T* pdx = want_x ? dx.data_ptr<T>() : nullptr;
                    T* pdw = want_w ? dw.data_ptr<T>() : nullptr;
                    T* pdb = want_b ? db.data_ptr<T>() : nullptr;
                    // Rows in fixed blocks of kLayerNormRowBlock: a block computes dx for its rows and its
                    // own partial dw / db (its rows summed in order), and dw / db add the partials up in
                    // block order. The blocks do not depend on the thread count, so neither do the bits,
                    // and x and dy are read once whatever the threads.
                    const int64_t blocks = (M + kLayerNormRowBlock - 1) / kLayerNormRowBlock;
                    std::vector<T> part_w(pdw ? blocks * N : 0, T(0)), part_b(pdb ? blocks * N : 0, T(0));
                    kernels::parallel_rows(
                        blocks, kLayerNormRowBlock * N, kernels::kGrain, [&](int64_t b0, int64_t b1) {
                          for (int64_t b = b0; b < b1; ++b)
                            vec::layer_norm_backward_rows<T>(
                                px, pd, pw, pm, pr, pdx, pdw ? part_w.data() + b * N : nullptr,
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
                  if (want_x) grads.add(0, std::move(dx));
                  if (want_w) grads.add(1, std::move(dw));
                  if (want_b) grads.add(2, std::move(db));
                });
}

// ---------------------------------------------------------------- cross_entropy
// Two spellings over one fused kernel:
//   cross_entropy(input, target, opts)            torch's F.cross_entropy: classes in dim 1,
//       input (C), (N, C) or (N, C, d1, ...), target () / (N) / (N, d1, ...)
//   cross_entropy_last_dim(logits, targets, opts) classes in the LAST dim, (..., C) against
//       (...): the (B, T, C) GPT logits without a flatten. Equal to
//       F.cross_entropy(logits.flatten(0, -2), targets.flatten()) (value and gradient).
// cross_entropy moves dim 1 to the end (a view; its backward is the permute's) and runs the
// class-last kernel. reduction "mean" divides by the number of targets != ignore_index (NaN
// when all are ignored, like torch's 0/0), "sum" sums, "none" returns the per-target losses
// (0 where ignored) in target's shape. label_smoothing e mixes the one-hot target with the
// uniform distribution: q = (1 - e) onehot(t) + e / C, loss = -sum_c q_c log_softmax(x)_c.
// reference: torch 1.13 aten/src/ATen/native/LossNLL.cpp (cross_entropy_loss_label_smoothing,
// nll_loss_nd); llm.c crossentropy_softmax_backward.
namespace {

enum class Reduction { kMean, kSum, kNone };

Reduction parse_reduction(const char* op, const std::string& r) {
  if (r == "mean") return Reduction::kMean;
  if (r == "sum") return Reduction::kSum;
  if (r == "none") return Reduction::kNone;
  fail(op, "reduction must be \"mean\", \"sum\" or \"none\", got \"", r, "\"");
}

// logits (..., C) (any layout), targets (...) int64: the checked, fused loss.
Tensor cross_entropy_classes_last(const char* op, const Tensor& logits, const Tensor& targets,
                                  const CrossEntropyOptions& o, const Shape& shown_input_shape) {
  const Reduction red = parse_reduction(op, o.reduction);
  const double eps = o.label_smoothing;
  if (!(eps >= 0.0 && eps <= 1.0)) fail(op, "label_smoothing must be between 0.0 and 1.0, got ", eps);
  const int64_t ignore_index = o.ignore_index;
  const int64_t C = logits.shape().back();
  const Shape& tshape = targets.shape();
  const int64_t N = numel_of(tshape);
  const Tensor tc = contig(targets);
  const int64_t* pt = tc.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (pt[i] == ignore_index) continue;
    if (pt[i] < 0 || pt[i] >= C)
      fail(op, "target ", pt[i], " is out of bounds for ", C, " classes (input shape ", shown_input_shape,
           ", target shape ", tshape, ", ignore_index ", ignore_index, ")");
    ++count;
  }
  const Tensor xc = contig(logits);
  Tensor lse = empty({N}, logits.dtype());  // log(sum(exp(row))), per row
  Tensor out = red == Reduction::kNone ? empty(tshape, logits.dtype()) : empty({}, logits.dtype());
  kernels::dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data_ptr<T>();
    T* pl = lse.data_ptr<T>();
    std::vector<T> row_loss(static_cast<std::size_t>(N));
    const T keep = static_cast<T>(1.0 - eps), spread = static_cast<T>(eps / static_cast<double>(C));
    kernels::parallel_rows(N, C, kernels::kGrainMath, [&](int64_t r0, int64_t r1) {
      vec::logsumexp_rows(px, C, r0, r1, pl);  // lse = log(sum(exp(row))), every row
      for (int64_t r = r0; r < r1; ++r) {
        if (pt[r] == ignore_index) {
          pl[r] = T(0);
          row_loss[r] = T(0);
          continue;
        }
        const T* xr = px + r * C;
        // -log_softmax(x)[t] = lse - x[t]; smoothed: lse - (1 - e) x[t] - e/C sum_c x[c]
        row_loss[r] =
            eps == 0.0 ? pl[r] - xr[pt[r]]
                       : keep * (pl[r] - xr[pt[r]]) + spread * (static_cast<T>(C) * pl[r] - vec::sum(xr, C));
      }
    });
    if (red == Reduction::kNone) {
      std::copy(row_loss.begin(), row_loss.end(), out.data_ptr<T>());
      return;
    }
    double total = 0.0;  // summed in row order whatever the thread count
    for (int64_t r = 0; r < N; ++r)
      if (pt[r] != ignore_index) total += static_cast<double>(row_loss[r]);
    *out.data_ptr<T>() = static_cast<T>(red == Reduction::kSum ? total : total / static_cast<double>(count));
  });
  return record(
      "NllLossBackward0", out, {logits},
      [xs = save(xc), ts = save(tc), lse, count, C, N, ignore_index, red, eps](const Tensor& dout,
                                                                               Grads& grads) {
        // in the forward pass loss_r = lse_r - sum_c q_c x[r, c] with q = (1 - e) onehot(t_r) + e/C,
        // so dx[r] = (softmax(x[r]) - q) * g_r, g_r = dloss (sum), dloss / count (mean) or
        // dloss[r] (none); 0 for ignored rows
        const Tensor& xv = xs.get();
        const Tensor dy = contig(dout);
        Tensor dx = empty(xv.shape(), xv.dtype());
        kernels::dispatch_float(xv.dtype(), "cross_entropy_backward", [&](auto tag) {
          using T = decltype(tag);
          const T gall = red == Reduction::kMean  ? static_cast<T>(dy.item() / static_cast<double>(count))
                         : red == Reduction::kSum ? static_cast<T>(dy.item())
                                                  : T(0);
          const T* pdy = red == Reduction::kNone ? dy.data_ptr<T>() : nullptr;
          const T* px = xv.data_ptr<T>();
          const T* pl = lse.data_ptr<T>();
          const int64_t* ptg = ts.get().data_ptr<int64_t>();
          const T keep = static_cast<T>(1.0 - eps), spread = static_cast<T>(eps / static_cast<double>(C));
          T* pdx = dx.data_ptr<T>();
          kernels::parallel_rows(N, C, kernels::kGrainMath, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
              T* dr = pdx + r * C;
              if (ptg[r] == ignore_index) {
                std::fill(dr, dr + C, T(0));
                continue;
              }
              const T gscale = pdy ? pdy[r] : gall;
              const T l = pl[r];
              vec::map(px + r * C, dr, C, [=](auto v) { return vec::exp_nonpositive<T>(v - l) * gscale; });
              if (eps == 0.0) {
                dr[ptg[r]] -= gscale;
              } else {
                for (int64_t c = 0; c < C; ++c) dr[c] -= spread * gscale;
                dr[ptg[r]] -= keep * gscale;
              }
            }
          });
        });
        grads.add(0, std::move(dx));
      });
}

void check_ce_dtypes(const char* op, const Tensor& input, const Tensor& target) {
  kernels::dispatch_float(input.dtype(), op, [](auto) {});
  if (target.dtype() != kInt64)
    fail(op, "target must be int64 class indices, got a ", dtype_name(target.dtype()), " tensor of shape ",
         target.shape(), " (input shape ", input.shape(), "; class-probability targets are not supported)");
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  profiler::RecordFunction rec("cross_entropy");
  const char* op = "cross_entropy";
  if (input.dim() == 0)
    fail(op, "input must have a class dim: (C), (N, C) or (N, C, d1, ...), got shape ", input.shape());
  check_ce_dtypes(op, input, target);
  Shape expected = input.shape();  // target: input's shape without the class dim
  expected.erase(expected.begin() + (input.dim() == 1 ? 0 : 1));
  if (target.shape() != expected)
    fail(op, "expected target of shape ", expected, " for input of shape ", input.shape(),
         " (classes in dim 1, as torch), got target of shape ", target.shape(),
         input.dim() == 3 && target.shape().size() == 2
             ? "; for class-last (B, T, C) logits use cross_entropy_last_dim or flatten(0, 1)"
             : "");
  if (input.dim() <= 2) return cross_entropy_classes_last(op, input, target, options, input.shape());
  std::vector<int64_t> order;  // (N, C, d1, ..., dk) -> (N, d1, ..., dk, C)
  order.push_back(0);
  for (int64_t d = 2; d < input.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return cross_entropy_classes_last(op, input.permute(order), target, options, input.shape());
}

Tensor cross_entropy_last_dim(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOptions& options) {
  profiler::RecordFunction rec("cross_entropy_last_dim");
  const char* op = "cross_entropy_last_dim";
  if (logits.dim() == 0) fail(op, "logits must have a class dim (the last), got shape ", logits.shape());
  check_ce_dtypes(op, logits, targets);
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != expected)
    fail(op, "expected targets of shape ", expected, " for logits of shape ", logits.shape(),
         " (classes in the last dim), got targets of shape ", targets.shape());
  return cross_entropy_classes_last(op, logits, targets, options, logits.shape());
}

// ---------------------------------------------------------------- mse_loss
// mean((input - target)^2). Shapes must match exactly: torch broadcasts them with a warning,
// which is almost always a bug ((N, 1) against (N) gives an (N, N) loss), so xgrad throws.
Tensor mse_loss(const Tensor& input, const Tensor& target) {
  profiler::RecordFunction rec("mse_loss");
  check_same_dtype("mse_loss", "input/target", input, target);
  if (input.shape() != target.shape())
    fail("mse_loss", "input of shape ", input.shape(), " and target of shape ", target.shape(),
         " differ (xgrad does not broadcast here; reshape one of them)");
  const Tensor a = contig(input), b = contig(target);
  const int64_t n = a.numel();
  Tensor out = empty({}, input.dtype());
  kernels::dispatch_float(input.dtype(), "mse_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data_ptr<T>();
    const T* pb = b.data_ptr<T>();
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(pa[i]) - static_cast<double>(pb[i]);
      total += d * d;
    }
    *out.data_ptr<T>() = static_cast<T>(total / static_cast<double>(n));
  });
  return record("MseLossBackward0", out, {input, target},
                [as = save(a), bs = save(b), n](const Tensor& dout, Grads& grads) {
                  // in the forward pass loss = sum((a - b)^2) / n, so da = 2 (a - b) dloss / n = -db
                  const Tensor& av = as.get();
                  const Tensor& bv = bs.get();
                  Tensor da = empty(av.shape(), av.dtype());
                  kernels::dispatch_float(av.dtype(), "mse_loss_backward", [&](auto tag) {
                    using T = decltype(tag);
                    const T norm = static_cast<T>(2.0 * dout.item() / static_cast<double>(n));
                    const T* pa = av.data_ptr<T>();
                    const T* pb = bv.data_ptr<T>();
                    T* pd = da.data_ptr<T>();
                    for (int64_t i = 0; i < n; ++i) pd[i] = norm * (pa[i] - pb[i]);
                  });
                  if (grads.wants(1)) {
                    Tensor db = empty(da.shape(), da.dtype());
                    kernels::dispatch_float(da.dtype(), "mse_loss_backward", [&](auto tag) {
                      using T = decltype(tag);
                      const T* pd = da.data_ptr<T>();
                      T* pb = db.data_ptr<T>();
                      for (int64_t i = 0, m = da.numel(); i < m; ++i) pb[i] = -pd[i];
                    });
                    grads.add(1, std::move(db));
                  }
                  if (grads.wants(0)) grads.add(0, da);
                });
}

}  // namespace xgrad
