// tests/train/test_tokenizer.cpp: the train/val split and the batch sampler (nanoGPT's
// get_batch, deterministic per seed, resumable through the generator state). The character tokenizer's tests
// are in tests/text/test_char_tokenizer.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train.h"
#include "xgrad/xgrad.h"

using train_lm::BatchSampler;

namespace {

// Expects `f` to throw xgrad::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected xgrad::Error";
  } catch (const xgrad::Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace

TEST(Split, NinetyTen) {
  std::vector<int64_t> ids(1000);
  std::iota(ids.begin(), ids.end(), 0);
  auto s = train_lm::split_tokens(ids);
  ASSERT_EQ(s.train.size(), 900u);
  ASSERT_EQ(s.val.size(), 100u);
  EXPECT_EQ(s.train.back(), 899);
  EXPECT_EQ(s.val.front(), 900);
}

TEST(BatchSampler, WindowsAreShiftedPairsOfTheData) {
  std::vector<int64_t> data(200);
  std::iota(data.begin(), data.end(), 1000);
  BatchSampler s(&data, 4, 8, 42);
  auto b = s.next();
  EXPECT_EQ(b.x.shape(), (xgrad::Shape{4, 8}));
  EXPECT_EQ(b.y.shape(), (xgrad::Shape{4, 8}));
  EXPECT_EQ(b.x.dtype(), xgrad::kInt64);
  auto x = b.x.to_vector<int64_t>(), y = b.y.to_vector<int64_t>();
  for (int i = 0; i < 4; ++i) {
    for (int t = 0; t < 8; ++t) {
      EXPECT_EQ(y[i * 8 + t], x[i * 8 + t] + 1);  // consecutive data, y = x shifted by one
      if (t > 0) EXPECT_EQ(x[i * 8 + t], x[i * 8 + t - 1] + 1);
    }
    EXPECT_GE(x[i * 8], 1000);
    EXPECT_LE(y[i * 8 + 7], 1199);
  }
}

TEST(BatchSampler, StartsAreTorchRandint) {
  // torch.manual_seed(42); torch.randint(len(data) - T, (B,)) draws from the same stream as
  // Generator(42).random_int, which random.h guarantees equal to torch's.
  std::vector<int64_t> data(100);
  std::iota(data.begin(), data.end(), 0);
  BatchSampler s(&data, 3, 5, 42);
  xgrad::Generator g(42);
  std::vector<int64_t> starts(3);
  g.random_int(starts.data(), 3, 0, 100 - 5);
  auto x = s.next().x.to_vector<int64_t>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(x[i * 5], starts[i]);
}

TEST(BatchSampler, DeterministicPerSeedAndResumable) {
  std::vector<int64_t> data(500);
  std::iota(data.begin(), data.end(), 0);
  BatchSampler a(&data, 4, 16, 7), b(&data, 4, 16, 7), c(&data, 4, 16, 8);
  auto a1 = a.next().x.to_vector<int64_t>();
  EXPECT_EQ(a1, b.next().x.to_vector<int64_t>());
  EXPECT_NE(a1, c.next().x.to_vector<int64_t>());

  // save the state after two batches, draw two more; a fresh sampler restored from the state
  // draws the same two
  a.next();
  auto state = a.generator().get_state();
  auto a3 = a.next().x.to_vector<int64_t>(), a4 = a.next().y.to_vector<int64_t>();
  BatchSampler r(&data, 4, 16, 999);
  r.generator().set_state(state);
  EXPECT_EQ(r.next().x.to_vector<int64_t>(), a3);
  EXPECT_EQ(r.next().y.to_vector<int64_t>(), a4);
}

TEST(BatchSampler, TooShortSplitIsAnError) {
  std::vector<int64_t> data(8);
  expect_error([&] { BatchSampler(&data, 2, 8, 1, "val"); }, {"val split", "8 tokens", "9"});
  std::vector<int64_t> ok(9);
  BatchSampler s(&ok, 2, 8, 1);
  auto x = s.next().x.to_vector<int64_t>();  // the only window starts at 0
  EXPECT_EQ(x[0], 0);
  EXPECT_EQ(x[8], 0);
}
