// tests/core/test_parallel.cpp: xgrad/parallel.h, the thread pool itself: parallel_for covers
// every index once in chunks of at least grain_size, nested calls run serially, exceptions
// reach the caller, set_num_threads validates, several user threads can share the pool.
// Kernels computed with the pool are checked in test_parallel_kernels.cpp. Every test
// restores the thread count (ThreadCount below).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "thread_count.h"
#include "xgrad/error.h"
#include "xgrad/parallel.h"

namespace xgrad {
namespace {

using testing::ThreadCount;

struct Chunks {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

// Runs parallel_for and returns the chunks it made, after checking each index was visited
// exactly once.
std::vector<std::pair<int64_t, int64_t>> run_and_check(int64_t begin, int64_t end, int64_t grain) {
  const int64_t n = std::max<int64_t>(end - begin, 0);
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  Chunks c;
  parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) {
    EXPECT_TRUE(in_parallel_region());
    for (int64_t i = lo; i < hi; ++i) hits[i - begin].fetch_add(1);
    std::lock_guard<std::mutex> lk(c.m);
    c.ranges.emplace_back(lo, hi);
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "index " << begin + i;
  std::sort(c.ranges.begin(), c.ranges.end());
  return c.ranges;
}

TEST(Parallel, CoversEveryIndexOnceWithGrainSizedChunks) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadCount tc(threads);
    const std::vector<std::array<int64_t, 3>> cases{
        {0, 0, 1},         {5, 3, 1},       {0, 1, 1},    {0, 7, 1},      {0, 100, 1},
        {0, 100, 7},       {0, 100, 50},    {0, 100, 51}, {0, 100, 1000}, {-37, 1234, 16},
        {3, 100003, 4096}, {0, 1 << 20, 0}, {10, 11, 0}};
    for (const auto& [b, e, g] : cases) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, [" << b << ", " << e << ") grain " << g);
      const auto ranges = run_and_check(b, e, g);
      if (e <= b) {
        EXPECT_TRUE(ranges.empty());
        continue;
      }
      const int64_t grain = std::max<int64_t>(g, 1);
      const int64_t expect_chunks = std::max<int64_t>(1, std::min<int64_t>(threads, (e - b) / grain));
      EXPECT_EQ(static_cast<int64_t>(ranges.size()), expect_chunks);
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        if (ranges.size() > 1) EXPECT_GE(ranges[i].second - ranges[i].first, grain);
        if (i > 0) EXPECT_EQ(ranges[i].first, ranges[i - 1].second);  // disjoint, in order
      }
      EXPECT_EQ(ranges.front().first, b);
      EXPECT_EQ(ranges.back().second, e);
    }
  }
}

TEST(Parallel, ManySmallJobsBackToBack) {
  ThreadCount tc(2);
  std::atomic<int64_t> total{0};
  for (int rep = 0; rep < 2000; ++rep)
    parallel_for(0, 64, 1, [&](int64_t lo, int64_t hi) { total.fetch_add(hi - lo); });
  EXPECT_EQ(total.load(), 2000 * 64);
}

TEST(Parallel, OutsideARegionIsNotParallel) {
  EXPECT_FALSE(in_parallel_region());
  ThreadCount tc(2);
  parallel_for(0, 10, 1, [](int64_t, int64_t) {});
  EXPECT_FALSE(in_parallel_region());
  parallel_for(0, 10, 100, [](int64_t, int64_t) { EXPECT_TRUE(in_parallel_region()); });
  EXPECT_FALSE(in_parallel_region());
}

TEST(Parallel, NestedCallsRunSeriallyOnTheCallingThread) {
  ThreadCount tc(2);
  std::atomic<int> inner_calls{0};
  std::atomic<int> wrong_thread{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    const std::thread::id me = std::this_thread::get_id();
    parallel_for(0, 1000, 1, [&](int64_t lo, int64_t hi) {
      inner_calls.fetch_add(1);
      if (std::this_thread::get_id() != me) wrong_thread.fetch_add(1);
      EXPECT_EQ(lo, 0);
      EXPECT_EQ(hi, 1000);
      EXPECT_TRUE(in_parallel_region());
    });
    EXPECT_TRUE(in_parallel_region());  // still inside the outer chunk
  });
  EXPECT_EQ(inner_calls.load(), 2);  // one serial call per outer chunk
  EXPECT_EQ(wrong_thread.load(), 0);
  EXPECT_FALSE(in_parallel_region());
}

TEST(Parallel, ExceptionsReachTheCaller) {
  for (int threads : {1, 2, 4}) {
    ThreadCount tc(threads);
    // from every chunk, from the last chunk only (often a worker's), from the first only
    for (int64_t bad : {int64_t{-1}, int64_t{999}, int64_t{0}}) {
      EXPECT_THROW(parallel_for(0, 1000, 10,
                                [&](int64_t lo, int64_t hi) {
                                  if (bad < 0 || (lo <= bad && bad < hi))
                                    throw std::runtime_error("chunk failed");
                                }),
                   std::runtime_error);
      EXPECT_FALSE(in_parallel_region());
    }
    // xgrad::Error keeps its type and message
    try {
      parallel_for(0, 100, 1, [](int64_t lo, int64_t) {
        if (lo > 0) fail("test_op", "boom at ", lo);
      });
      if (threads > 1) ADD_FAILURE() << "expected an exception";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos);
    }
    // the pool still works afterwards
    const auto ranges = run_and_check(0, 5000, 10);
    EXPECT_EQ(static_cast<int>(ranges.size()), threads);
  }
}

TEST(Parallel, SetNumThreadsValidates) {
  ThreadCount tc(get_num_threads());
  EXPECT_THROW(set_num_threads(0), Error);
  EXPECT_THROW(set_num_threads(-3), Error);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  // changing it from inside a parallel region is refused (and does not deadlock)
  std::atomic<int> refused{0};
  parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    try {
      set_num_threads(1);
    } catch (const Error&) {
      refused.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), 2);
  EXPECT_EQ(get_num_threads(), 2);
}

TEST(Parallel, SeveralUserThreadsShareThePool) {
  ThreadCount tc(2);
  std::atomic<int> bad{0};
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u)
    users.emplace_back([&, u] {
      for (int rep = 0; rep < 300; ++rep) {
        const int64_t n = 1000 + u * 37 + rep;
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        parallel_for(0, n, 16, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i)
          if (hits[i].load() != 1) bad.fetch_add(1);
      }
    });
  for (std::thread& t : users) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(Parallel, ResizingThePoolBetweenJobs) {
  ThreadCount tc(1);
  for (int threads : {2, 4, 1, 3, 2}) {
    set_num_threads(threads);
    const auto ranges = run_and_check(0, 10000, 100);
    EXPECT_EQ(static_cast<int>(ranges.size()), threads);
  }
}

}  // namespace
}  // namespace xgrad
