// tests/train/test_world.cpp: the launch checks of `mpirun -np N train_lm train`
// (launch_problem, train.h) and the world of one (examples/common/world.h) the trainer sees
// without mpirun. The runs
// under mpirun are in tests/distributed/train_mpi_test.sh.
#include <gtest/gtest.h>

#include "error_message.h"
#include "train.h"
#include "world.h"
#include "xgrad/ops.h"

using namespace train_lm;

TEST(World, LaunchProblems) {
  EXPECT_FALSE(launch_problem(true, 1, 1));
  EXPECT_FALSE(launch_problem(false, 1, 7));  // no launcher: any build, any batch
  EXPECT_FALSE(launch_problem(true, 2, 8));
  EXPECT_FALSE(launch_problem(true, 3, 3));

  auto without_mpi = launch_problem(false, 2, 8);
  ASSERT_TRUE(without_mpi);
  EXPECT_MESSAGE_HAS(*without_mpi, "built without MPI");
  EXPECT_MESSAGE_HAS(*without_mpi, "the 2 processes mpirun started");

  auto too_many = launch_problem(true, 4, 3);
  ASSERT_TRUE(too_many);
  EXPECT_MESSAGE_HAS(*too_many, "--batch-size 3 is the global batch");
  EXPECT_MESSAGE_HAS(*too_many, "must be at least 4");

  auto uneven = launch_problem(true, 3, 8);
  ASSERT_TRUE(uneven);
  EXPECT_MESSAGE_HAS(*uneven, "must divide evenly among the 3 processes");
  EXPECT_MESSAGE_HAS(*uneven, "(e.g. 9)");
}

TEST(World, WithoutALauncherTheWorldIsOneProcess) {
  EXPECT_EQ(world().size, 1);
  EXPECT_TRUE(world().is_main());
  EXPECT_EQ(mean_over_world(2.5), 2.5);
  EXPECT_TRUE(any_over_world(true));
  EXPECT_FALSE(any_over_world(false));
  xgrad::Tensor b = xgrad::arange(12, xgrad::kInt64).view({4, 3});
  EXPECT_EQ(shard_rows(b).to_vector<int64_t>(), b.to_vector<int64_t>());
  auto model = std::make_shared<xgrad::nn::Module>();
  EXPECT_EQ(data_parallel(model).get(), model.get());
}
