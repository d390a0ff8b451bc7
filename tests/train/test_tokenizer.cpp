// tests/train/test_tokenizer.cpp: the train/val split. The character tokenizer's tests are in
// tests/text/test_char_tokenizer.cpp; the batches' (text::GPTDataset, data::DataLoader) in
// tests/text and tests/data, the trainer's use of them in test_trainer.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train.h"
#include "xgrad/xgrad.h"

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

TEST(Split, FractionOutsideZeroOneIsAnError) {
  const std::vector<int64_t> ids(10, 1);
  for (double f : {0.0, 1.0, 1.5, -0.1})
    expect_error([&] { train_lm::split_tokens(ids, f); }, {"train_fraction"});
}
