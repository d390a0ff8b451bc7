// core/src/kernels/attention_backward.h (private): the backward of attention_kernel.h's one (L, S)
// attention matrix, on one thread (the formulas, the Blocks layout of W and the lane masks are
// described at the top of attention_kernel.h):
//   dW' = dO v^T and dq = dS k per block of query rows, as the forward's products;
//   the softmax backward down the columns of each block (`softmax_backward_lanes`);
//   dk = dS^T q and dv = W'^T dO by tiles of keys over all the blocks that see them
//   (`keys_product`), with dS^T and W'^T of every block kept in the lane layout.
#pragma once
#include "attention_kernel.h"

namespace xgrad::attention_kernel {

// C (MR x NV W) = sum over the blocks b >= b0 and their rows l < rows(b) of
// A_b(r, l) B(b R + l, :), with A_b(r, l) = a[offset(b) + r * W + l] (a: every block's (n, W)
// array, from the tile's first key on) and B's row i at bm + i * ldb: a tile of dk = dS^T q or
// dv = W'^T dO. Each element is one FMA chain in i order.
template <class T, int64_t MR, int64_t NV>
inline void blocks_tile(const Blocks<T>& bl, int64_t b0, const T* a, const T* bm, int64_t ldb, T* c,
                        int64_t ldc) {
  constexpr int64_t W = kW<T>;
  V<T> acc[MR][NV];
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = V<T>(T(0));
  int64_t off = bl.offset(b0);
  for (int64_t b = b0; b < bl.count(); ++b) {
    const T* ab = a + off;
    const T* bb = bm + b * bl.R * ldb;
    for (int64_t l = 0, rows = bl.rows(b); l < rows; ++l) {
      V<T> bv[NV];
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) bv[v] = V<T>::load_unaligned(bb + l * ldb + v * W);
#pragma GCC unroll 16
      for (int64_t r = 0; r < MR; ++r) {
        const V<T> ar(ab[r * W + l]);
#pragma GCC unroll 4
        for (int64_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(ar, bv[v], acc[r][v]);
      }
    }
    off += bl.keys(b) * W;
  }
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) acc[r][v].store_unaligned(c + r * ldc + v * W);
}

// blocks_tile with exactly mr rows (1 <= mr <= R)
template <class T, int64_t NV, int64_t R>
inline void blocks_tile_rows(int64_t mr, const Blocks<T>& bl, int64_t b0, const T* a, const T* bm,
                             int64_t ldb, T* c, int64_t ldc) {
  if constexpr (R > 1) {
    if (mr < R) return blocks_tile_rows<T, NV, R - 1>(mr, bl, b0, a, bm, ldb, c, ldc);
  }
  blocks_tile<T, R, NV>(bl, b0, a, bm, ldb, c, ldc);
}

// Rows [j0, j1) of C (S, m) = A^T B for the per-block arrays a (dS^T or W'^T) and the rows
// bm (q or dO, padded to whole vectors, row stride ldb), from block b0 on: by tiles of
// kRowAcc / NV keys and NV vectors of columns (through a local tile where C's row ends
// inside a vector).
template <class T>
void blocks_product(const Blocks<T>& bl, int64_t j0, int64_t j1, int64_t b0, const T* a, const T* bm,
                    int64_t ldb, int64_t m, T* c, int64_t ldc) {
  constexpr int64_t W = kW<T>;
  for (int64_t e0 = 0; e0 < m;) {
    const int64_t left = (m - e0 + W - 1) / W;  // vectors
    const int64_t nv = left >= 4 ? 4 : left >= 2 ? 2 : 1, mr_max = std::min<int64_t>(kRowAcc / nv, 16);
    const bool direct = e0 + nv * W <= m;
    const int64_t step = even_tiles(j1 - j0, mr_max);
    for (int64_t jt = j0; jt < j1; jt += step) {
      const int64_t mr = std::min(step, j1 - jt);
      alignas(64) T tmp[kRowAcc * W];
      T* cc = direct ? c + jt * ldc + e0 : tmp;
      const int64_t ldcc = direct ? ldc : nv * W;
      const T* at = a + jt * W;
      if (nv == 4) blocks_tile_rows<T, 4, kRowAcc / 4>(mr, bl, b0, at, bm + e0, ldb, cc, ldcc);
      else if (nv == 2) blocks_tile_rows<T, 2, kRowAcc / 2>(mr, bl, b0, at, bm + e0, ldb, cc, ldcc);
      else blocks_tile_rows<T, 1, std::min<int64_t>(kRowAcc, 16)>(mr, bl, b0, at, bm + e0, ldb, cc, ldcc);
      if (!direct)
        for (int64_t r = 0; r < mr; ++r)
          std::copy(tmp + r * ldcc, tmp + r * ldcc + (m - e0), c + (jt + r) * ldc + e0);
    }
    e0 += nv * W;
  }
}

