// xgrad/parallel.h: xgrad's one threading layer (torch.set_num_threads / at::parallel_for).
//
// xgrad runs one small thread pool of its own for every kernel, its GEMM included.
// Kernels parallelise with parallel_for; a parallel_for inside another one runs serially on
// the calling thread.
#pragma once
#include <cstdint>
#include <functional>

namespace xgrad {

// Threads xgrad uses for its kernels, including the calling thread (torch.set_num_threads).
// n >= 1, else xgrad::Error. The default is the machine's core count, or XGRAD_NUM_THREADS /
// OMP_NUM_THREADS when set.
void set_num_threads(int n);
int get_num_threads();

// Calls fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end), each at least
// grain_size long (except possibly the last), on up to get_num_threads() threads, and returns
// when all are done. The first exception thrown by fn is rethrown here. With one thread, a
// range shorter than 2 * grain_size, or when already inside a parallel_for, it is one call
// fn(begin, end) on the calling thread.
void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn);

// True on a thread that is running a parallel_for chunk.
bool in_parallel_region();

// ---- element loops (what core's kernels and the optimizers' fused updates use)
// Elements per chunk below which a memory-bound loop stays on one thread (a loop needs
// 2 * kParallelGrain elements to split at all).
inline constexpr int64_t kParallelGrain = 32768;
// Chunk boundaries of parallel_elems fall on multiples of this many elements, so SIMD loops
// split over threads take the same batch / scalar-tail path per element as one serial loop:
// the results do not depend on the thread count.
inline constexpr int64_t kParallelAlign = 64;

// Whether a loop over `elems` elements with this grain would run on more than one thread.
inline bool would_split(int64_t elems, int64_t grain) {
  return elems >= 2 * grain && get_num_threads() > 1 && !in_parallel_region();
}

// fn(lo, hi) over chunks covering [0, n), in parallel when n >= 2 * grain; every boundary but
// n is a multiple of kParallelAlign. Small n: one direct call, no pool overhead.
template <class F>
void parallel_elems(int64_t n, int64_t grain, F&& fn) {
  if (!would_split(n, grain)) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  const int64_t blocks = (n + kParallelAlign - 1) / kParallelAlign;
  const int64_t block_grain = grain / kParallelAlign > 1 ? grain / kParallelAlign : 1;
  parallel_for(0, blocks, block_grain, [&](int64_t b0, int64_t b1) {
    fn(b0 * kParallelAlign, b1 * kParallelAlign < n ? b1 * kParallelAlign : n);
  });
}

}  // namespace xgrad
