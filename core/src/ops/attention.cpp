// core/src/ops/attention.cpp: scaled_dot_product_attention (F.scaled_dot_product_attention),
// the fused hot path of the GPT's attention, with its backward right below.
//
// It computes, fused, what this chain of composed ops computes
//   scores = q @ k^T * scale + attn_mask;  scores.masked_fill_(causal, -inf)
//   w = softmax(scores, -1) (a row of -inf only: zeros);  w = dropout(w, p);  out = w @ v
// with enable_gqa's key and value heads each serving a group of Hq / Hkv query heads
// and computes it per (batch..., ) matrix in one kernel pair (kernels/sdpa_kernel.h, on
// attention_kernel.h and attention_backward.h: blocks of query rows in the lanes of a vector, the products on
// register tiles, the softmax down the columns, the causal triangle's upper half skipped), the matrices split
// over xgrad's threads (each on one thread, so the same bits at any thread count):
// - the dropout mask is exactly dropout()'s (one Generator::bernoulli stream over a contiguous
//   (..., L, S) tensor; drawn matrix by matrix, in order, as the threads reach them) into one
//   byte per weight;
// - saved for backward: the softmax output W (the causal part only, in the kernel's layout) and
//   that mask as the kernel reads it (one bit a weight it computes), nothing else the composed
//   chain kept (scores, the float noise, the dropped weights);
// - q, k, v are read in place whenever their last dim has unit stride (the MHA's
//   view(b, T, H, D).transpose(1, 2) views: row stride H*D); the output is written into a
//   (B, L, H, Ev) buffer and returned as its (B, H, L, Ev) view, so the MHA's
//   transpose(1, 2).contiguous() is free, and the q/k/v gradients come back in their inputs'
//   layout, so the transpose/view backward that follows copies nothing either.
//
// - attn_mask: turned once into an additive mask of q's dtype (bool: 0 / -inf) with
//   unit-stride rows, broadcast to (batch..., L, S) by strides only, and added to the
//   scores block by block;
// - grouped-query attention: key/value matrix b / G serves q matrix b (G = Hq / Hkv), read in
//   place; the backward sums a group's key/value gradients on one thread.
// The backward's other path (`composed_backward`), from recorded ops, runs when the engine
// records the backward (create_graph) or the float mask wants a gradient.
//
// Adding to it: extend attention_kernel::Params and its forward_head / backward_head and the
// composed backward, add gradcheck rows (tests/core/gradcheck_rows_attention.cpp) and an
// equivalence case against the composed ops (tests/core/test_attention.cpp).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels.h"
#include "sdpa_kernel.h"
#include "xgrad/autocast.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using kernels::Params;

// t itself when the kernel can read each of its matrices in place (unit-stride rows, at any
// row stride: the kernels only read them, so rows may overlap, as an expanded key's do), else
// an unrecorded contiguous copy.
Tensor row_readable(const Tensor& t) {
  if (t.size(-1) <= 1 || t.stride(-1) == 1) return t.detach();
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

// An uninitialised tensor of `shape` laid out in memory like a tensor with `strides` when that
// one is a dense permutation of a contiguous tensor with a unit-stride last dim (so the
// gradient of a transpose(1, 2) view comes back contiguous through TransposeBackward0 and
// ViewBackward0), else a contiguous one.
Tensor empty_in_layout(const Shape& shape, const Shape& strides, DType dtype) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<int64_t> perm(static_cast<std::size_t>(nd));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  Shape ps;
  for (int64_t d : perm) ps.push_back(shape[d]);
  const Shape cs = contiguous_strides(ps);
  bool dense = nd > 0 && perm.back() == nd - 1;
  for (int64_t i = 0; dense && i < nd; ++i) dense = ps[i] == 1 || strides[perm[i]] == cs[i];
  if (!dense) return empty(shape, dtype);
  Shape st(static_cast<std::size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) st[perm[i]] = cs[i];
  return make_view(empty(ps, dtype), shape, st, 0);
}

using Options = ScaledDotProductAttentionOptions;

