// randperm.cpp: torch.randperm on the CPU, the same permutation as torch 1.13 for the same
// generator state (declared in xgrad/ops.h).
//
// reference: aten/src/ATen/native/TensorFactories.cpp, randperm_cpu (torch 1.13): the
// identity 0 .. n-1, then a Fisher-Yates shuffle from the front,
//   for i in [0, n - 1):  z = random() % (n - i);  swap(r[i], r[i + z])
// with random() one 32-bit mt19937 draw, so a permutation of n takes n - 1 draws (none for
// n <= 1). (Later torch versions switch to 64-bit draws for n >= 2^32 / 20; 1.13 does not.)
#include <utility>

#include "xgrad/error.h"
#include "xgrad/ops.h"
#include "xgrad/profiler.h"
#include "xgrad/random.h"

namespace xgrad {

Tensor randperm(Int n, Generator* gen) {
  profiler::RecordFunction rec("randperm");
  if (n < 0) fail("randperm", "n must be non-negative, got ", int64_t{n});
  Tensor t = empty({n}, kInt64);
  int64_t* r = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  Generator& g = gen ? *gen : default_generator();
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int64_t z = static_cast<int64_t>(g.random() % static_cast<uint64_t>(n - i));
    std::swap(r[i], r[i + z]);
  }
  return t;
}

}  // namespace xgrad
