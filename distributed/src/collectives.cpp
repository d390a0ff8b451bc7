// distributed/src/collectives.cpp: the process group over MPI_COMM_WORLD and the collectives
// (all_reduce, broadcast, all_gather, barrier). Each collective works on a contiguous buffer:
// the tensor's own storage when it is contiguous, else a contiguous copy written back after.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "internal.h"
#include "xgrad/autograd.h"
#include "xgrad/distributed.h"
#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::distributed {

namespace {

bool g_initialized = false;

void require_init(const char* op) {
  if (!g_initialized)
    fail(op,
         "the default process group has not been initialized; call "
         "xgrad::distributed::init_process_group() first");
}

MPI_Datatype mpi_type(const Tensor& t, const char* op) {
  switch (t.dtype()) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int64:
      return MPI_INT64_T;
    default:
      break;
  }
  fail(op, "dtype ", dtype_name(t.dtype()), " (shape ", t.shape(),
       ") is not supported; use float32, float64 or int64");
}

void check_mpi(int rc, const char* op) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(op, "MPI error: ", std::string(text, static_cast<std::size_t>(len)));
}

int to_count(const Tensor& t, const char* op) {
  if (t.numel() > INT32_MAX)
    fail(op, "tensor of shape ", t.shape(), " has more than 2^31 - 1 elements (MPI's count)");
  return static_cast<int>(t.numel());
}

// The contiguous buffer a collective works on, written back by finish() when it is a copy.
struct Contiguous {
  Tensor& target;
  Tensor buffer;
  explicit Contiguous(Tensor& t) : target(t), buffer(t.is_contiguous() ? t : t.contiguous()) {}
  void* data() const { return buffer.raw_data_ptr(); }
  void finish() {
    if (buffer.impl() == target.impl()) return;
    NoGradGuard no_grad;
    target.copy_(buffer);
  }
};

}  // namespace

void divide_by_world_size(Tensor& contiguous) {
  // a division, as torch's AVG (a multiplication by 1/n would round differently for n = 3)
  const int n = get_world_size();
  const int64_t count = contiguous.numel();
  if (contiguous.dtype() == DType::Float32) {
    float* p = contiguous.data_ptr<float>();
    for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
  } else if (contiguous.dtype() == DType::Float64) {
    double* p = contiguous.data_ptr<double>();
    for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<double>(n);
  } else {
    fail("all_reduce", "ReduceOp::Avg needs a floating-point tensor");
  }
}

int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var)) {
      int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

void init_process_group() {
  if (g_initialized) fail("init_process_group", "trying to initialize the default process group twice");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    fail("init_process_group",
         "MPI was finalized by destroy_process_group() and cannot be "
         "initialized again in this process");
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init_process_group");
  }
  g_initialized = true;
}

bool is_initialized() { return g_initialized; }

void destroy_process_group() {
  require_init("destroy_process_group");
  g_initialized = false;
  MPI_Finalize();
}

void abort_process_group(int errorcode) {
  require_init("abort_process_group");
  MPI_Abort(MPI_COMM_WORLD, errorcode);
  std::abort();  // MPI_Abort does not return; this is for the compiler
}

int get_rank() {
  require_init("get_rank");
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int get_world_size() {
  require_init("get_world_size");
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void barrier() {
  require_init("barrier");
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier");
}

void all_reduce(Tensor& tensor, ReduceOp op) {
  require_init("all_reduce");
  if (!tensor.defined()) fail("all_reduce", "the tensor is undefined");
  MPI_Datatype type = mpi_type(tensor, "all_reduce");
  if (op == ReduceOp::Avg && !tensor.is_floating_point())
    fail("all_reduce", "ReduceOp::Avg needs a floating-point tensor, got ", dtype_name(tensor.dtype()),
         " of shape ", tensor.shape(), " (use Sum and divide)");
  const int count = to_count(tensor, "all_reduce");
  Contiguous c(tensor);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, c.data(), count, type, op == ReduceOp::Max ? MPI_MAX : MPI_SUM,
                          MPI_COMM_WORLD),
            "all_reduce");
  if (op == ReduceOp::Avg) divide_by_world_size(c.buffer);
  c.finish();
}

void broadcast(Tensor& tensor, int src) {
  require_init("broadcast");
  if (!tensor.defined()) fail("broadcast", "the tensor is undefined");
  const int n = get_world_size();
  if (src < 0 || src >= n)
    fail("broadcast", "src rank ", src, " is out of range for a group of ", n, " processes");
  MPI_Datatype type = mpi_type(tensor, "broadcast");
  const int count = to_count(tensor, "broadcast");
  Contiguous c(tensor);
  check_mpi(MPI_Bcast(c.data(), count, type, src, MPI_COMM_WORLD), "broadcast");
  c.finish();
}

void all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor) {
  require_init("all_gather");
  if (!tensor.defined()) fail("all_gather", "the tensor is undefined");
  MPI_Datatype type = mpi_type(tensor, "all_gather");
  const int n = get_world_size();
  if (!tensor_list.empty()) {
    if (static_cast<int>(tensor_list.size()) != n)
      fail("all_gather", "tensor_list has ", tensor_list.size(), " tensors, expected the world size ", n);
    for (const Tensor& t : tensor_list)
      if (!t.defined() || t.shape() != tensor.shape() || t.dtype() != tensor.dtype())
        fail("all_gather", "every tensor of tensor_list must have the input's shape ", tensor.shape(),
             " and dtype ", dtype_name(tensor.dtype()), ", got ",
             t.defined() ? shape_str(t.shape()) : std::string("an undefined tensor"));
  }
  const int count = to_count(tensor, "all_gather");
  Tensor in = tensor.contiguous();
  Shape gathered_shape = tensor.shape();
  gathered_shape.insert(gathered_shape.begin(), n);
  Tensor gathered = empty(gathered_shape, tensor.dtype());  // (n, *tensor.shape)
  check_mpi(
      MPI_Allgather(in.raw_data_ptr(), count, type, gathered.raw_data_ptr(), count, type, MPI_COMM_WORLD),
      "all_gather");
  NoGradGuard no_grad;
  if (tensor_list.empty()) {
    for (int r = 0; r < n; ++r) tensor_list.push_back(gathered.select(0, r));
  } else {
    for (int r = 0; r < n; ++r) tensor_list[static_cast<std::size_t>(r)].copy_(gathered.select(0, r));
  }
}

}  // namespace xgrad::distributed
