// core/src/ops/attention.cpp: scaled_dot_product_attention (F.scaled_dot_product_attention),
// the fused hot path of the GPT's attention, with its backward right below.
//
// It stands for the composed chain nn::MultiHeadAttention used to run
//   scores = q @ k^T;  scores.masked_fill_(causal, -inf);  w = softmax(scores * scale, -1)
//   w = dropout(w, p);  out = w @ v
// and computes it per (batch..., ) matrix in one kernel (ops/attention_kernel.h and
// attention_backward.h: blocks of query rows in the lanes of a vector, the products on register
// tiles, the softmax down the columns, the causal triangle's upper half skipped), the matrices
// split over xgrad's threads (each on one thread, so the same bits at any thread count):
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

#include "attention_backward.h"  // and attention_kernel.h
#include "kernels.h"
#include "xgrad/autograd.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
using attention_kernel::Params;

// Element offset of every batch entry of t (all dims but the last two), row-major order.
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nbd = t.dim() - 2;
  const Shape& size = t.shape();
  const Shape& stride = t.strides();
  int64_t nb = 1;
  for (int64_t d = 0; d < nbd; ++d) nb *= size[d];
  std::vector<int64_t> off(static_cast<std::size_t>(nb));
  Shape idx(static_cast<std::size_t>(nbd), 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < nb; ++i) {
    off[static_cast<std::size_t>(i)] = cur;
    for (int64_t d = nbd - 1; d >= 0; --d) {  // odometer over the batch dims
      cur += stride[d];
      if (++idx[d] < size[d]) break;
      cur -= stride[d] * size[d];
      idx[d] = 0;
    }
  }
  return off;
}

// t itself when the kernel can read each of its matrices in place (unit-stride rows that do
// not overlap), else an unrecorded contiguous copy.
Tensor row_readable(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  if ((cols <= 1 || t.stride(-1) == 1) && (rows <= 1 || t.stride(-2) >= cols)) return t.detach();
  Tensor c = empty(t.shape(), t.dtype());
  kernels::copy_into(c, t);
  return c;
}

