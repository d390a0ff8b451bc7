// test_gpt_dataset.cpp: text::GPTDataset and create_dataloader against the book's
// GPTDatasetV1 in a torch 1.13 DataLoader (tests/fixtures/data.txt, from gen_data.py): the
// windows, the loader's length, two passes of shuffled batches and the generator's state.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "error_message.h"
#include "fixture.h"
#include "xgrad/data.h"
#include "xgrad/text/gpt_dataset.h"
#include "xgrad/text/tokenizer.h"

namespace xgrad::text {
namespace {

using xgrad::testing::expect_error;
using xgrad::testing::expect_next_rand;
using xgrad::testing::fixture_ints;

TEST(GPTDataset, LoaderMatchesTheBooksDatasetInTorch) {
  const std::vector<int64_t> ids = fixture_ints("gpt_ids");
  struct Case {
    int64_t max_length, stride, batch_size;
    bool shuffle, drop_last;
  };
  for (const Case c : {Case{4, 4, 2, true, true}, Case{6, 3, 3, true, false}, Case{5, 5, 4, false, false}}) {
    const std::string name = "gpt_m" + std::to_string(c.max_length) + "_s" + std::to_string(c.stride) + "_b" +
                             std::to_string(c.batch_size) + "_sh" + std::to_string(int(c.shuffle)) + "_d" +
                             std::to_string(int(c.drop_last));
    manual_seed(123);
    auto ds = std::make_shared<GPTDataset>(ids, c.max_length, c.stride);
    data::DataLoader loader(ds, {.batch_size = c.batch_size, .shuffle = c.shuffle, .drop_last = c.drop_last});
    EXPECT_EQ((std::vector<int64_t>{ds->size(), loader.size()}), fixture_ints(name + "_len")) << name;
    for (int e = 0; e < 2; ++e) {
      const std::string pre = name + "_e" + std::to_string(e);
      std::vector<int64_t> inputs, targets;
      for (const data::Example& b : loader) {
        ASSERT_EQ(b.size(), 2u);
        EXPECT_EQ(b[0].dtype(), kInt64);
        EXPECT_EQ(b[0].size(1), c.max_length);
        EXPECT_EQ(b[1].shape(), b[0].shape());
        for (int64_t v : b[0].to_vector<int64_t>()) inputs.push_back(v);
        for (int64_t v : b[1].to_vector<int64_t>()) targets.push_back(v);
      }
      EXPECT_EQ(inputs, fixture_ints(pre + "_inputs")) << pre;
      EXPECT_EQ(targets, fixture_ints(pre + "_targets")) << pre;
      expect_next_rand(pre + "_rand");
    }
  }
}

TEST(GPTDataset, WindowsAsRangeZeroToLenMinusMaxLength) {
  std::vector<int64_t> ids(9);
  for (int64_t i = 0; i < 9; ++i) ids[static_cast<std::size_t>(i)] = 100 + i;
  EXPECT_EQ(GPTDataset(ids, 8, 1).size(), 1);  // 9 tokens: one window of 8 (+1 target)
  EXPECT_EQ(GPTDataset(ids, 9, 1).size(), 0);
  EXPECT_EQ(GPTDataset(ids, 2, 3).size(), 3);  // starts 0, 3, 6
  GPTDataset ds(ids, 2, 3);
  data::Example w = ds.get(2);
  EXPECT_EQ(w[0].to_vector<int64_t>(), (std::vector<int64_t>{106, 107}));
  EXPECT_EQ(w[1].to_vector<int64_t>(), (std::vector<int64_t>{107, 108}));
  expect_error([&] { ds.get(3); }, {"GPTDataset", "index 3"});
  expect_error([&] { GPTDataset(ids, 0, 1); }, {"GPTDataset", "max_length"});
  expect_error([&] { GPTDataset(ids, 4, 0); }, {"GPTDataset", "stride"});
}

TEST(GPTDataset, CreateDataloaderTokenizesWithTheBooksDefaults) {
  const std::string txt = "In the heart of the city stood the old library, a relic from a bygone era.";
  const CharTokenizer tok = CharTokenizer::from_text(txt);
  manual_seed(123);
  data::DataLoader loader = create_dataloader(txt, tok, {.batch_size = 2, .max_length = 8, .stride = 4});
  const auto& ds = dynamic_cast<const GPTDataset&>(*loader.dataset());
  EXPECT_EQ(ds.token_ids().to_vector<int64_t>(), tok.encode(txt));
  EXPECT_EQ(ds.size(), (static_cast<int64_t>(txt.size()) - 8 + 3) / 4);
  EXPECT_TRUE(loader.drop_last());  // create_dataloader_v1's defaults: shuffle, drop_last
  EXPECT_NE(dynamic_cast<const data::RandomSampler*>(loader.sampler().get()), nullptr);
  int64_t batches = 0;
  for (const data::Example& b : loader) {
    EXPECT_EQ(b[0].shape(), (Shape{2, 8}));
    ++batches;
  }
  EXPECT_EQ(batches, ds.size() / 2);
}

}  // namespace
}  // namespace xgrad::text