// Checks the inputs; returns the group size G = Hq / Hkv (1 without enable_gqa).
int64_t check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Options& o) {
  if (!q.defined() || !k.defined() || !v.defined()) fail(kOp, "got an undefined tensor");
  auto shapes = [&] {
    return "query " + shape_str(q.shape()) + ", key " + shape_str(k.shape()) + ", value " +
           shape_str(v.shape());
  };
  if (!is_floating(q.dtype()) || q.dtype() != k.dtype() || q.dtype() != v.dtype())
    fail(kOp, "expected query, key and value of one float dtype (float32 or float64), got ",
         dtype_name(q.dtype()), ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()), " (", shapes(),
         ")");
  if (q.dim() < 2 || q.dim() != k.dim() || q.dim() != v.dim())
    fail(kOp,
         "expected query (..., L, E), key (..., S, E) and value (..., S, Ev) with the same "
         "number of dims (at least 2), got ",
         shapes());
  if (q.size(-1) != k.size(-1))
    fail(kOp, "query and key must have the same embedding size E (last dim), got ", shapes());
  if (k.size(-2) != v.size(-2))
    fail(kOp, "key and value must have the same sequence length S (dim -2), got ", shapes());
  const int64_t heads = q.dim() - 3;  // the heads' dim, -3 (none for 2-D inputs)
  const bool gqa = o.enable_gqa && heads >= 0;
  int64_t group = 1;
  if (gqa) {
    const int64_t hq = q.size(heads), hkv = k.size(heads);
    if (hkv != v.size(heads) || (hkv == 0 ? hq != 0 : hq % hkv != 0))
      fail(kOp,
           "enable_gqa: the query's heads (dim -3) must be a multiple of the key's, and key and "
           "value must have the same heads, got ",
           shapes());
    group = hkv == 0 ? 1 : hq / hkv;
  }
  for (int64_t d = 0; d < q.dim() - 2; ++d)
    if (!(gqa && d == heads) && (q.size(d) != k.size(d) || q.size(d) != v.size(d)))
      fail(kOp,
           "query, key and value must have the same batch dims (all but the last two; "
           "xgrad does not broadcast them",
           d == heads && !o.enable_gqa ? "; fewer key/value heads (dim -3) need enable_gqa" : "", "), got ",
           shapes());
  check_dropout_p(kOp, o.dropout_p);
  // the kernel gathers a block's dropout mask at 32-bit offsets l * S, lanes l < 16
  // (attention_kernel::KeepLanes); checked before anything of S is copied or allocated
  constexpr int64_t kMaxDropoutS = std::numeric_limits<int32_t>::max() / 15;
  if (o.dropout_p > 0.0 && k.size(-2) > kMaxDropoutS)
    fail(kOp, "with dropout the key sequence length S (dim -2) must be at most ", kMaxDropoutS, ", got ",
         shapes());
  if (const Tensor& m = o.attn_mask; m.defined()) {
    if (o.is_causal)
      fail(kOp,
           "an explicit attn_mask should not be set when is_causal is true (as torch; put the "
           "causal -inf into the mask), got attn_mask ",
           shape_str(m.shape()), " (", shapes(), ")");
    if (m.dtype() != kBool && m.dtype() != q.dtype())
      fail(kOp, "expected attn_mask of dtype bool or the query's ", dtype_name(q.dtype()), ", got ",
           dtype_name(m.dtype()), " (attn_mask ", shape_str(m.shape()), ", ", shapes(), ")");
    Shape ws(q.shape().begin(), q.shape().end() - 1);  // the weights (..., L, S)
    ws.push_back(k.size(-2));
    bool fits = m.dim() <= static_cast<int64_t>(ws.size());
    for (int64_t i = 1; fits && i <= m.dim(); ++i) fits = m.size(-i) == 1 || m.size(-i) == ws[ws.size() - i];
    if (!fits)
      fail(kOp, "attn_mask ", shape_str(m.shape()), " is not broadcastable to the attention weights' shape ",
           shape_str(ws), " (", shapes(), ")");
  }
  return group;
}

// The kernel's parameters for q (..., L, E), k (..., S, E), v (..., S, Ev).
Params attention_params(const Tensor& q, const Tensor& k, const Tensor& v, const Options& o, int64_t block) {
  Params P;
  P.L = q.size(-2);
  P.S = k.size(-2);
  P.E = q.size(-1);
  P.Ev = v.size(-1);
  P.scale = o.scale.value_or(1.0 / std::sqrt(static_cast<double>(P.E)));
  P.causal = o.is_causal;
  P.block = block;
  P.p = o.dropout_p;
  P.masked = o.attn_mask.defined();
  return P;
}

// The attention weights' shape (batch..., L, S).
Shape weights_shape(const Shape& batch, const Params& P) {
  Shape ws = batch;
  ws.push_back(P.L);
  ws.push_back(P.S);
  return ws;
}