int64_t row_stride(const Tensor& t) {
  return t.size(-2) <= 1 ? std::max<int64_t>(t.size(-1), 1) : t.stride(-2);
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

// Per operand: its data, its matrices' offsets and row stride (null / empty / 1 when not used),
// looked up once a call rather than once a matrix.
struct Operand {
  void* data = nullptr;
  std::vector<int64_t> off;
  int64_t ld = 1;
};
Operand operand(const Tensor& t) {
  return t.defined() ? Operand{t.raw_data_ptr(), batch_offsets(t), row_stride(t)} : Operand{};
}

// Matrix b of operand o (of element type T), or null when it is not used.
template <class T>
T* matrix(const Operand& o, int64_t b) {
  return o.data ? static_cast<T*>(o.data) + o.off[static_cast<std::size_t>(b)] : nullptr;
}

// Runs every matrix b in [0, nb) on xgrad's threads, each matrix whole on one thread (so its
// bits do not depend on the thread count): worker(each) sets up a thread's scratch and calls
// each(f), which runs f(b) for the matrices this thread takes -- in increasing order, the next
// one whenever it is free (an uneven machine keeps both threads busy; the dropout draws,
// sequential, overlap the other threads' work).
template <class Worker>
void for_each_matrix(int64_t nb, Worker&& worker) {
  std::atomic<int64_t> next{0};
  parallel_for(0, nb, 1, [&](int64_t, int64_t) {
    worker([&](auto&& f) {
      for (int64_t b = next.fetch_add(1); b < nb; b = next.fetch_add(1)) f(b);
    });
  });
}

// Scratch for one parallel_for chunk, 64-byte aligned: uninitialised, only the parts a kernel
// writes are read.
struct AlignedFree {
  void operator()(void* x) const { ::operator delete[](x, std::align_val_t(64)); }
};
template <class T>
std::unique_ptr<T[], AlignedFree> scratch(int64_t n) {
  return std::unique_ptr<T[], AlignedFree>(
      n > 0 ? static_cast<T*>(::operator new[](static_cast<std::size_t>(n) * sizeof(T), std::align_val_t(64)))
            : nullptr);
}

Tensor sdpa_impl(const Tensor& query, const Tensor& key, const Tensor& value, double dropout_p,
                 bool is_causal, std::optional<double> scale, Generator* gen, int64_t block) {
  check_inputs(query, key, value, dropout_p);
  if (block < 1) fail(kOp, "block size must be positive, got ", block);
  const Tensor q = row_readable(query), k = row_readable(key), v = row_readable(value);
  Params P;
  P.L = q.size(-2);
  P.S = k.size(-2);
  P.E = q.size(-1);
  P.Ev = v.size(-1);
  P.scale = scale.value_or(1.0 / std::sqrt(static_cast<double>(P.E)));
  P.causal = is_causal;
  P.block = block;
  P.p = dropout_p;
  const Shape batch(q.shape().begin(), q.shape().end() - 2);
  const int64_t nb = numel_of(batch), LS = P.L * P.S;
  const DType dt = q.dtype();

  // out (batch..., L, Ev), stored (batch[:-1]..., L, batch[-1], Ev) when there are >= 2 batch
  // dims: (B, H, L, Ev) over a (B, L, H, Ev) buffer, as torch's CPU flash attention returns it
  Shape out_shape = batch;
  out_shape.push_back(P.L);
  out_shape.push_back(P.Ev);
  Tensor out;
  if (batch.size() >= 2) {
    Shape buf = out_shape;
    std::swap(buf[buf.size() - 3], buf[buf.size() - 2]);  // (..., H, L, Ev) -> (..., L, H, Ev)
    Shape st = contiguous_strides(buf);
    std::swap(st[st.size() - 3], st[st.size() - 2]);
    out = make_view(empty(buf, dt), out_shape, st, 0);
  } else {
    out = empty(out_shape, dt);
  }
  const bool need_grad = GradMode::is_enabled() && any_requires_grad({query, key, value});
  // dropout()'s draws: bernoulli(1 - p) over a contiguous (..., L, S) byte mask (padded: the
  // kernel reads its rows in whole vectors), matrix by matrix in order as the threads reach
  // them -- the same stream as dropout()'s one call; p == 1 draws nothing (dropout()
  // multiplies by zeros then)
  Tensor keep;
  uint8_t* bytes = nullptr;
  if (P.dropout()) {
    const int64_t pad =
        dt == kFloat64 ? attention_kernel::keep_padding<double>(P) : attention_kernel::keep_padding<float>(P);
    keep = empty({nb * LS + pad}, kBool);
    bytes = static_cast<uint8_t*>(keep.raw_data_ptr());
    std::memset(bytes + nb * LS, 0, static_cast<std::size_t>(pad));
    if (dropout_p == 1.0) std::memset(bytes, 0, static_cast<std::size_t>(nb * LS));
  }
  Generator& g = gen ? *gen : default_generator();
  // masks [0, drawn) are drawn; one thread at a time (`drawing`) draws the next few, at least
  // ~32 KB per call, while a thread that needs them yields (a lock's sleep and wake-up would
  // cost more than a tiny matrix's draw)
  std::atomic<int64_t> drawn{dropout_p > 0.0 && dropout_p < 1.0 ? 0 : nb};
  std::atomic<bool> drawing{false};
  const int64_t per_call = std::max<int64_t>(1, 32768 / std::max<int64_t>(LS, 1));
  auto draw_masks_through = [&](int64_t b) {
    while (drawn.load(std::memory_order_acquire) <= b) {
      bool idle = false;
      if (!drawing.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
        std::this_thread::yield();
        continue;
      }
      struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag.store(false, std::memory_order_release); }
      } release{drawing};
      const int64_t d = drawn.load(std::memory_order_relaxed);
      if (d > b) break;
      const int64_t end = std::min(nb, std::max(b + 1, d + per_call));
      g.bernoulli(reinterpret_cast<bool*>(bytes + d * LS), (end - d) * LS, 1.0 - dropout_p);
      drawn.store(end, std::memory_order_release);
    }
  };
  Tensor weights;  // W: the softmax output, per matrix in the kernel's block layout (Blocks)
  Tensor lanes;    // the dropout mask as the backward reads it (lane masks, lane_mask_bytes a matrix)

  const Operand oq = operand(q), ok = operand(k), ov = operand(v), oo = operand(out);
  kernels::dispatch_float(dt, kOp, [&](auto tag) {
    using T = decltype(tag);
    const int64_t wsize = attention_kernel::Blocks<T>(P).total();  // one matrix's W
    if (need_grad) weights = empty({nb * wsize}, dt);
    T* pw = weights.defined() ? weights.data_ptr<T>() : nullptr;
    const int64_t lsize = attention_kernel::lane_mask_bytes<T>(P);
    if (need_grad && bytes) lanes = empty({nb * lsize}, kBool);
    auto* pl = lanes.defined() ? static_cast<uint8_t*>(lanes.raw_data_ptr()) : nullptr;
    // per matrix: out = drop(softmax(q @ k^T * scale, causal)) @ v, W kept for the backward
    for_each_matrix(nb, [&](auto&& each) {
      auto work = scratch<T>(attention_kernel::forward_scratch<T>(P));
      each([&](int64_t b) {
        draw_masks_through(b);
        attention_kernel::forward_head<T>(P, matrix<T>(oq, b), oq.ld, matrix<T>(ok, b), ok.ld,
                                          matrix<T>(ov, b), ov.ld, matrix<T>(oo, b), oo.ld,
                                          pw ? pw + b * wsize : nullptr, bytes ? bytes + b * LS : nullptr,
                                          pl ? pl + b * lsize : nullptr, work.get());
      });
    });
  });
  if (!need_grad) return out;

  // In the forward pass out = W' @ v with W' = drop(W) and W = softmax(q k^T * scale), so
  //   dv = W'^T @ dout;  dW' = dout @ v^T;  dW = drop(dW');
  //   dS = W * (dW - rowsum(dW * W)) * scale (softmax backward, then the scale);
  //   dq = dS @ k;  dk = dS^T @ q.
  return record(
      "ScaledDotProductAttentionBackward0", out, {query, key, value},
      [sq = key.requires_grad() ? save(q) : SavedTensor(),
       sk = query.requires_grad() ? save(k) : SavedTensor(),
       sv = query.requires_grad() || key.requires_grad() ? save(v) : SavedTensor(), weights, lanes, P, nb, dt,
       shapes = std::array<Shape, 3>{q.shape(), k.shape(), v.shape()},
       layouts = std::array<Shape, 3>{q.strides(), k.strides(), v.strides()}](const Tensor& grad,
                                                                              Grads& grads) {
        // each gradient is laid out like its input
        const Tensor dout = row_readable(grad);
        Tensor d[3];
        for (std::size_t i = 0; i < 3; ++i)
          if (grads.wants(i)) d[i] = empty_in_layout(shapes[i], layouts[i], dt);
        const Tensor q = sq.defined() ? sq.get() : Tensor();
        const Tensor k = sk.defined() ? sk.get() : Tensor();
        const Tensor v = sv.defined() ? sv.get() : Tensor();
        const Operand oq = operand(q), ok = operand(k), ov = operand(v), odo = operand(dout),
                      odq = operand(d[0]), odk = operand(d[1]), odv = operand(d[2]);
        kernels::dispatch_float(dt, "scaled_dot_product_attention_backward", [&](auto tag) {
          using T = decltype(tag);
          const int64_t wsize = attention_kernel::Blocks<T>(P).total();
          const T* pw = weights.data_ptr<T>();
          const int64_t lsize = attention_kernel::lane_mask_bytes<T>(P);
          const auto* pl = lanes.defined() ? static_cast<const uint8_t*>(lanes.raw_data_ptr()) : nullptr;
          for_each_matrix(nb, [&](auto&& each) {
            auto work = scratch<T>(attention_kernel::backward_scratch<T>(P));
            each([&](int64_t b) {
              attention_kernel::backward_head<T>(
                  P, matrix<T>(oq, b), oq.ld, matrix<T>(ok, b), ok.ld, matrix<T>(ov, b), ov.ld,
                  matrix<T>(odo, b), odo.ld, pw + b * wsize, pl ? pl + b * lsize : nullptr, matrix<T>(odq, b),
                  odq.ld, matrix<T>(odk, b), odk.ld, matrix<T>(odv, b), odv.ld, work.get());
            });
          });
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
