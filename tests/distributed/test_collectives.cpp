// tests/distributed/test_collectives.cpp: all_reduce (Sum, Avg, Max), broadcast and
// all_gather on float32, float64 and int64, contiguous and not, checked against values every
// rank can compute for itself (rank r holds a known function of r). Run by ctest under
// `mpirun -np 2` and `-np 3` (tests/distributed/CMakeLists.txt) and as a group of one.
#include <gtest/gtest.h>

#include "error_message.h"
#include "xgrad/distributed.h"
#include "xgrad/ops.h"

namespace dist = xgrad::distributed;
using xgrad::DType;
using xgrad::Tensor;
using xgrad::testing::error_of;

namespace {

const DType kDtypes[] = {DType::Float32, DType::Float64, DType::Int64};

// The value rank r holds at flat index i: distinct per rank and index, exact in every dtype.
double value_at(int r, int64_t i) { return static_cast<double>((r + 1) * 100 + (i * 7) % 13) - 50.0; }

// A (rows, cols) tensor of rank r's values.
Tensor rank_tensor(int r, int64_t rows, int64_t cols, DType dtype) {
  std::vector<double> v(static_cast<std::size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) v[static_cast<std::size_t>(i)] = value_at(r, i);
  return xgrad::from_vector(v, {rows, cols}).to(dtype);
}

std::vector<double> values(const Tensor& t) { return t.to(DType::Float64).contiguous().to_vector<double>(); }

const char* name(DType d) { return xgrad::dtype_name(d); }

}  // namespace

TEST(Collectives, RankAndWorldSize) {
  const int n = dist::get_world_size();
  const int r = dist::get_rank();
  EXPECT_GE(n, 1);
  EXPECT_GE(r, 0);
  EXPECT_LT(r, n);
  EXPECT_EQ(n, dist::launcher_world_size());
  Tensor ranks = xgrad::from_vector(std::vector<int64_t>{r}, {1});
  dist::all_reduce(ranks, dist::ReduceOp::Sum);  // every rank appears exactly once
  EXPECT_EQ(ranks.to_vector<int64_t>()[0], int64_t(n) * (n - 1) / 2);
  dist::barrier();
}

TEST(Collectives, AllReduceEveryOpAndDtype) {
  const int n = dist::get_world_size();
  const int r = dist::get_rank();
  for (DType dt : kDtypes)
    for (auto op : {dist::ReduceOp::Sum, dist::ReduceOp::Avg, dist::ReduceOp::Max}) {
      if (op == dist::ReduceOp::Avg && dt == DType::Int64) continue;  // an error, tested below
      Tensor t = rank_tensor(r, 3, 5, dt);
      dist::all_reduce(t, op);
      std::vector<double> got = values(t);
      for (int64_t i = 0; i < 15; ++i) {
        double sum = 0, mx = -1e300;
        for (int q = 0; q < n; ++q) {
          sum += value_at(q, i);
          mx = std::max(mx, value_at(q, i));
        }
        const double want = op == dist::ReduceOp::Sum ? sum : op == dist::ReduceOp::Max ? mx : sum / n;
        EXPECT_NEAR(got[static_cast<std::size_t>(i)], want, dt == DType::Float32 ? 1e-4 : 1e-12)
            << name(dt) << " op " << int(op) << " index " << i;
      }
    }
}

TEST(Collectives, AllReduceNonContiguousWritesOnlyTheView) {
  const int n = dist::get_world_size();
  const int r = dist::get_rank();
  for (DType dt : kDtypes) {
    Tensor base = rank_tensor(r, 4, 6, dt);
    Tensor view = base.transpose(0, 1).slice(0, 0, 6, 2);  // (3, 4), strides (2, 6)
    ASSERT_FALSE(view.is_contiguous());
    dist::all_reduce(view, dist::ReduceOp::Sum);
    std::vector<double> got = values(base);
    for (int64_t row = 0; row < 4; ++row)
      for (int64_t col = 0; col < 6; ++col) {
        const int64_t i = row * 6 + col;
        double want = value_at(r, i);  // odd columns are not in the view: untouched
        if (col % 2 == 0) {
          want = 0;
          for (int q = 0; q < n; ++q) want += value_at(q, i);
        }
        EXPECT_EQ(got[static_cast<std::size_t>(i)], want) << name(dt) << " at " << row << "," << col;
      }
  }
}