// attn_mask as the kernel adds it: of dtype dt (bool: 0 where true, -inf where false),
// broadcast to ws (batch..., L, S) by strides, its rows of unit stride. A float mask with such
// rows is read in place; any other is copied once at its own size (but for its last dim,
// written out to S).
Tensor additive_mask(const Tensor& mask, const Shape& ws, DType dt) {
  const int64_t S = ws.back();
  if (mask.dtype() != kBool && mask.dim() >= 1 && mask.size(-1) == S && (S <= 1 || mask.stride(-1) == 1))
    return mask.detach().expand(ws);
  Shape own(ws.size() - static_cast<std::size_t>(mask.dim()), 1);  // leading dims of 1, then mask's
  own.insert(own.end(), mask.shape().begin(), mask.shape().end());
  own.back() = S;
  Tensor m = empty(own, dt);
  kernels::copy_into(m, mask.detach().expand(own));
  if (mask.dtype() == kBool)
    kernels::dispatch_float(dt, kOp, [&](auto tag) {
      using T = decltype(tag);
      T* x = m.data_ptr<T>();
      for (int64_t i = 0, n = m.numel(); i < n; ++i)
        x[i] = x[i] != T(0) ? T(0) : -std::numeric_limits<T>::infinity();
    });
  return m.expand(ws);
}

// out (batch..., L, Ev), stored (batch[:-1]..., L, batch[-1], Ev) when there are >= 2 batch
// dims: (B, H, L, Ev) over a (B, L, H, Ev) buffer, as torch's CPU flash attention returns it
Tensor empty_attention_out(const Shape& batch, const Params& P, DType dt) {
  Shape out_shape = batch;
  out_shape.push_back(P.L);
  out_shape.push_back(P.Ev);
  if (batch.size() < 2) return empty(out_shape, dt);
  Shape buf = out_shape;
  std::swap(buf[buf.size() - 3], buf[buf.size() - 2]);  // (..., H, L, Ev) -> (..., L, H, Ev)
  Shape st = contiguous_strides(buf);
  std::swap(st[st.size() - 3], st[st.size() - 2]);
  return make_view(empty(buf, dt), out_shape, st, 0);
}

// dropout()'s keep mask for nb (L, S) matrices: a contiguous byte mask (padded: the kernel
// reads its rows in whole vectors; p == 1 keeps nothing), undefined without dropout.
Tensor empty_keep_mask(const Params& P, int64_t nb, DType dt) {
  if (!P.dropout()) return Tensor();
  const int64_t LS = P.L * P.S;
  const int64_t pad =
      dt == kFloat64 ? attention_kernel::keep_padding<double>(P) : attention_kernel::keep_padding<float>(P);
  Tensor keep = empty({nb * LS + pad}, kBool);
  auto* bytes = static_cast<uint8_t*>(keep.raw_data_ptr());
  std::memset(bytes + nb * LS, 0, static_cast<std::size_t>(pad));
  if (P.p == 1.0) std::memset(bytes, 0, static_cast<std::size_t>(nb * LS));
  return keep;
}

