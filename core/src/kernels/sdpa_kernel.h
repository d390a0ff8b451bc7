// core/src/kernels/sdpa_kernel.h (private, the kernel floor): the forward/backward kernel
// pair of scaled_dot_product_attention (core/src/ops/attention.cpp) over every (batch..., )
// matrix of q (..., L, E), k (..., S, E), v (..., S, Ev): attention_kernel.h's forward_head
// and attention_backward.h's backward_head, the matrices split over xgrad's threads (each
// whole on one thread, so the same bits at any thread count), and dropout()'s mask drawn
// matrix by matrix, in order, as the threads reach them.
//
// Grouped-query attention: k and v may have fewer matrices than q, nb / group each; q's
// matrix b reads k's and v's matrix b / group (the heads of a group are adjacent in q's batch
// order). The backward runs a group's q matrices on one thread, in order, summing their dk and
// dv, so the sums' order, too, does not depend on the thread count.
//
// Every operand's matrices have unit-stride rows that do not overlap (any row stride, any
// batch strides): the op copies an operand that does not.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "attention_backward.h"  // and attention_kernel.h
#include "kernels.h"
#include "xgrad/parallel.h"
#include "xgrad/random.h"

namespace xgrad::kernels {

using attention_kernel::Params;

// Element offset of every batch entry of t (all dims but the last two), row-major order.
inline std::vector<int64_t> batch_offsets(const Tensor& t) {
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

// Distance between a matrix's rows (its row count <= 1: any, taken as the row length).
inline int64_t row_stride(const Tensor& t) {
  return t.size(-2) <= 1 ? std::max<int64_t>(t.size(-1), 1) : t.stride(-2);
}

// Per operand: its data, its matrices' offsets and row stride (null / empty / 1 when not used),
// looked up once a call rather than once a matrix.
struct Operand {
  void* data = nullptr;
  std::vector<int64_t> off;
  int64_t ld = 1;
};
inline Operand operand(const Tensor& t) {
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

// dropout()'s draws for sdpa_forward: bernoulli(1 - p) into the bytes of a contiguous
// (nb, L, S) mask, matrix by matrix in order as the threads reach them -- the same stream as
// dropout()'s one call. Masks [0, drawn) are drawn; one thread at a time (`drawing`) draws the
// next few, at least ~32 KB per call, while a thread that needs them yields (a lock's sleep and
// wake-up would cost more than a tiny matrix's draw). No bytes, or p == 1: nothing to draw.
class DropoutDraws {
 public:
  DropoutDraws(Generator& gen, uint8_t* bytes, int64_t nb, int64_t LS, double p)
      : gen_(gen),
        bytes_(bytes),
        nb_(nb),
        LS_(LS),
        p_(p),
        per_call_(std::max<int64_t>(1, 32768 / std::max<int64_t>(LS, 1))),
        drawn_(bytes && p > 0.0 && p < 1.0 ? 0 : nb) {}

  // Returns once the masks of matrices [0, b] are drawn.
  void through(int64_t b) {
    while (drawn_.load(std::memory_order_acquire) <= b) {
      bool idle = false;
      if (!drawing_.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
        std::this_thread::yield();
        continue;
      }
      struct Release {
        std::atomic<bool>& flag;
        ~Release() { flag.store(false, std::memory_order_release); }
      } release{drawing_};
      const int64_t d = drawn_.load(std::memory_order_relaxed);
      if (d > b) break;
      const int64_t end = std::min(nb_, std::max(b + 1, d + per_call_));
      gen_.bernoulli(reinterpret_cast<bool*>(bytes_ + d * LS_), (end - d) * LS_, 1.0 - p_);
      drawn_.store(end, std::memory_order_release);
    }
  }

 private:
  Generator& gen_;
  uint8_t* bytes_;
  const int64_t nb_, LS_;
  const double p_;
  const int64_t per_call_;
  std::atomic<int64_t> drawn_;
  std::atomic<bool> drawing_{false};
};

// out = drop(softmax(q @ k^T * scale + mask, causal)) @ v per matrix, for the nb matrices of
// q, mask and out and nb / group of k and v (T = float or double, every operand of that
// dtype). mask: the additive mask as nb (L, S) matrices (any batch and row strides, 0 for
// broadcast dims; unit-stride rows), undefined when !P.masked. keep: the (nb * L * S +
// padding) byte mask (null without dropout), drawn by `draws`. weights / lanes: when defined,
// the softmax output W and the mask as the backward reads them (Blocks<T>(P).total() and
// lane_mask_bytes<T>(P) a matrix).
template <class T>
void sdpa_forward(const Params& P, int64_t nb, int64_t group, const Tensor& q, const Tensor& k,
                  const Tensor& v, const Tensor& mask, const Tensor& out, uint8_t* keep, DropoutDraws& draws,
                  const Tensor& weights, const Tensor& lanes) {
  const int64_t LS = P.L * P.S;
  const Operand oq = operand(q), ok = operand(k), ov = operand(v), om = operand(mask), oo = operand(out);
  const int64_t wsize = attention_kernel::Blocks<T>(P).total();  // one matrix's W
  T* pw = weights.defined() ? weights.data_ptr<T>() : nullptr;
  const int64_t lsize = attention_kernel::lane_mask_bytes<T>(P);
  auto* pl = lanes.defined() ? static_cast<uint8_t*>(lanes.raw_data_ptr()) : nullptr;
  for_each_matrix(nb, [&](auto&& each) {
    auto work = scratch<T>(attention_kernel::forward_scratch<T>(P));
    each([&](int64_t b) {
      draws.through(b);
      attention_kernel::forward_head<T>(
          P, matrix<T>(oq, b), oq.ld, matrix<T>(ok, b / group), ok.ld, matrix<T>(ov, b / group), ov.ld,
          matrix<T>(om, b), om.ld, matrix<T>(oo, b), oo.ld, pw ? pw + b * wsize : nullptr,
          keep ? keep + b * LS : nullptr, pl ? pl + b * lsize : nullptr, work.get());
    });
  });
}

// The backward of sdpa_forward from its saved W (weights) and mask (lanes, undefined without
// dropout):
//   dv = W'^T @ dout;  dW' = dout @ v^T;  dW = drop(dW');
//   dS = W * (dW - rowsum(dW * W)) * scale;  dq = dS @ k;  dk = dS^T @ q
// into the defined ones of dq, dk, dv (q, k, v may be undefined where no gradient needs them);
// dk and dv of a key/value matrix sum over its group of q matrices.
template <class T>
void sdpa_backward(const Params& P, int64_t nb, int64_t group, const Tensor& q, const Tensor& k,
                   const Tensor& v, const Tensor& dout, const Tensor& weights, const Tensor& lanes,
                   const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Operand oq = operand(q), ok = operand(k), ov = operand(v), odo = operand(dout), odq = operand(dq),
                odk = operand(dk), odv = operand(dv);
  const int64_t wsize = attention_kernel::Blocks<T>(P).total();
  const T* pw = weights.data_ptr<T>();
  const int64_t lsize = attention_kernel::lane_mask_bytes<T>(P);
  const auto* pl = lanes.defined() ? static_cast<const uint8_t*>(lanes.raw_data_ptr()) : nullptr;
  // a group's second and later q matrices write dk and dv here, then add them in
  const int64_t extra = group > 1 ? P.S * (P.E + P.Ev) : 0;
  for_each_matrix(nb / group, [&](auto&& each) {
    auto work = scratch<T>(attention_kernel::backward_scratch<T>(P) + extra);
    T* tk = work.get() + attention_kernel::backward_scratch<T>(P);
    T* tv = tk + P.S * P.E;
    each([&](int64_t c) {
      T* dkc = matrix<T>(odk, c);
      T* dvc = matrix<T>(odv, c);
      for (int64_t b = c * group; b < (c + 1) * group; ++b) {
        const bool first = b == c * group;
        attention_kernel::backward_head<T>(P, matrix<T>(oq, b), oq.ld, matrix<T>(ok, c), ok.ld,
                                           matrix<T>(ov, c), ov.ld, matrix<T>(odo, b), odo.ld, pw + b * wsize,
                                           pl ? pl + b * lsize : nullptr, matrix<T>(odq, b), odq.ld,
                                           dkc && !first ? tk : dkc, first ? odk.ld : P.E,
                                           dvc && !first ? tv : dvc, first ? odv.ld : P.Ev, work.get());
        if (first) continue;
        for (int64_t j = 0; j < P.S; ++j) {  // dk += this head's, dv += this head's
          if (dkc)
            for (int64_t e = 0; e < P.E; ++e) dkc[j * odk.ld + e] += tk[j * P.E + e];
          if (dvc)
            for (int64_t e = 0; e < P.Ev; ++e) dvc[j * odv.ld + e] += tv[j * P.Ev + e];
        }
      }
    });
  });
}

// The dropout keep mask of nb matrices, one byte a weight ((nb, L, S), contiguous), from the
// lane masks sdpa_forward saved (lanes): the weights a causal block does not compute get 0.
template <class T>
void unpack_keep(const Params& P, int64_t nb, const uint8_t* lanes, uint8_t* keep) {
  const attention_kernel::Blocks<T> bl(P);
  const int64_t lsize = attention_kernel::lane_mask_bytes<T>(P), W = attention_kernel::kW<T>;
  std::memset(keep, 0, static_cast<std::size_t>(nb * P.L * P.S));
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t blk = 0, off = 0; blk < bl.count(); ++blk) {
      const uint8_t* m = lanes + b * lsize + 2 * off / W;
      for (int64_t j = 0; j < bl.keys(blk); ++j) {
        uint16_t bits;
        std::memcpy(&bits, m + 2 * j, sizeof(bits));
        for (int64_t l = 0; l < bl.rows(blk); ++l)
          keep[(b * P.L + blk * bl.R + l) * P.S + j] = (bits >> l) & 1;
      }
      off += bl.keys(blk) * W;
    }
}

}  // namespace xgrad::kernels
