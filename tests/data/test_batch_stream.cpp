// tests/data/test_batch_stream.cpp: data::BatchStream, a DataLoader's passes without end at a
// position that can be saved: its batches are the loader's pass after pass, and a new stream
// sought to a saved position (inside a pass, at its end, epochs later) continues with the
// batches the first one gives; a bad position is refused changing nothing.
#include <gtest/gtest.h>

#include <vector>

#include "error_message.h"
#include "xgrad/data.h"
#include "xgrad/ops.h"

namespace xgrad::data {
namespace {

using xgrad::testing::expect_error;

// 10 rows, batches of 3, shuffled, the partial batch dropped: 3 batches a pass.
std::shared_ptr<TensorDataset> rows() {
  return std::make_shared<TensorDataset>(std::vector<Tensor>{arange(10)});
}
DataLoaderOptions shuffled() { return {.batch_size = 3, .shuffle = true, .drop_last = true}; }

std::vector<int64_t> take(BatchStream& s, int n) {
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    const std::vector<int64_t> b = s.next().at(0).to_vector<int64_t>();
    ids.insert(ids.end(), b.begin(), b.end());
  }
  return ids;
}

TEST(BatchStream, IsTheLoadersPassesOneAfterAnother) {
  BatchStream s(rows(), shuffled(), 7);
  ASSERT_EQ(s.loader().size(), 3);
  Generator gen(7);
  DataLoaderOptions o = shuffled();
  o.generator = &gen;
  const DataLoader loader(rows(), o);
  std::vector<int64_t> want;
  for (int pass = 0; pass < 3; ++pass)
    for (const Example& b : loader) {
      const std::vector<int64_t> v = b.at(0).to_vector<int64_t>();
      want.insert(want.end(), v.begin(), v.end());
    }
  EXPECT_EQ(take(s, 9), want);
  EXPECT_NE(std::vector<int64_t>(want.begin(), want.begin() + 9),
            std::vector<int64_t>(want.begin() + 9, want.begin() + 18))
      << "every pass is shuffled anew";
  EXPECT_EQ(s.position().epoch, 2);
  EXPECT_EQ(s.position().batch, 3);
}

TEST(BatchStream, SeekContinuesWhereTheSavedStreamWas) {
  for (int taken : {0, 1, 3, 4, 7}) {  // before the first pass, inside one, at its end, later
    BatchStream a(rows(), shuffled(), 11);
    take(a, taken);
    const BatchStream::Position at = a.position();
    BatchStream b(rows(), shuffled(), 99);  // another seed: only the position counts
    take(b, 2);
    b.seek(at);
    EXPECT_EQ(take(b, 6), take(a, 6)) << "after " << taken << " batches";
    EXPECT_EQ(b.position().epoch, a.position().epoch);
    EXPECT_EQ(b.position().batch, a.position().batch);
    EXPECT_EQ(b.position().rng, a.position().rng);
  }
}

TEST(BatchStream, RewindStartsTheFirstPassAgain) {
  BatchStream s(rows(), shuffled(), 5);
  const std::vector<int64_t> first = take(s, 4);
  s.rewind();
  EXPECT_EQ(s.position().epoch, 0);
  EXPECT_EQ(take(s, 4), first);
}

TEST(BatchStream, BadPositionsAreRefused) {
  BatchStream s(rows(), shuffled(), 3);
  take(s, 2);
  const BatchStream::Position at = s.position();
  BatchStream probe(rows(), shuffled(), 3);
  take(probe, 2);
  expect_error([&] { s.seek({0, 4, at.rng}); }, {"BatchStream", "batch 4", "3 batches"});
  expect_error([&] { s.seek({-1, 0, at.rng}); }, {"BatchStream", "epoch -1"});
  expect_error([&] { s.seek({0, 0, {1, 2, 3}}); }, {"set_state", "3"});
  EXPECT_EQ(s.position().batch, 2);  // nothing changed
  EXPECT_EQ(take(s, 4), take(probe, 4));
}

}  // namespace
}  // namespace xgrad::data
