// examples/common/world.cpp: see world.h. The MPI parts are compiled when CMake built
// xgrad::distributed (XGRAD_EXAMPLES_WITH_MPI); the rest is the world of one.
#include "world.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "xgrad/error.h"
#include "xgrad/ops.h"
#include "xgrad/parallel.h"
#ifdef XGRAD_EXAMPLES_WITH_MPI
#include "xgrad/distributed.h"
#endif

namespace xgrad_examples {

namespace {
World g_world;
}  // namespace

const World& world() { return g_world; }

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var))
      if (int n = std::atoi(v); n > 0) return n;
  return 1;
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

bool built_with_mpi() {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  return true;
#else
  return false;
#endif
}

void join_world() {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (launcher_world_size() <= 1 || xgrad::distributed::is_initialized()) return;
  xgrad::distributed::init_process_group();
  g_world.rank = xgrad::distributed::get_rank();
  g_world.size = xgrad::distributed::get_world_size();
  // N ranks on one machine share its cores: xgrad's default thread count per rank is the
  // machine's share (--threads still overrides)
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    if (int n = std::atoi(local); n > 1)
      xgrad::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / n));
  if (!g_world.is_main()) {
    spdlog::set_level(spdlog::level::err);
    spdlog::set_pattern("[rank " + std::to_string(g_world.rank) + "] [%l] %v");
  }
#endif
}

void leave_world() {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (!xgrad::distributed::is_initialized()) return;
  xgrad::distributed::destroy_process_group();
  g_world = World{};
#endif
}

int abort_world(int code) {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (g_world.size > 1) {
    spdlog::default_logger()->flush();
    xgrad::distributed::abort_process_group(code);
  }
#endif
  return code;
}

double mean_over_world(double v) {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (g_world.size > 1) {
    xgrad::Tensor t = xgrad::from_vector(std::vector<double>{v}, {1});
    xgrad::distributed::all_reduce(t, xgrad::distributed::ReduceOp::Avg);
    return t.to_vector<double>()[0];
  }
#endif
  return v;
}

bool any_over_world(bool v) {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (g_world.size > 1) {
    xgrad::Tensor t = xgrad::from_vector(std::vector<int64_t>{v ? 1 : 0}, {1});
    xgrad::distributed::all_reduce(t, xgrad::distributed::ReduceOp::Max);
    return t.to_vector<int64_t>()[0] != 0;
  }
#endif
  return v;
}

void world_barrier() {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (g_world.size > 1) xgrad::distributed::barrier();
#endif
}

xgrad::Tensor shard_rows(const xgrad::Tensor& global) {
  if (g_world.size == 1) return global;
  const int64_t per = global.size(0) / g_world.size;
  return global.narrow(0, per * g_world.rank, per).contiguous();
}

std::shared_ptr<xgrad::nn::Module> data_parallel(std::shared_ptr<xgrad::nn::Module> model) {
#ifdef XGRAD_EXAMPLES_WITH_MPI
  if (g_world.size > 1) return std::make_shared<xgrad::distributed::DistributedDataParallel>(model);
#endif
  return model;
}

std::optional<std::string> launch_problem(bool with_mpi, int launcher_size, int64_t batch_size) {
  const std::string n = std::to_string(launcher_size), batch = "--batch-size " + std::to_string(batch_size);
  if (launcher_size > 1 && !with_mpi)
    return "this program was built without MPI (no libopenmpi-dev at configure time, or "
           "-DXGRAD_WITH_MPI=OFF), "
           "so it cannot train on the " +
           n +
           " processes mpirun started; install OpenMPI (scripts/deps.sh) and rebuild, or run it "
           "without mpirun";
  if (launcher_size > batch_size)
    return batch + " is the global batch, shared by the " + n + " processes: it must be at least " + n +
           " (one row per process); raise --batch-size or start fewer processes (mpirun -np)";
  if (batch_size % launcher_size != 0)
    return batch + " is the global batch and must divide evenly among the " + n +
           " processes; use a multiple of " + n + " (e.g. " +
           std::to_string((batch_size / launcher_size + 1) * launcher_size) + ") or another -np";
  return std::nullopt;
}

}  // namespace xgrad_examples