// The gradients from recorded ops, so that they can be differentiated again (torch's math
// attention and its autograd): with the weights recomputed,
//   W = softmax(q k^T * scale + M) (causal: -inf above the diagonal; a row of -inf only: 0)
//   W' = W * keep / (1 - p);  dv = W'^T dO;  dW = (dO v^T) * keep / (1 - p)
//   dP = W * (dW - rowsum(dW * W));  dM = dP;  dq = (dP * scale) k;  dk = (dP * scale)^T q
// q, k, v, dO and M (bias: the additive mask, broadcastable to (batch..., L, S), or
// undefined) may carry a graph. keep: the dropout mask (batch..., L, S) or undefined.
// Grouped-query attention stacks a group's query rows, q (..., Hkv, G L, E) against k (...,
// Hkv, S, E): dk and dv then sum over the group, with no repeated keys. Returns dq, dk, dv and
// dM (batch..., L, S).
std::array<Tensor, 4> composed_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                        const Tensor& bias, const Tensor& keep, const Params& P,
                                        int64_t group) {
  const Shape ws = weights_shape(Shape(q.shape().begin(), q.shape().end() - 2), P);
  auto stack = [&](const Tensor& t) {  // (..., Hq, L, X) -> (..., Hkv, G L, X)
    if (group == 1) return t;
    Shape s = t.shape();
    s[s.size() - 3] /= group;
    s[s.size() - 2] *= group;
    return t.reshape(s);
  };
  const Tensor qg = stack(q), dog = stack(dout);
  Tensor scores = matmul(qg, k.transpose(-2, -1)) * P.scale;  // (..., Hkv, G L, S)
  if (P.causal) {                                             // rows r: query r % L
    const Tensor above = triu(ones({P.L, P.S}), 1).to(kBool);
    scores = masked_fill(
        scores, group == 1 ? above : above.expand({group, P.L, P.S}).reshape({group * P.L, P.S}), -INFINITY);
  }
  if (bias.defined()) scores = scores + (group == 1 ? bias : stack(bias.expand(ws)));
  Tensor w = softmax(scores, -1);
  if (P.masked) {  // rows whose every score is -inf weigh nothing
    Tensor dead;
    {
      NoGradGuard no_grad;
      dead = eq(amax(scores, -1, true), -INFINITY);
    }
    w = where(dead, 0.0, softmax(where(dead, 0.0, scores), -1));
  }
  Tensor wd = w, kf;  // W' and keep / (1 - p)
  if (keep.defined()) {
    kf = stack(keep.view(ws)).to(q.dtype()) * (P.p < 1.0 ? 1.0 / (1.0 - P.p) : 0.0);
    wd = w * kf;
  }
  Tensor dv = matmul(wd.transpose(-2, -1), dog);  // (..., Hkv, S, Ev)
  Tensor dw = matmul(dog, v.transpose(-2, -1));   // (..., Hkv, G L, S)
  if (kf.defined()) dw = dw * kf;
  Tensor dp = w * (dw - sum(dw * w, -1, true));
  Tensor ds = dp * P.scale;
  Tensor dq = matmul(ds, k);
  Tensor dk = matmul(ds.transpose(-2, -1), qg);
  return {group == 1 ? dq : dq.reshape(q.shape()), dk, dv, group == 1 ? dp : dp.reshape(ws)};
}