// C (S, m) = A^T B over all blocks (dk or dv): key chunks of R rows, each from the first block
// that sees it; keys no row sees get zeros.
template <class T>
void keys_product(const Blocks<T>& bl, const T* a, const T* bm, int64_t ldb, int64_t m, T* c, int64_t ldc) {
  const int64_t seen = bl.count() > 0 ? bl.keys(bl.count() - 1) : 0;  // keys [0, seen) are seen
  for (int64_t j0 = 0; j0 < seen; j0 += bl.R)
    blocks_product(bl, j0, std::min(j0 + bl.R, seen), bl.P.causal ? j0 / bl.R : 0, a, bm, ldb, m, c, ldc);
  for (int64_t j = seen; j < bl.P.S; ++j) std::fill(c + j * ldc, c + j * ldc + m, T(0));
}

// Softmax backward down the columns of a block: w (n, W) its W; ds (n, W) holds dW'^T and
// becomes dS^T (null: dq, dk not wanted); with wd (dropout, dv wanted) also W'^T.
template <class T>
void softmax_backward_lanes(const Params& p, int64_t n, const T* w, const KeepLanes<T>* keep, T* ds, T* wd) {
  constexpr int64_t W = kW<T>;
  const V<T> vks(p.p < 1.0 ? T(1) / static_cast<T>(1.0 - p.p) : T(0)), vscale(static_cast<T>(p.scale));
  uint32_t m[4] = {};
  // dW = dW' * mask / (1 - p) in place, W' = W * mask / (1 - p); returns dW * W
  auto step = [&](int64_t j, int64_t t) {
    const V<T> x = V<T>::load_unaligned(w + j * W);
    const V<T> kf = keep ? KeepLanes<T>::factors(m[t], vks) : V<T>(T(1));
    if (wd) (x * kf).store_unaligned(wd + j * W);
    if (!ds) return x;
    V<T> d = V<T>::load_unaligned(ds + j * W);
    if (keep) {
      d = d * kf;
      d.store_unaligned(ds + j * W);
    }
    return d * x;
  };
  V<T> s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));  // rowsum(dW * W), in four chains
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    if (keep) keep->get4(j, m);
    s0 += step(j, 0);
    s1 += step(j + 1, 1);
    s2 += step(j + 2, 2);
    s3 += step(j + 3, 3);
  }
  if (j < n && keep) keep->get4(j, m);
  for (int64_t t = 0; j < n; ++j, ++t) s0 += step(j, t);
  if (!ds) return;
  const V<T> r = (s0 + s1) + (s2 + s3);
  for (int64_t j = 0; j < n; ++j)  // dS = W * (dW - rowsum) * scale
    (V<T>::load_unaligned(w + j * W) * (V<T>::load_unaligned(ds + j * W) - r) * vscale)
        .store_unaligned(ds + j * W);
}

