// core/src/parallel.cpp: serial placeholder for xgrad/parallel.h (the thread pool replaces it).
#include "xgrad/parallel.h"

#include "xgrad/error.h"

namespace xgrad {

namespace {
int g_num_threads = 1;
thread_local bool t_in_parallel = false;
}  // namespace

void set_num_threads(int n) {
  if (n < 1) fail("set_num_threads", "expected a positive number of threads, got ", n);
  g_num_threads = n;
}

int get_num_threads() { return g_num_threads; }

void parallel_for(int64_t begin, int64_t end, int64_t grain_size,
                  const std::function<void(int64_t, int64_t)>& fn) {
  (void)grain_size;
  if (begin >= end) return;
  const bool outer = !t_in_parallel;
  t_in_parallel = true;
  try {
    fn(begin, end);
  } catch (...) {
    if (outer) t_in_parallel = false;
    throw;
  }
  if (outer) t_in_parallel = false;
}

bool in_parallel_region() { return t_in_parallel; }

}  // namespace xgrad
