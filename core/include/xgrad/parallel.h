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

}  // namespace xgrad