TEST(Collectives, BroadcastFromEverySource) {
  const int n = dist::get_world_size();
  const int r = dist::get_rank();
  for (DType dt : kDtypes)
    for (int src = 0; src < n; ++src) {
      Tensor t = rank_tensor(r, 2, 7, dt);
      dist::broadcast(t, src);
      EXPECT_EQ(values(t), values(rank_tensor(src, 2, 7, dt))) << name(dt) << " from " << src;

      Tensor base = rank_tensor(r, 7, 2, dt);  // non-contiguous: the transpose
      Tensor view = base.t();
      dist::broadcast(view, src);
      EXPECT_EQ(values(view), values(rank_tensor(src, 7, 2, dt).t())) << name(dt) << " from " << src;
    }
}

TEST(Collectives, AllGatherIntoNewAndExistingLists) {
  const int n = dist::get_world_size();
  const int r = dist::get_rank();
  for (DType dt : kDtypes) {
    Tensor input = rank_tensor(r, 5, 3, dt).t();  // (3, 5), non-contiguous
    std::vector<Tensor> fresh;
    dist::all_gather(fresh, input);
    ASSERT_EQ(static_cast<int>(fresh.size()), n);
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(fresh[q].shape(), (xgrad::Shape{3, 5}));
      EXPECT_EQ(fresh[q].dtype(), dt);
      EXPECT_EQ(values(fresh[q]), values(rank_tensor(q, 5, 3, dt).t())) << name(dt) << " rank " << q;
    }
    // into existing, non-contiguous tensors
    std::vector<Tensor> bases, outs;
    for (int q = 0; q < n; ++q) {
      bases.push_back(xgrad::zeros({5, 3}, dt));
      outs.push_back(bases.back().t());
    }
    dist::all_gather(outs, input);
    for (int q = 0; q < n; ++q)
      EXPECT_EQ(values(bases[q]), values(rank_tensor(q, 5, 3, dt))) << name(dt) << " rank " << q;
  }
}

TEST(Collectives, ClearErrors) {
  const int n = dist::get_world_size();
  Tensor flags = xgrad::zeros({3}, DType::Bool);
  EXPECT_MESSAGE_HAS(error_of([&] { dist::all_reduce(flags); }), "all_reduce: dtype bool");
  EXPECT_MESSAGE_HAS(error_of([&] { dist::broadcast(flags, 0); }), "float32, float64 or int64");
  Tensor ints = xgrad::zeros({2}, DType::Int64);
  EXPECT_MESSAGE_HAS(error_of([&] { dist::all_reduce(ints, dist::ReduceOp::Avg); }),
                     "ReduceOp::Avg needs a floating-point");
  Tensor f = xgrad::zeros({2});
  EXPECT_MESSAGE_HAS(error_of([&] { dist::broadcast(f, n); }), "src rank");
  EXPECT_MESSAGE_HAS(error_of([&] { dist::broadcast(f, -1); }), "out of range");
  std::vector<Tensor> wrong(static_cast<std::size_t>(n + 1), xgrad::zeros({2}));
  EXPECT_MESSAGE_HAS(error_of([&] { dist::all_gather(wrong, f); }), "expected the world size");
  std::vector<Tensor> mis(static_cast<std::size_t>(n), xgrad::zeros({3}));
  EXPECT_MESSAGE_HAS(error_of([&] { dist::all_gather(mis, f); }), "input's shape [2]");
  EXPECT_MESSAGE_HAS(error_of([&] { dist::init_process_group(); }), "twice");
  Tensor undefined;
  EXPECT_MESSAGE_HAS(error_of([&] { dist::all_reduce(undefined); }), "undefined");
  dist::barrier();  // every rank still in step after the refusals
}
