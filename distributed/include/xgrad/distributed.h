// xgrad/distributed.h: data-parallel training over MPI, named and behaving like PyTorch's
// torch.distributed + DistributedDataParallel.
//
//   xgrad::distributed::init_process_group();          // rank and world size from mpirun
//   auto ddp = std::make_shared<DistributedDataParallel>(model);  // rank 0's weights everywhere
//   Tensor loss = cross_entropy(ddp->forward(x_shard), y_shard);
//   loss.backward();                                   // gradients now averaged over ranks
//   opt.step();                                        // identical on every rank
//
// Launch with `mpirun -np N prog`; without mpirun the process is a group of one. Collectives
// take float32, float64 and int64 tensors, contiguous or not (a non-contiguous tensor goes
// through a contiguous copy). Every rank must call the same collectives in the same order
// with tensors of the same shape and dtype, as in torch. A rank that dies ends the whole job
// (MPI's default error handler, MPI_ERRORS_ARE_FATAL, and mpirun's abort on a lost process).
//
// The library is built when CMake finds MPI (XGRAD_WITH_MPI); core, nn and optim never use it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "xgrad/nn/module.h"
#include "xgrad/tensor.h"

namespace xgrad::distributed {

// torch.distributed.ReduceOp (AVG as NCCL's: floating point only here).
enum class ReduceOp { Sum, Avg, Max };

// torch.distributed.init_process_group(backend="mpi"): MPI_Init (thread level FUNNELED:
// collectives from the main thread only; xgrad's kernel threads never call MPI). Throws
// xgrad::Error when already initialized. Works without mpirun as a group of one.
void init_process_group();
bool is_initialized();
// Finalizes MPI; afterwards the group cannot be initialized again in this process (MPI's rule).
void destroy_process_group();

// Whether this process was started by an MPI launcher (mpirun/srun set OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_RANK); usable without MPI, e.g. to refuse a launch a build cannot serve.
// The world size the launcher announced (1 when none).
int launcher_world_size();

// Ends every process of the job with `errorcode` (MPI_Abort): for an error on one rank that
// would leave the others waiting in a collective. Not in torch (there the launcher does it).
[[noreturn]] void abort_process_group(int errorcode);

int get_rank();        // this process, 0 .. world_size - 1
int get_world_size();  // number of processes in the group
void barrier();

// In place on every rank: t = op(t over all ranks).
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
// In place: every rank gets rank src's values.
void broadcast(Tensor& tensor, int src);
// torch.distributed.all_gather: tensor_list[r] = rank r's `tensor`. An empty list is filled
// with new tensors; a list of world_size tensors (same shape and dtype) is written in place.
void all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor);

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25.0;    // torch's default: gradients are reduced in ~25 MB buckets
  bool broadcast_buffers = true;  // buffers from rank 0 at construction (as torch's first sync)
};

// torch.nn.parallel.DistributedDataParallel. Holds the module as its child "module" (so
// named_parameters() gives "module.<name>", as torch). At construction it broadcasts the
// module's parameters and buffers from rank 0. forward() records, ahead of the module's own
// ops, one node that backward() reaches last: it all-reduces the gradients, averaged over the
// ranks, bucket by bucket (parameters in reverse registration order, as torch, packed into
// contiguous buffers of at most bucket_cap_mb per dtype: one MPI_Allreduce per bucket, not
// per parameter). A parameter without a gradient on this rank contributes zeros and gets the
// averaged gradient (every rank then holds the same .grad set).
class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                   DistributedDataParallelOptions options = {});

  Tensor forward(const Tensor& input) override;
  nn::Module& module() { return *module_; }

  // RAII, as `with ddp.no_sync():` — forwards run inside skip the reduction, so gradients
  // accumulate locally; the first forward + backward outside it reduces the sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // What the backward node runs; callable by hand (e.g. after a backward that did not go
  // through forward()).
  void reduce_gradients();

  // Bytes of each gradient bucket, in reduction order (for tests, benches and docs).
  std::vector<int64_t> bucket_bytes() const;

  struct Reducer;  // the buckets and their flat buffers (distributed/src/ddp.cpp)

 private:
  std::shared_ptr<nn::Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<Reducer> reducer_;
  Tensor anchor_leaf_;  // a scalar leaf the reduce node hangs from
  bool require_sync_ = true;
};

}  // namespace xgrad::distributed
