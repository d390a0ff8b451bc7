// tests/distributed/mpi_main.cpp: GoogleTest's main for the tests run under mpirun. Every
// rank runs every test (the collectives need all of them); rank 0 prints the usual report,
// the other ranks print only their failures, prefixed with their rank. The process group is
// initialized once for the whole binary (MPI cannot be initialized twice).
#include <gtest/gtest.h>

#include <cstdio>

#include "xgrad/distributed.h"

namespace {

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  xgrad::distributed::init_process_group();
  const int rank = xgrad::distributed::get_rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(rank));
  }
  const int rc = RUN_ALL_TESTS();
  xgrad::distributed::destroy_process_group();
  return rc;
}
