// core/src/ops/nn_functional.cpp: the torch.nn.functional ops a GPT needs beyond the
// activations: dropout, embedding, layer_norm, cross_entropy (+ _last_dim), mse_loss.
//
// Each op checks its operands, calls its fused forward kernel and records its backward right
// below, which calls the matching backward kernel (kernels/nn_functional_kernel.h: the loops,
// their threads and why the bits do not depend on the thread count). A forward saves the
// small per-row statistics its backward needs, never a second copy of a large tensor; a
// strided input is saved as it is and made contiguous for the backward kernel.
//
// With grad mode on inside the backward (backward with create_graph), each op computes the
// same gradient from recorded ops instead, so it can be differentiated again: dropout with
// its saved mask, embedding with a recorded embedding_dense_backward, layer_norm as torch's
// native_layer_norm_backward, cross_entropy as (softmax(x) - q) * g. The kernel path is the
// one an ordinary backward takes; tests/core/test_fused_composed.cpp pins that both agree. Adding
// an op: declare it in ops.h under nn_functional.cpp, write its kernel pair and the op here,
// add gradcheck rows in tests/core/gradcheck_rows_nn_functional.cpp and a torch case in
// tests/fixtures/gen_activation_nn.py.
//
// bfloat16: dropout's kernel scales by torch's bfloat16 noise value; embedding copies rows and
// accumulates its gradient in float32; layer_norm's kernels widen rows into float32 buffers
// (float32 statistics, dweight and dbias summed in float32); cross_entropy runs in float32
// between recorded to() conversions. Each result and gradient is rounded once. mse_loss refuses bfloat16, as
// torch 1.13's CPU mse_loss does.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "nn_functional_kernel.h"
#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

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
  check_floating_any("dropout", a);
  Tensor out = empty(a.shape(), a.dtype());
  if (p == 1.0) {  // torch: input * zeros({}), no draws
    std::memset(out.raw_data_ptr(), 0, static_cast<std::size_t>(out.numel()) * itemsize(a.dtype()));
    return record("MulBackward0", out, {a}, [](const Tensor& dout, Grads& grads) {
      // in the forward pass out = x * 0, so dx = dout * 0
      grads.add(0, GradMode::is_enabled() ? dout * 0.0 : zeros(dout.shape(), dout.dtype()));
    });
  }
  // The keep mask as bytes: the same draws as torch's float noise tensor, a quarter of the
  // memory; noise = mask / (1 - p) is applied as mask ? scale : 0 (what noise holds).
  Tensor mask = empty(a.shape(), kBool);
  (gen ? *gen : default_generator()).bernoulli(mask.data_ptr<bool>(), mask.numel(), 1.0 - p);
  kernels::dropout_forward(contig(a), mask, p, out);
  return record("MulBackward0", out, {a}, [mask, p](const Tensor& dout, Grads& grads) {
    // in the forward pass out = x * noise (noise = mask / (1 - p)), so dx = dout * noise
    if (GradMode::is_enabled()) {
      grads.add(0, dout * mask.to(dout.dtype()) * (1.0 / (1.0 - p)));
      return;
    }
    Tensor dx = empty(mask.shape(), dout.dtype());
    kernels::dropout_backward(contig(dout), mask, p, dx);
    grads.add(0, std::move(dx));
  });
}

