// xgrad/autocast.h: automatic mixed precision on the CPU (torch.autocast("cpu",
// dtype=torch.bfloat16)).
//
//   {
//     xgrad::autocast guard(kBFloat16);  // with torch.autocast("cpu", dtype=torch.bfloat16):
//     Tensor loss = cross_entropy(model.forward(x).flatten(0, 1), y.flatten());
//   }
//   loss.backward();  // parameters stay float32 and get float32 gradients
//
// Inside an enabled region every op runs in the dtype its policy says (torch 1.13's CPU lists,
// aten/src/ATen/autocast_mode.cpp, as the torch 1.13 that makes tests/fixtures/autocast.txt
// runs them):
//   lower precision  linear, matmul (and einsum, which is matmul underneath): their float32
//                    inputs are cast to bfloat16 and the op runs in bfloat16 (torch's mm, bmm,
//                    addmm, baddbmm, linear; conv has no xgrad op yet).
//   float32          cross_entropy, cross_entropy_last_dim, mse_loss: bfloat16 inputs are cast
//                    to float32. scaled_dot_product_attention too: torch 1.13 has no sdpa and
//                    torch 2.x puts it on the lower list, but xgrad's fused attention kernel
//                    computes in float32 only, so its bfloat16 inputs (the outputs of the q/k/v
//                    projections) are cast up; it moves to the lower list when the kernel takes
//                    bfloat16.
//   everything else  runs in its inputs' dtype, with type promotion where inputs differ
//                    (layer_norm, softmax, log_softmax, gelu, dropout, add, ... are on neither
//                    torch 1.13 CPU list: a bfloat16 input gives a bfloat16 output).
// float64 tensors are never cast (torch: not eligible). The casts are Tensor::to(), recorded
// like any op, so the gradient flows back through them and reaches a float32 parameter in
// float32.
//
// Weight cast cache (torch's cached_cast): within a region, the bfloat16 cast of a float32 leaf
// that requires grad and is not a view (a parameter) is made once and reused by every op that
// lowers it, so a weight used T times per step is converted once. The cache is per thread and
// cleared when the outermost guard exits (enabled or not, as torch's nesting count). Two
// choices differ from torch 1.13, both to keep a cached cast correct: the cast is always made
// with grad mode on, so a first use under NoGradGuard does not leave a cast without a gradient
// path that later uses would pick up (pytorch#112583, fixed the same way in pytorch#165068);
// and an entry is dropped when its source was written in place since (its storage version).
//
// Guards nest: each restores the enabled flag, dtype and cache flag it found, and
// autocast(kBFloat16, /*enabled=*/false) turns autocasting off inside an enabled region.
// The state is thread-local: threads started inside a region (parallel_for's workers) see it
// disabled, as torch's; the ops read it only on the calling thread.
//
// Adding an op to a list: one line at the top of the op, before its checks, e.g.
//   if (autocast::wants_lower(x, w, b)) return std::apply(linear, autocast::lower(x, w, b));
//   if (autocast::wants_fp32(input, target)) return std::apply(mse_loss, autocast::to_fp32(input, target));
// The re-call sees no eligible input left to cast (wants_* is false), so it does not recurse;
// and the cast itself (Tensor::to) is on no list. An op on the float32 list whose kernel widens
// bfloat16 itself (cross_entropy) asks wants_fp32 only for its output's dtype.
#pragma once
#include <cstddef>
#include <tuple>

#include "xgrad/dtype.h"
#include "xgrad/tensor.h"

namespace xgrad {

class autocast {
 public:
  // torch.autocast("cpu", dtype, enabled, cache_enabled). The CPU's lower-precision dtype is
  // bfloat16 only (torch 1.13 warns and disables for others; xgrad throws naming the dtype).
  explicit autocast(DType dtype = kBFloat16, bool enabled = true, bool cache_enabled = true);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

  static bool is_enabled();         // torch.is_autocast_cpu_enabled()
  static DType get_dtype();         // torch.get_autocast_cpu_dtype()
  static bool is_cache_enabled();   // torch.is_autocast_cache_enabled()
  static void clear_cache();        // torch.clear_autocast_cache()
  static std::size_t cache_size();  // cached casts on this thread

  // The lower-precision policy: whether autocast is on and some input is a float32 tensor
  // (undefined tensors and other dtypes are ignored), and each input cast to the autocast dtype
  // (through the weight cache where it applies); inputs that are not float32 come back as they are.
  template <class... Ts>
  static bool wants_lower(const Ts&... ts) {
    return is_enabled() && (lowers(ts) || ...);
  }
  static Tensor lower(const Tensor& t);
  template <class... Ts>
  requires(sizeof...(Ts) > 1) static auto lower(const Ts&... ts) { return std::tuple{lower(ts)...}; }

  // The float32 policy: whether autocast is on and some input is a bfloat16 tensor, and each
  // bfloat16 input cast to float32 (never cached: activations change every step).
  template <class... Ts>
  static bool wants_fp32(const Ts&... ts) {
    return is_enabled() && (raises(ts) || ...);
  }
  static Tensor to_fp32(const Tensor& t);
  template <class... Ts>
  requires(sizeof...(Ts) > 1) static auto to_fp32(const Ts&... ts) { return std::tuple{to_fp32(ts)...}; }

 private:
  static bool lowers(const Tensor& t) { return t.defined() && t.dtype() == kFloat32; }
  static bool raises(const Tensor& t) { return t.defined() && t.dtype() == kBFloat16; }

  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace xgrad
