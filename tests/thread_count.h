// tests/thread_count.h: ThreadCount, a scope guard that sets xgrad's thread count and restores
// the previous one, for tests that compare results across thread counts.
#pragma once
#include "xgrad/parallel.h"

namespace xgrad::testing {

struct ThreadCount {
  int saved;
  explicit ThreadCount(int n) : saved(get_num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;
};

}  // namespace xgrad::testing