Tensor sdpa_impl(const Tensor& query, const Tensor& key, const Tensor& value, const Options& o,
                 int64_t block) {
  const int64_t group = check_inputs(query, key, value, o);
  if (block < 1) fail(kOp, "block size must be positive, got ", block);
  const Tensor q = row_readable(query), k = row_readable(key), v = row_readable(value);
  const Params P = attention_params(q, k, v, o, block);
  const Shape batch(q.shape().begin(), q.shape().end() - 2);
  const int64_t nb = numel_of(batch);
  const DType dt = q.dtype();
  const Tensor mask = P.masked ? additive_mask(o.attn_mask, weights_shape(batch, P), dt) : Tensor();
  Tensor out = empty_attention_out(batch, P, dt);
  const bool need_grad = GradMode::is_enabled() && any_requires_grad({query, key, value, o.attn_mask});
  const Tensor keep = empty_keep_mask(P, nb, dt);
  auto* bytes = keep.defined() ? static_cast<uint8_t*>(keep.raw_data_ptr()) : nullptr;
  kernels::DropoutDraws draws(o.generator ? *o.generator : default_generator(), bytes, nb, P.L * P.S,
                              o.dropout_p);
  Tensor weights;  // W: the softmax output, per matrix in the kernel's block layout (Blocks)
  Tensor lanes;    // the dropout mask as the backward reads it (lane masks, lane_mask_bytes a matrix)
  kernels::dispatch_float(dt, kOp, [&](auto tag) {
    using T = decltype(tag);
    if (need_grad) weights = empty({nb * attention_kernel::Blocks<T>(P).total()}, dt);
    if (need_grad && bytes) lanes = empty({nb * attention_kernel::lane_mask_bytes<T>(P)}, kBool);
    kernels::sdpa_forward<T>(P, nb, group, q, k, v, mask, out, bytes, draws, weights, lanes);
  });
  if (!need_grad) return out;

  // In the forward pass out = W' @ v with W' = drop(W) and W = softmax(q k^T * scale + M), so
  //   dv = W'^T @ dout;  dW' = dout @ v^T;  dW = drop(dW');
  //   dS = W * (dW - rowsum(dW * W)) * scale (softmax backward, then the scale);
  //   dq = dS @ k;  dk = dS^T @ q;  dM = dS / scale
  // fused (the saved W and dropout lane masks), or from recorded ops (composed_backward) when
  // the engine records this backward or the mask wants its gradient.
  const bool float_mask = P.masked && o.attn_mask.dtype() != kBool;
  return record("ScaledDotProductAttentionBackward0", out, {query, key, value, o.attn_mask},
                [sq = save(query), sk = save(key), sv = save(value),
                 sm = float_mask ? save(o.attn_mask) : SavedTensor(),
                 bool_mask = float_mask ? Tensor() : mask, weights, lanes, P, nb, group, dt,
                 ws = weights_shape(batch, P), shapes = std::array<Shape, 3>{q.shape(), k.shape(), v.shape()},
                 layouts = std::array<Shape, 3>{q.strides(), k.strides(), v.strides()}](const Tensor& grad,
                                                                                        Grads& grads) {
                  if (GradMode::is_enabled() || grads.wants(3)) {
                    Tensor keep;  // dropout()'s mask, back from the lane masks
                    if (lanes.defined()) {
                      keep = empty(ws, kBool);
                      kernels::dispatch_float(dt, kOp, [&](auto tag) {
                        kernels::unpack_keep<decltype(tag)>(P, nb,
                                                            static_cast<const uint8_t*>(lanes.raw_data_ptr()),
                                                            static_cast<uint8_t*>(keep.raw_data_ptr()));
                      });
                    }
                    const auto d = composed_backward(grad, sq.get(), sk.get(), sv.get(),
                                                     sm.defined() ? sm.get() : bool_mask, keep, P, group);
                    for (std::size_t i = 0; i < 3; ++i)
                      if (grads.wants(i)) grads.add(i, d[i]);
                    if (grads.wants(3)) grads.add(3, sum_to(d[3], sm.get().shape()));
                    return;
                  }
                  // each gradient is laid out like its input; q is read for dk, k for dq, v for both
                  const Tensor dout = row_readable(grad);
                  const Tensor q = grads.wants(1) ? row_readable(sq.get()) : Tensor();
                  const Tensor k = grads.wants(0) ? row_readable(sk.get()) : Tensor();
                  const Tensor v = grads.wants(0) || grads.wants(1) ? row_readable(sv.get()) : Tensor();
                  Tensor d[3];
                  for (std::size_t i = 0; i < 3; ++i)
                    if (grads.wants(i)) d[i] = empty_in_layout(shapes[i], layouts[i], dt);
                  kernels::dispatch_float(dt, "scaled_dot_product_attention_backward", [&](auto tag) {
                    kernels::sdpa_backward<decltype(tag)>(P, nb, group, q, k, v, dout, weights, lanes, d[0],
                                                          d[1], d[2]);
                  });
                  for (std::size_t i = 0; i < 3; ++i)
                    if (d[i].defined()) grads.add(i, d[i]);
                });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    double dropout_p, Flag is_causal, std::optional<double> scale,
                                    Generator* gen) {
  return scaled_dot_product_attention(
      query, key, value,
      Options{.dropout_p = dropout_p, .is_causal = is_causal, .scale = scale, .generator = gen});
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, Flag is_causal,
                                    std::optional<double> scale, Flag enable_gqa, Generator* gen) {
  return scaled_dot_product_attention(query, key, value,
                                      Options{.attn_mask = attn_mask,
                                              .dropout_p = dropout_p,
                                              .is_causal = is_causal,
                                              .scale = scale,
                                              .enable_gqa = enable_gqa,
                                              .generator = gen});
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const ScaledDotProductAttentionOptions& options) {
  if (autocast::wants_fp32(query, key, value, options.attn_mask)) {  // xgrad/autocast.h: runs in float32
    ScaledDotProductAttentionOptions o = options;
    o.attn_mask = autocast::to_fp32(o.attn_mask);
    return scaled_dot_product_attention(autocast::to_fp32(query), autocast::to_fp32(key),
                                        autocast::to_fp32(value), o);
  }
  profiler::RecordFunction rec("scaled_dot_product_attention");
  return sdpa_impl(query, key, value, options, attention_kernel::kDefaultBlock);
}

namespace detail {
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const ScaledDotProductAttentionOptions& options, int64_t block) {
  return sdpa_impl(query, key, value, options, block);
}
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            double dropout_p, bool is_causal, std::optional<double> scale,
                                            Generator* gen, int64_t block) {
  return sdpa_impl(query, key, value,
                   Options{.dropout_p = dropout_p, .is_causal = is_causal, .scale = scale, .generator = gen},
                   block);
}
}  // namespace detail

}  // namespace xgrad
