// examples/common/world.h: the processes one training run spans (data parallelism), for any
// example that may run under `mpirun -np N` (train_lm does).
//
// Each copy joins the MPI job here (through xgrad::distributed) and asks this file the few
// things a training loop needs: which rank it is, its rows of each global batch, the model
// wrapped in DistributedDataParallel, and the mean of a number over the ranks. Started without mpirun, or
// built without MPI, the world is one process and every call here is the identity. Only rank 0 logs, draws
// the progress bar and writes files; the other ranks log errors only.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "xgrad/nn/module.h"
#include "xgrad/tensor.h"

namespace xgrad_examples {

struct World {
  int rank = 0;
  int size = 1;
  bool is_main() const { return rank == 0; }
};

// The current world: one process until join_world().
const World& world();

// The number of processes an MPI launcher started (its environment: OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_SIZE, SLURM_NTASKS), 1 when none.
int launcher_world_size();
// This process's rank as the launcher announced it (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
// SLURM_PROCID), 0 when none: who speaks for a build without MPI under mpirun.
int launcher_rank();
// Whether this build can train on several processes (xgrad::distributed was built).
bool built_with_mpi();

// What is wrong with `mpirun -np <launcher_size>` for a global batch (--batch-size) of
// `batch_size` rows (nothing: nullopt); check it before anything is written.
std::optional<std::string> launch_problem(bool with_mpi, int launcher_size, int64_t batch_size);

// Joins the MPI job when a launcher started several processes (else stays a world of one);
// rank > 0 then logs errors only. leave_world() ends it (MPI_Finalize) at the end of the run.
void join_world();
void leave_world();
// Ends every process of the job with `code` (MPI_Abort): an error on one rank must not leave
// the others waiting in a collective. In a world of one, returns code.
int abort_world(int code);

// Over all ranks: the mean of v; whether any rank says true; a barrier.
double mean_over_world(double v);
bool any_over_world(bool v);
void world_barrier();

// This rank's rows of a global batch (B, ...): rows [rank * B / N, (rank + 1) * B / N).
xgrad::Tensor shard_rows(const xgrad::Tensor& global);

// The module the training loop calls: DistributedDataParallel(model) when the world has
// several processes (rank 0's weights broadcast now, gradients averaged after backward()),
// the model itself otherwise.
std::shared_ptr<xgrad::nn::Module> data_parallel(std::shared_ptr<xgrad::nn::Module> model);

}  // namespace xgrad_examples
