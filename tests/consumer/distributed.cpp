// tests/consumer/distributed.cpp: an installed xgrad::distributed links and runs (as a group
// of one, without mpirun); scripts/test.sh --consumer runs it when it was built.
#include <xgrad/distributed.h>
#include <xgrad/xgrad.h>

#include <cstdio>

int main() {
  namespace dist = xgrad::distributed;
  dist::init_process_group();
  xgrad::Tensor t = xgrad::ones({3});
  dist::all_reduce(t, dist::ReduceOp::Sum);
  const bool ok = dist::get_world_size() == 1 && dist::get_rank() == 0 && t.sum().item() == 3.0;
  dist::destroy_process_group();
  std::printf("xgrad::distributed consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