// ---------------------------------------------------------------- embedding
namespace {

// embedding's gradient as an op of its own (torch's embedding_dense_backward): dw (V, D) with
// dw[ids[i]] += dout[i] (repeated ids accumulate). Recorded when grad mode is on (a backward
// with create_graph); its own backward is an embedding lookup, so it differentiates to any
// order. With grad mode off it is the kernel call alone.
Tensor embedding_dense_backward(const Tensor& dout, const Tensor& ids, int64_t V, int64_t D) {
  // a bfloat16 gradient accumulates in float32 and is rounded once
  Tensor dw = zeros({V, D}, dout.dtype() == kBFloat16 ? kFloat32 : dout.dtype());
  kernels::embedding_backward(ids, contig(compute_copy(dout)), dw);
  dw = result_as(dw, dout);
  return record("EmbeddingDenseBackwardBackward0", dw, {dout}, [ids](const Tensor& ddw, Grads& grads) {
    // in the forward pass dw[ids[i]] += dout[i], so ddout[i] = ddw[ids[i]]
    grads.add(0, embedding(ddw, ids));
  });
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  profiler::RecordFunction rec("embedding");
  if (weight.dim() != 2)
    fail("embedding", "weight must be 2-D (num_embeddings, embedding_dim), got shape ", weight.shape());
  if (indices.dtype() != kInt64)
    fail("embedding", "indices must be int64, got a ", dtype_name(indices.dtype()), " tensor of shape ",
         indices.shape());
  check_floating_any("embedding", weight);
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
  kernels::embedding_forward(weight.stride(1) == 1 || D == 1 ? weight : contig(weight), pi, n, out);
  return record("EmbeddingBackward0", out, {weight},
                [ids = save(idx), V, D](const Tensor& dout, Grads& grads) {
                  // in the forward pass out[i] = weight[ids[i]], so dweight[ids[i]] += dout[i] (repeated ids
                  // accumulate)
                  grads.add(0, embedding_dense_backward(dout, ids.get(), V, D));
                });
}

// ---------------------------------------------------------------- layer_norm
// reference: llm.c train_gpt2.c layernorm_forward/layernorm_backward; torch's
// layer_norm_kernel (biased variance, rstd = 1 / sqrt(var + eps)); the kernel pair is
// kernels::layer_norm_forward / layer_norm_backward.
namespace {

// The backward in recorded ops (torch's native_layer_norm_backward, composed), normalising
// over x's last k dims. mean and rstd are computed again from x here, rather than taken from
// the forward's statistics, so that dx's dependence on x through them is recorded too.
void layer_norm_backward_recorded(const Tensor& x, const Tensor& w, const Tensor& dy, int64_t k, double eps,
                                  Grads& grads) {
  Shape rows, cols;  // the leading dims (one per normalised row) and the normalised ones
  for (int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - k ? rows : cols).push_back(d);
  const Dims over_cols(cols);
  const Tensor mu = mean(x, over_cols, true);
  const Tensor xc = x - mu;
  const Tensor rs = rsqrt(mean(xc * xc, over_cols, true) + eps);
  const Tensor xhat = xc * rs;
  auto sum_rows = [&](const Tensor& t) { return rows.empty() ? t : sum(t, Dims(rows)); };
  if (grads.wants(0)) {
    const Tensor g = w.defined() ? dy * w : dy;
    grads.add(0, rs * (g - mean(g, over_cols, true) - xhat * mean(g * xhat, over_cols, true)));
  }
  if (grads.wants(1)) grads.add(1, sum_rows(dy * xhat));
  if (grads.wants(2)) grads.add(2, sum_rows(dy));
}

}  // namespace

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
  check_floating_any("layer_norm", x);
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
  Tensor out = empty(xs, x.dtype());
  // the row statistics stay float32 for bfloat16 (the kernel computes in float32)
  const DType stat = x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  Tensor mean = empty({M}, stat), rstd = empty({M}, stat);
  kernels::layer_norm_forward(contig(x), weight.defined() ? contig(weight) : Tensor(),
                              bias.defined() ? contig(bias) : Tensor(), eps, M, N, out, mean, rstd);
  return record("NativeLayerNormBackward0", out, {x, weight, bias},
                [xs = save(x), ws = save(weight), mean, rstd, normalized_shape, N, M, eps](const Tensor& dout,
                                                                                           Grads& grads) {
                  // in the forward pass y = xhat * w + b with xhat = (x - mean) * rstd, so
                  //   dbias = sum_rows(dy), dweight = sum_rows(dy * xhat),
                  //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w
                  if (GradMode::is_enabled()) {
                    layer_norm_backward_recorded(xs.get(), ws.defined() ? ws.get() : Tensor(), dout,
                                                 static_cast<int64_t>(normalized_shape.size()), eps, grads);
                    return;
                  }
                  const DType dt = xs.get().dtype(), acc = mean.dtype();  // dw, db sum in acc
                  Tensor dx = grads.wants(0) ? empty(xs.get().shape(), dt) : Tensor();
                  Tensor dw = grads.wants(1) ? zeros(normalized_shape, acc) : Tensor();
                  Tensor db = grads.wants(2) ? zeros(normalized_shape, acc) : Tensor();
                  kernels::layer_norm_backward(contig(xs.get()), ws.defined() ? contig(ws.get()) : Tensor(),
                                               contig(dout), mean, rstd, M, N, dx, dw, db);
                  if (dx.defined()) grads.add(0, std::move(dx));
                  if (dw.defined()) grads.add(1, dw.to(dt));  // bfloat16: rounded once
                  if (db.defined()) grads.add(2, db.to(dt));
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

// The backward in recorded ops: dx[r] = (softmax(x[r]) - q_r) * g_r for logits x (..., C) and
// the contiguous targets t, where q_r and the row weights (0 for an ignored row, 1 / count for
// "mean", else 1) are constants and dloss carries its history.
Tensor cross_entropy_backward_recorded(const Tensor& x, const Tensor& t, const kernels::CrossEntropyRows& g,
                                       bool reduce, bool mean, int64_t count, const Tensor& dloss) {
  const int64_t N = g.N, C = g.C;
  const double e = g.label_smoothing;
  std::vector<double> q(static_cast<std::size_t>(N * C)), row_weight(static_cast<std::size_t>(N));
  const int64_t* pt = t.data_ptr<int64_t>();
  for (int64_t r = 0; r < N; ++r) {
    if (pt[r] == g.ignore_index) continue;  // q and the weight stay 0
    row_weight[r] = mean ? 1.0 / static_cast<double>(count) : 1.0;
    for (int64_t c = 0; c < C; ++c) q[r * C + c] = e / static_cast<double>(C);
    q[r * C + pt[r]] += 1.0 - e;
  }
  const DType dt = x.dtype();
  const Tensor x2 = x.reshape({N, C});  // (N, C)
  const Tensor weights = from_vector(row_weight, {N, 1}).to(dt) * (reduce ? dloss : dloss.reshape({N, 1}));
  return ((softmax(x2, -1) - from_vector(q, {N, C}).to(dt)) * weights).reshape(x.shape());
}

// logits (..., C) (any layout), targets (...) int64: the checked, fused loss. bfloat16 logits
// are computed in float32 (the kernels widen them a block of rows at a time), the loss has the
// dtype loss_dtype (float32 under autocast, else bfloat16, rounded once) and the gradient is
// rounded once to bfloat16: the bits of the loss on logits.to(kFloat32), without that copy.
Tensor cross_entropy_classes_last(const char* op, const Tensor& logits, const Tensor& targets,
                                  const CrossEntropyOptions& o, const Shape& shown_input_shape,
                                  DType loss_dtype) {
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
  const kernels::CrossEntropyRows g{.N = N, .C = C, .ignore_index = ignore_index, .label_smoothing = eps};
  const bool reduce = red != Reduction::kNone, mean = red == Reduction::kMean;
  const DType compute = logits.dtype() == kBFloat16 ? kFloat32 : logits.dtype();
  Tensor lse = empty({N}, compute);  // log(sum(exp(row))), per row
  Tensor out = reduce ? empty({}, loss_dtype) : empty(tshape, loss_dtype);
  kernels::cross_entropy_forward(contig(logits), pt, g, reduce, mean, count, lse, out);
  return record(
      "NllLossBackward0", out, {logits},
      [xs = save(logits), ts = save(tc), lse, g, reduce, mean, count](const Tensor& dout, Grads& grads) {
        // in the forward pass loss_r = lse_r - sum_c q_c x[r, c] with
        // q = (1 - e) onehot(t_r) + e/C, so dx[r] = (softmax(x[r]) - q) * g_r,
        // g_r = dloss (sum), dloss / count (mean) or dloss[r] (none); 0 for ignored rows
        if (GradMode::is_enabled()) {  // bfloat16: the float32 ops on widened copies, rounded once
          const Tensor& x = xs.get();
          const DType dt = x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
          grads.add(0,
                    cross_entropy_backward_recorded(x.to(dt), ts.get(), g, reduce, mean, count, dout.to(dt))
                        .to(x.dtype()));
          return;
        }
        // dx is written over the saved logits when nothing reads them again (the caller kept
        // no handle on them): the kernels read each row before writing it
        Tensor dx = grads.reuse_saved(xs);
        const Tensor x = dx.defined() ? dx : contig(xs.get());
        if (!dx.defined()) dx = empty(x.shape(), x.dtype());
        kernels::cross_entropy_backward(x, ts.get(), lse, g, reduce, mean, count, contig(dout), dx);
        grads.add(0, std::move(dx));
      });
}

void check_ce_dtypes(const char* op, const Tensor& input, const Tensor& target) {
  check_floating_any(op, input);
  if (target.dtype() != kInt64)
    fail(op, "target must be int64 class indices, got a ", dtype_name(target.dtype()), " tensor of shape ",
         target.shape(), " (input shape ", input.shape(), "; class-probability targets are not supported)");
}

}  // namespace

// Under autocast, cross_entropy is on the float32 list (autocast.h): bfloat16 logits give a
// float32 loss, computed as on logits.to(kFloat32) without making that copy.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) {
  const DType loss_dtype = autocast::wants_fp32(input) ? kFloat32 : input.dtype();
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
  if (input.dim() <= 2)
    return cross_entropy_classes_last(op, input, target, options, input.shape(), loss_dtype);
  std::vector<int64_t> order;  // (N, C, d1, ..., dk) -> (N, d1, ..., dk, C)
  order.push_back(0);
  for (int64_t d = 2; d < input.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return cross_entropy_classes_last(op, input.permute(order), target, options, input.shape(), loss_dtype);
}

Tensor cross_entropy_last_dim(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyOptions& options) {
  const DType loss_dtype = autocast::wants_fp32(logits) ? kFloat32 : logits.dtype();
  profiler::RecordFunction rec("cross_entropy_last_dim");
  const char* op = "cross_entropy_last_dim";
  if (logits.dim() == 0) fail(op, "logits must have a class dim (the last), got shape ", logits.shape());
  check_ce_dtypes(op, logits, targets);
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != expected)
    fail(op, "expected targets of shape ", expected, " for logits of shape ", logits.shape(),
         " (classes in the last dim), got targets of shape ", targets.shape());
  return cross_entropy_classes_last(op, logits, targets, options, logits.shape(), loss_dtype);
}

// ---------------------------------------------------------------- mse_loss
// mean((input - target)^2). Shapes must match exactly: torch broadcasts them with a warning,
// which is almost always a bug ((N, 1) against (N) gives an (N, N) loss), so xgrad throws.
Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (autocast::wants_fp32(input, target)) return std::apply(mse_loss, autocast::to_fp32(input, target));
  profiler::RecordFunction rec("mse_loss");
  check_same_dtype("mse_loss", "input/target", input, target);
  if (input.shape() != target.shape())
    fail("mse_loss", "input of shape ", input.shape(), " and target of shape ", target.shape(),
         " differ (xgrad does not broadcast here; reshape one of them)");
  kernels::check_floating("mse_loss", input);
  Tensor out = empty({}, input.dtype());
  kernels::mse_loss_forward(contig(input), contig(target), out);
  return record("MseLossBackward0", out, {input, target},
                [as = save(input), bs = save(target)](const Tensor& dout, Grads& grads) {
                  // in the forward pass loss = sum((a - b)^2) / n, so da = 2 (a - b) dloss / n = -db
                  if (GradMode::is_enabled()) {
                    const Tensor da =
                        (as.get() - bs.get()) * (dout * (2.0 / static_cast<double>(as.get().numel())));
                    if (grads.wants(0)) grads.add(0, da);
                    if (grads.wants(1)) grads.add(1, -da);
                    return;
                  }
                  Tensor da = empty(as.get().shape(), as.get().dtype());
                  Tensor db = grads.wants(1) ? empty(da.shape(), da.dtype()) : Tensor();
                  kernels::mse_loss_backward(contig(as.get()), contig(bs.get()), dout.item(), da, db);
                  if (db.defined()) grads.add(1, std::move(db));
                  if (grads.wants(0)) grads.add(0, da);
                });
}

}  // namespace xgrad
