// distributed/src/ddp.cpp: DistributedDataParallel and its reducer (the gradient buckets).
//
// How the reduction runs after backward() without a hook API: forward() first records a
// scalar "anchor" node, then runs the module, then ties the module's output to the anchor
// (DistributedDataParallelBackward passes the output's gradient through and hands the anchor
// a zero). The tape replays nodes in reverse order of creation, so the anchor's node, made
// before any op of the module, runs after all of them: every parameter's .grad is complete
// by then (leaf gradients are accumulated as soon as a node hands them out), and the anchor's
// backward all-reduces them.
#include <mpi.h>

#include <algorithm>

#include "internal.h"
#include "xgrad/autograd.h"
#include "xgrad/distributed.h"
#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::distributed {

struct DistributedDataParallel::Reducer {
  struct Bucket {
    DType dtype;
    std::vector<Tensor> params;  // in reduction order
    Tensor flat;                 // (sum of numels,) contiguous, the MPI buffer
  };
  std::vector<Bucket> buckets;

  Reducer(const std::vector<Tensor>& params, double cap_mb) {
    const int64_t cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(cap_mb * 1024 * 1024));
    // torch's order: parameters in reverse registration order (roughly the order in which
    // backward produces their gradients), a new bucket when the cap or the dtype changes.
    int64_t used = 0;  // bytes in the last bucket
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const Tensor& p = *it;
      const int64_t bytes = p.numel() * static_cast<int64_t>(itemsize(p.dtype()));
      const bool full = used > 0 && used + bytes > cap_bytes;  // a big one gets its own
      if (buckets.empty() || buckets.back().dtype != p.dtype() || full) {
        buckets.push_back({p.dtype(), {}, Tensor()});
        used = 0;
      }
      buckets.back().params.push_back(p);
      used += bytes;
    }
    for (Bucket& b : buckets) {
      int64_t n = 0;
      for (const Tensor& p : b.params) n += p.numel();
      b.flat = zeros({n}, b.dtype);
    }
  }

  // grads = mean over ranks, one MPI_Allreduce per bucket
  void reduce() {
    NoGradGuard no_grad;
    for (Bucket& b : buckets) {
      int64_t offset = 0;
      for (const Tensor& p : b.params) {  // pack
        Tensor slot = b.flat.narrow(0, offset, p.numel()).view(p.shape());
        Tensor g = p.grad();
        if (g.defined()) slot.copy_(g);
        else slot.zero_();
        offset += p.numel();
      }
      if (b.flat.numel() > INT32_MAX)
        fail("DistributedDataParallel", "a bucket of ", b.flat.numel(),
             " elements exceeds MPI's count; lower bucket_cap_mb");
      const int rc =
          MPI_Allreduce(MPI_IN_PLACE, b.flat.raw_data_ptr(), static_cast<int>(b.flat.numel()),
                        b.dtype == DType::Float64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) fail("DistributedDataParallel", "MPI_Allreduce failed (error ", rc, ")");
      divide_by_world_size(b.flat);
      offset = 0;
      for (Tensor p : b.params) {  // unpack
        Tensor slot = b.flat.narrow(0, offset, p.numel()).view(p.shape());
        Tensor g = p.grad();
        if (g.defined()) g.copy_(slot);
        else p.set_grad(slot.clone());
        offset += p.numel();
      }
    }
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  if (!module_) fail("DistributedDataParallel", "the module is null");
  if (!is_initialized())
    fail("DistributedDataParallel",
         "the default process group has not been initialized; call "
         "xgrad::distributed::init_process_group() first");
  if (!(options_.bucket_cap_mb > 0))
    fail("DistributedDataParallel", "bucket_cap_mb must be > 0, got ", options_.bucket_cap_mb);
  register_module("module", module_);

  std::vector<Tensor> trainable;
  for (const Tensor& p : module_->parameters()) {
    if (p.dtype() != DType::Float32 && p.dtype() != DType::Float64)
      fail("DistributedDataParallel", "parameter of shape ", p.shape(), " has dtype ", dtype_name(p.dtype()),
           "; only float32 and float64 parameters are supported");
    if (p.requires_grad()) trainable.push_back(p);
  }
  // every rank starts from rank 0's weights (torch's _sync_module_states)
  {
    NoGradGuard no_grad;
    for (Tensor p : module_->parameters()) broadcast(p, 0);
    if (options_.broadcast_buffers)
      for (Tensor b : module_->buffers()) {
        if (b.dtype() != DType::Bool) {
          broadcast(b, 0);
          continue;
        }
        // bool buffers (attention masks) as bytes: the collectives' dtypes exclude bool
        Tensor bytes = b.contiguous();
        if (MPI_Bcast(bytes.raw_data_ptr(), static_cast<int>(bytes.numel()), MPI_BYTE, 0, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
          fail("DistributedDataParallel", "broadcasting a bool buffer of shape ", b.shape(), " failed");
        if (bytes.impl() != b.impl()) b.copy_(bytes);
      }
  }
  reducer_ = std::make_shared<Reducer>(trainable, options_.bucket_cap_mb);
  anchor_leaf_ = zeros({});
  anchor_leaf_.requires_grad_(true);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  if (!require_sync_ || !GradMode::is_enabled() || get_world_size() == 1) return module_->forward(input);
  // The anchor node is made before any op of the module, so backward runs it last
  // (see the top of this file). It holds the reducer weakly: a graph outliving the module
  // then reduces nothing.
  std::weak_ptr<Reducer> weak = reducer_;
  Tensor anchor = record("DistributedDataParallelReduceBackward", zeros({}), {anchor_leaf_},
                         [weak](const Tensor&, Grads&) {
                           if (auto reducer = weak.lock()) reducer->reduce();
                         });
  Tensor out = module_->forward(input);
  return record("DistributedDataParallelBackward", out.detach(), {out, anchor},
                [](const Tensor& dout, Grads& grads) {
                  if (grads.wants(0)) grads.add(0, dout);
                  if (grads.wants(1)) grads.add(1, zeros({}));
                });
}

void DistributedDataParallel::reduce_gradients() {
  if (get_world_size() > 1) reducer_->reduce();
}

std::vector<int64_t> DistributedDataParallel::bucket_bytes() const {
  std::vector<int64_t> out;
  for (const auto& b : reducer_->buckets)
    out.push_back(b.flat.numel() * static_cast<int64_t>(itemsize(b.dtype)));
  return out;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_sync_) {
  ddp_.require_sync_ = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.require_sync_ = prev_; }

}  // namespace xgrad::distributed
