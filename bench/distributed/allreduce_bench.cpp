// bench/distributed/allreduce_bench.cpp: all-reduce bandwidth over MPI, 1 KB .. 64 MB of
// float32, through xgrad::distributed::all_reduce (Sum) and through a plain MPI_Allreduce on
// a raw buffer (OpenMPI's own figure, the floor xgrad's wrapper should sit on).
//
//   mpirun -np 2 build/bench/distributed/allreduce_bench [--mca ...]
//
// Per size: best of --reps timed repetitions (the two paths alternating), each the mean over
// enough calls to take about 20 ms (at least 5), after an untimed warm-up. Prints one line per size (rank 0):
// bytes, then per path the time per call (us), the algorithm bandwidth (bytes / time, GB/s)
// and the bus bandwidth (algbw * 2 (n - 1) / n, what each rank's link carries; nccl-tests'
// convention).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xgrad/distributed.h"
#include "xgrad/ops.h"

namespace dist = xgrad::distributed;

namespace {

double now() { return MPI_Wtime(); }

// How many calls of f take about 20 ms (rank 0 decides, everyone follows); after a warm-up.
template <class F>
int calibrate(F&& f) {
  f();
  const double t0 = now();
  f();
  double one = now() - t0;
  MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return std::max(5, static_cast<int>(0.02 / std::max(one, 1e-7)));
}

// The mean seconds per call over `iters` calls, as the slowest rank saw it.
template <class F>
double mean_time(F&& f, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = now();
  for (int i = 0; i < iters; ++i) f();
  double t = (now() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[i + 1]);
  dist::init_process_group();
  const int n = dist::get_world_size();
  const bool main_rank = dist::get_rank() == 0;
  if (main_rank)
    std::printf(
        "# all-reduce (sum, float32) over %d processes, best of %d\n"
        "# %10s | %10s %8s %8s | %10s %8s %8s\n",
        n, reps, "bytes", "xgrad us", "algGB/s", "busGB/s", "MPI us", "algGB/s", "busGB/s");
  for (int64_t bytes = 1024; bytes <= (int64_t(64) << 20); bytes *= 4) {
    const int64_t count = bytes / 4;
    xgrad::Tensor t = xgrad::zeros({count});  // zeros: the sums stay finite
    std::vector<float> raw(static_cast<std::size_t>(count), 0.0f);
    auto xgrad_call = [&] { dist::all_reduce(t); };
    auto mpi_call = [&] {
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    const int iters_x = calibrate(xgrad_call), iters_m = calibrate(mpi_call);
    double tx = 1e30, tm = 1e30;
    for (int r = 0; r < reps; ++r) {  // alternating, so both see the same machine load
      tx = std::min(tx, mean_time(xgrad_call, iters_x));
      tm = std::min(tm, mean_time(mpi_call, iters_m));
    }
    const double bus = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    if (main_rank)
      std::printf("  %10lld | %10.1f %8.3f %8.3f | %10.1f %8.3f %8.3f\n", static_cast<long long>(bytes),
                  tx * 1e6, bytes / tx / 1e9, bytes / tx / 1e9 * bus, tm * 1e6, bytes / tm / 1e9,
                  bytes / tm / 1e9 * bus);
  }
  dist::destroy_process_group();
  return 0;
}
