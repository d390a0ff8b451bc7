// core/src/ops/attention.cpp: scaled_dot_product_attention (F.scaled_dot_product_attention),
// the fused hot path of the GPT's attention, with its backward right below.
//
// It computes, fused, what this chain of composed ops computes
//   scores = q @ k^T;  scores.masked_fill_(causal, -inf);  w = softmax(scores * scale, -1)
//   w = dropout(w, p);  out = w @ v
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
// Adding to it (an attn_mask, say): extend attention_kernel::Params and its forward_head /
// backward_head, add gradcheck rows (tests/core/gradcheck_rows_attention.cpp) and an
// equivalence case against the composed ops (tests/core/test_attention.cpp).
#include <algorithm>
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
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using kernels::Params;

// t itself when the kernel can read each of its matrices in place (unit-stride rows that do
// not overlap), else an unrecorded contiguous copy.
Tensor row_readable(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if ((cols <= 1 || t.stride(-1) == 1) && (rows <= 1 || t.stride(-2) >= cols)) return t.detach();
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

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, double p) {
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
  for (int64_t d = 0; d < q.dim() - 2; ++d)
    if (q.size(d) != k.size(d) || q.size(d) != v.size(d))
      fail(kOp,
           "query, key and value must have the same batch dims (all but the last two; "
           "xgrad does not broadcast them), got ",
           shapes());
  check_dropout_p(kOp, p);
  // the kernel gathers a block's dropout mask at 32-bit offsets l * S, lanes l < 16
  // (attention_kernel::KeepLanes); checked before anything of S is copied or allocated
  constexpr int64_t kMaxDropoutS = std::numeric_limits<int32_t>::max() / 15;
  if (p > 0.0 && k.size(-2) > kMaxDropoutS)
    fail(kOp, "with dropout the key sequence length S (dim -2) must be at most ", kMaxDropoutS, ", got ",
         shapes());
}

// The kernel's parameters for q (..., L, E), k (..., S, E), v (..., S, Ev).
Params attention_params(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool is_causal,
                        std::optional<double> scale, int64_t block) {
  Params P;
  P.L = q.size(-2);
  P.S = k.size(-2);
  P.E = q.size(-1);
  P.Ev = v.size(-1);
  P.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(P.E)));
  P.causal = is_causal;
  P.block = block;
  P.p = dropout_p;
  return P;
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

Tensor sdpa_impl(const Tensor& query, const Tensor& key, const Tensor& value, double dropout_p,
                 bool is_causal, std::optional<double> scale, Generator* gen, int64_t block) {
  check_inputs(query, key, value, dropout_p);
  if (block < 1) fail(kOp, "block size must be positive, got ", block);
  const Tensor q = row_readable(query), k = row_readable(key), v = row_readable(value);
  const Params P = attention_params(q, k, v, dropout_p, is_causal, scale, block);
  const Shape batch(q.shape().begin(), q.shape().end() - 2);
  const int64_t nb = numel_of(batch);
  const DType dt = q.dtype();
  Tensor out = empty_attention_out(batch, P, dt);
  const bool need_grad = GradMode::is_enabled() && any_requires_grad({query, key, value});
  const Tensor keep = empty_keep_mask(P, nb, dt);
  auto* bytes = keep.defined() ? static_cast<uint8_t*>(keep.raw_data_ptr()) : nullptr;
  kernels::DropoutDraws draws(gen ? *gen : default_generator(), bytes, nb, P.L * P.S, dropout_p);
  Tensor weights;  // W: the softmax output, per matrix in the kernel's block layout (Blocks)
  Tensor lanes;    // the dropout mask as the backward reads it (lane masks, lane_mask_bytes a matrix)
  kernels::dispatch_float(dt, kOp, [&](auto tag) {
    using T = decltype(tag);
    if (need_grad) weights = empty({nb * attention_kernel::Blocks<T>(P).total()}, dt);
    if (need_grad && bytes) lanes = empty({nb * attention_kernel::lane_mask_bytes<T>(P)}, kBool);
    kernels::sdpa_forward<T>(P, nb, q, k, v, out, bytes, draws, weights, lanes);
  });
  if (!need_grad) return out;

  // In the forward pass out = W' @ v with W' = drop(W) and W = softmax(q k^T * scale), so
  //   dv = W'^T @ dout;  dW' = dout @ v^T;  dW = drop(dW');
  //   dS = W * (dW - rowsum(dW * W)) * scale (softmax backward, then the scale);
  //   dq = dS @ k;  dk = dS^T @ q.
  return record("ScaledDotProductAttentionBackward0", out, {query, key, value},
                [sq = key.requires_grad() ? save(q) : SavedTensor(),
                 sk = query.requires_grad() ? save(k) : SavedTensor(),
                 sv = query.requires_grad() || key.requires_grad() ? save(v) : SavedTensor(), weights, lanes,
                 P, nb, dt, shapes = std::array<Shape, 3>{q.shape(), k.shape(), v.shape()},
                 layouts = std::array<Shape, 3>{q.strides(), k.strides(), v.strides()}](const Tensor& grad,
                                                                                        Grads& grads) {
                  // each gradient is laid out like its input
                  const Tensor dout = row_readable(grad);
                  Tensor d[3];
                  for (std::size_t i = 0; i < 3; ++i)
                    if (grads.wants(i)) d[i] = empty_in_layout(shapes[i], layouts[i], dt);
                  kernels::dispatch_float(dt, "scaled_dot_product_attention_backward", [&](auto tag) {
                    kernels::sdpa_backward<decltype(tag)>(
                        P, nb, sq.defined() ? sq.get() : Tensor(), sk.defined() ? sk.get() : Tensor(),
                        sv.defined() ? sv.get() : Tensor(), dout, weights, lanes, d[0], d[1], d[2]);
                  });
                  for (std::size_t i = 0; i < 3; ++i)
                    if (d[i].defined()) grads.add(i, d[i]);
                });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    double dropout_p, Flag is_causal, std::optional<double> scale,
                                    Generator* gen) {
  profiler::RecordFunction rec("scaled_dot_product_attention");
  return sdpa_impl(query, key, value, dropout_p, is_causal, scale, gen, attention_kernel::kDefaultBlock);
}

namespace detail {
Tensor scaled_dot_product_attention_blocked(const Tensor& query, const Tensor& key, const Tensor& value,
                                            double dropout_p, bool is_causal, std::optional<double> scale,
                                            Generator* gen, int64_t block) {
  return sdpa_impl(query, key, value, dropout_p, is_causal, scale, gen, block);
}
}  // namespace detail

}  // namespace xgrad