// Scratch backward_head needs: dO_block^T, a dq^T tile, dS^T and W'^T of every block, q and dO
// rows padded to whole vectors, v^T.
template <class T>
int64_t backward_scratch(const Params& p) {
  const Blocks<T> bl(p);
  return (round_up(p.Ev, 16) + kLaneTile + round_up(p.S, 16)) * kW<T> + 2 * bl.total() +
         p.L * round_up(p.E, kW<T>) + p.L * round_up(p.Ev, kW<T>) + p.Ev * round_up(p.S, 16);
}

// The gradients of one matrix (dq, dk, dv null when not wanted; q, k, v null when not needed:
// k for dq, q for dk, v for dq and dk); w: the forward's W (Blocks layout), lanes: its dropout
// lane masks (null: no dropout). See the top of the file for the formulas.
template <class T>
void backward_head(const Params& p, const T* q, int64_t ldq, const T* k, int64_t ldk, const T* v, int64_t ldv,
                   const T* dout, int64_t lddo, const T* w, const uint8_t* lanes, T* dq, int64_t lddq, T* dk,
                   int64_t lddk, T* dv, int64_t lddv, T* scratch) {
  constexpr int64_t W = kW<T>;
  const Blocks<T> bl(p);
  const bool want_s = dq || dk, dropped = lanes && dv;  // dv needs W' materialised
  T* dot = scratch;                                     // dO_block^T (Ev, W)
  T* ot = dot + round_up(p.Ev, 16) * W;                 // a dq^T tile (kLaneTile, W)
  T* ds = ot + kLaneTile * W;                           // dW'^T, then dS^T, every block
  T* wd = ds + bl.total();                              // W'^T, every block
  T* qp = wd + bl.total();                              // q rows (L, Ep)
  T* dop = qp + p.L * round_up(p.E, W);                 // dO rows (L, Evp)
  T* vt = dop + p.L * round_up(p.Ev, W);                // v^T (Ev, Sq)
  const int64_t Sq = round_up(p.S, 16);
  T* sr = vt + p.Ev * Sq;  // the block's dW' in rows (W, Sq)
  if (want_s) pack_transposed(v, ldv, p.S, p.Ev, vt, Sq);
  for (int64_t b = 0, off = 0; b < bl.count(); ++b) {
    const int64_t i0 = b * bl.R, rows = bl.rows(b), n = bl.keys(b);
    if (want_s) {  // dW'^T = v dO^T
      if (p.Ev >= 2 * W) {
        rows_form<T, false>(rows, n, p.Ev, dout + i0 * lddo, lddo, vt, Sq, T(1), sr, Sq);
        pack_lanes(sr, Sq, rows, n, ds + off);
      } else {
        pack_lanes(dout + i0 * lddo, lddo, rows, p.Ev, dot);
        rows_product(n, p.Ev, vt, Sq, dot, T(1), ds + off);
      }
    }
    const KeepLanes<T> kl = KeepLanes<T>::saved(lanes ? lanes + 2 * off / W : nullptr);
    softmax_backward_lanes(p, n, w + off, lanes ? &kl : nullptr, want_s ? ds + off : nullptr,
                           dropped ? wd + off : nullptr);
    if (dq && p.E % W == 0)  // dq = dS k
      rows_form<T, true>(rows, p.E, n, ds + off, W, k, ldk, T(1), dq + i0 * lddq, lddq);
    else if (dq) lanes_product(p.E, n, k, ldk, ds + off, ot, rows, dq + i0 * lddq, lddq);
    off += n * W;
  }
  if (dk) {  // dk = dS^T q
    const auto [qb, ldqb] = b_rows(q, ldq, p.L, p.E, qp);
    keys_product(bl, ds, qb, ldqb, p.E, dk, lddk);
  }
  if (dv) {  // dv = W'^T dO
    const auto [dob, lddob] = b_rows(dout, lddo, p.L, p.Ev, dop);
    keys_product(bl, dropped ? wd : w, dob, lddob, p.Ev, dv, lddv);
  }
}

}  // namespace xgrad::attention_kernel
