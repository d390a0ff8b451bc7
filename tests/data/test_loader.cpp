// test_loader.cpp: samplers, random_split, default_collate and the DataLoader against torch
// 1.13 (tests/fixtures/data.txt, from gen_data.py). Each pass is compared with torch's batch
// by batch, and the default generator's state after it by the next torch.rand draws, so a
// draw made at the wrong point, or one too many, fails.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "error_message.h"
#include "fixture.h"
#include "xgrad/data.h"
#include "xgrad/ops.h"

namespace xgrad::data {
namespace {

using xgrad::testing::expect_error;
using xgrad::testing::expect_next_rand;
using xgrad::testing::fixture_ints;

std::shared_ptr<TensorDataset> arange_dataset(int64_t n) {
  return std::make_shared<TensorDataset>(std::vector<Tensor>{arange(n)});
}

// One pass: the concatenated indices (field 0 of every batch) and the batch sizes.
struct Pass {
  std::vector<int64_t> idx, sizes;
};
Pass run_pass(const DataLoader& loader) {
  Pass p;
  for (const Example& batch : loader) {
    const std::vector<int64_t> v = batch.at(0).to_vector<int64_t>();
    p.idx.insert(p.idx.end(), v.begin(), v.end());
    p.sizes.push_back(batch.at(0).size(0));
  }
  return p;
}

// Two passes of `loader`, each compared with torch's `<name>_e<k>_{idx,sizes,rand}`.
void expect_passes(const std::string& name, const DataLoader& loader) {
  for (int e = 0; e < 2; ++e) {
    const std::string pre = name + "_e" + std::to_string(e);
    const Pass p = run_pass(loader);
    EXPECT_EQ(p.idx, fixture_ints(pre + "_idx")) << pre;
    EXPECT_EQ(p.sizes, fixture_ints(pre + "_sizes")) << pre;
    expect_next_rand(pre + "_rand");
  }
}

TEST(DataLoader, ShuffleMatchesTorchOverSeedsSizesBatchesAndDropLast) {
  for (int seed : {0, 123, 2024})
    for (int n : {7, 10})
      for (int bs : {1, 3, 4})
        for (bool drop_last : {false, true}) {
          const std::string name = "shuffle_s" + std::to_string(seed) + "_n" + std::to_string(n) + "_b" +
                                   std::to_string(bs) + "_d" + std::to_string(int(drop_last));
          manual_seed(static_cast<uint64_t>(seed));
          DataLoader loader(arange_dataset(n), {.batch_size = bs, .shuffle = true, .drop_last = drop_last});
          EXPECT_EQ(loader.size(), drop_last ? n / bs : (n + bs - 1) / bs);
          expect_passes(name, loader);
        }
}

TEST(DataLoader, SequentialStillDrawsTheBaseSeed) {
  manual_seed(5);
  DataLoader loader(arange_dataset(10), {.batch_size = 4});
  expect_passes("seq_n10_b4", loader);
}

TEST(DataLoader, GeneratorTakesEveryDrawAndLeavesTheDefaultAlone) {
  manual_seed(11);
  Generator g(99);
  DataLoader loader(arange_dataset(9), {.batch_size = 2, .shuffle = true, .generator = &g});
  expect_passes("gen_s99_n9_b2", loader);
  expect_next_rand("gen_s99_n9_b2_genrand", &g);
}

TEST(DataLoader, PassCutShortLeavesTorchsState) {
  manual_seed(123);
  DataLoader loader(arange_dataset(10), {.batch_size = 2, .shuffle = true});
  for (int e = 0; e < 2; ++e) {
    const std::string pre = "partial_e" + std::to_string(e);
    {
      DataLoader::Iterator it = loader.iter();
      std::optional<Example> first = it.next();
      ASSERT_TRUE(first.has_value());
      EXPECT_EQ(first->at(0).to_vector<int64_t>(), fixture_ints(pre + "_first"));
    }
    expect_next_rand(pre + "_rand");
  }
}

TEST(DataLoader, WorkersGiveTheSameOrderAndState) {
  manual_seed(123);
  DataLoader loader(arange_dataset(10), {.batch_size = 3, .shuffle = true, .num_workers = 2});
  expect_passes("workers_s123_n10_b3", loader);
  // the same as torch's num_workers = 0 passes, which the fixture holds too
  EXPECT_EQ(fixture_ints("workers_s123_n10_b3_e0_idx"), fixture_ints("shuffle_s123_n10_b3_d0_e0_idx"));
}

// A dataset whose get() records which thread ran it, and fails at one index.
class ProbeDataset : public Dataset {
 public:
  explicit ProbeDataset(int64_t n, int64_t bad = -1) : n_(n), bad_(bad) {}
  int64_t size() const override { return n_; }
  Example get(int64_t i) const override {
    if (std::this_thread::get_id() != main_) off_main_ = true;
    if (i == bad_) fail("ProbeDataset", "bad sample ", i);
    return {full({2}, i)};
  }
  mutable std::atomic<bool> off_main_{false};

 private:
  int64_t n_, bad_;
  std::thread::id main_ = std::this_thread::get_id();
};

TEST(DataLoader, WorkersFetchOffTheCallingThreadInOrder) {
  auto ds = std::make_shared<ProbeDataset>(50);
  manual_seed(3);
  DataLoader threaded(ds, {.batch_size = 4, .shuffle = true, .num_workers = 3, .prefetch_factor = 1});
  const Pass a = run_pass(threaded);
  const std::vector<float> after_threaded = rand({3}).to_vector<float>();
  EXPECT_TRUE(ds->off_main_.load());
  manual_seed(3);
  DataLoader serial(ds, {.batch_size = 4, .shuffle = true});
  const Pass b = run_pass(serial);
  EXPECT_EQ(a.sizes, b.sizes);
  EXPECT_EQ(a.idx, b.idx);
  EXPECT_EQ(rand({3}).to_vector<float>(), after_threaded);
}

TEST(DataLoader, WorkerErrorsReachTheCaller) {
  DataLoader loader(std::make_shared<ProbeDataset>(20, 13), {.batch_size = 2, .num_workers = 2});
  expect_error([&] { run_pass(loader); }, {"ProbeDataset", "bad sample 13"});
  // and a pass abandoned with batches in flight shuts its workers down
  DataLoader::Iterator it = loader.iter();
  EXPECT_TRUE(it.next().has_value());
}

TEST(DataLoader, CollateStacksEveryFieldKeepingDtypes) {
  auto ds = std::make_shared<TensorDataset>(
      std::vector<Tensor>{rand({5, 3}), arange(5), full({5, 2, 2}, 1.5, kFloat64)});
  DataLoader loader(ds, {.batch_size = 2});
  std::vector<Shape> shapes0;
  for (const Example& b : loader) {
    ASSERT_EQ(b.size(), 3u);
    shapes0.push_back(b[0].shape());
    EXPECT_EQ(b[0].dtype(), kFloat32);
    EXPECT_EQ(b[1].dtype(), kInt64);
    EXPECT_EQ(b[2].dtype(), kFloat64);
    EXPECT_EQ(b[2].shape(), (Shape{b[0].size(0), 2, 2}));
  }
  EXPECT_EQ(shapes0, (std::vector<Shape>{{2, 3}, {2, 3}, {1, 3}}));
  // field values are the dataset's rows
  Example first = *loader.begin();
  EXPECT_EQ(first[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(first[0].to_vector<float>(), ds->tensors()[0].slice(0, 0, 2).to_vector<float>());
}

TEST(DataLoader, CustomCollateAndBatchSampler) {
  auto ds = arange_dataset(10);
  auto batches = std::make_shared<BatchSampler>(std::make_shared<SequentialSampler>(10), 3, true);
  DataLoader loader(ds, {.batch_sampler = batches, .collate_fn = [](const std::vector<Example>& s) {
                           return Example{full({1}, static_cast<int64_t>(s.size()))};
                         }});
  EXPECT_EQ(loader.size(), 3);
  Pass p = run_pass(loader);
  EXPECT_EQ(p.idx, (std::vector<int64_t>{3, 3, 3}));
}

TEST(DataLoader, DefaultCollateRejectsRaggedSamples) {
  expect_error([] { default_collate({{arange(3)}, {arange(4)}}); }, {"stack"});
  expect_error(
      [] {
        default_collate({{arange(3)}, {arange(3), arange(3)}});
      },
      {"default_collate", "each element in list of batch should be of equal size"});
}

TEST(DataLoader, RejectsTorchsBadOptions) {
  auto ds = arange_dataset(10);
  expect_error([&] { DataLoader(ds, {.batch_size = 0}); },
               {"batch_size should be a positive integer value, but got batch_size=0"});
  expect_error([&] { DataLoader(ds, {.batch_size = -2}); }, {"batch_size=-2"});
  expect_error([&] { DataLoader(arange_dataset(0), {.shuffle = true}); },
               {"num_samples should be a positive integer value, but got num_samples=0"});
  auto sampler = std::make_shared<SequentialSampler>(10);
  expect_error([&] { DataLoader(ds, {.shuffle = true, .sampler = sampler}); },
               {"sampler option is mutually exclusive with shuffle"});
  auto bs = std::make_shared<BatchSampler>(sampler, 2, false);
  expect_error(
      [&] { DataLoader(ds, {.batch_size = 2, .batch_sampler = bs}); },
      {"batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"});
  expect_error([&] { DataLoader(ds, {.batch_sampler = bs, .drop_last = true}); }, {"batch_sampler option"});
  expect_error([&] { DataLoader(ds, {.num_workers = -1}); }, {"num_workers option should be non-negative"});
  expect_error([&] { DataLoader(ds, {.prefetch_factor = 4}); },
               {"prefetch_factor option could only be specified"});
  expect_error([&] { DataLoader(nullptr); }, {"DataLoader", "null"});
}

TEST(DataLoader, EmptyDatasetWithoutShuffleYieldsNothing) {
  manual_seed(9);
  DataLoader loader(arange_dataset(0), {.batch_size = 2});
  EXPECT_EQ(loader.size(), 0);
  EXPECT_TRUE(run_pass(loader).idx.empty());
}

// ---- samplers

std::vector<int64_t> drain(const Sampler<int64_t>& s) {
  std::vector<int64_t> out;
  auto it = s.iter();
  while (auto i = it->next()) out.push_back(*i);
  return out;
}

TEST(Samplers, NumSamplesBeyondTheDatasetWithoutReplacement) {
  // torch 1.13 allows it: num_samples // n permutations, then part of one more
  manual_seed(3);
  RandomSampler s(10, {.num_samples = 25});
  EXPECT_EQ(s.size(), 25);
  EXPECT_EQ(drain(s), fixture_ints("sampler_noreplace_25"));
  expect_next_rand("sampler_noreplace_25_rand");
}

TEST(Samplers, WithReplacementDrawsInChunksOf32) {
  Generator g(4);
  RandomSampler s(10, {.replacement = true, .num_samples = 70, .generator = &g});
  EXPECT_EQ(drain(s), fixture_ints("sampler_replace_70"));
  expect_next_rand("sampler_replace_70_genrand", &g);
}

TEST(Samplers, AGivenGeneratorAdvancesAcrossPasses) {
  Generator g(4);
  RandomSampler a(10, {.generator = &g}), b(10, {.generator = &g});
  std::vector<int64_t> both = drain(a);
  const std::vector<int64_t> second = drain(b);
  both.insert(both.end(), second.begin(), second.end());
  EXPECT_EQ(both, fixture_ints("sampler_gen_two_passes"));
  expect_next_rand("sampler_gen_two_passes_genrand", &g);
}

TEST(Samplers, BatchSamplerOverRandomSampler) {
  manual_seed(8);
  BatchSampler bs(std::make_shared<RandomSampler>(10), 4, false);
  std::vector<int64_t> idx, sizes;
  auto it = bs.iter();
  while (auto b = it->next()) {
    idx.insert(idx.end(), b->begin(), b->end());
    sizes.push_back(static_cast<int64_t>(b->size()));
  }
  EXPECT_EQ(idx, fixture_ints("batch_sampler_idx"));
  EXPECT_EQ(sizes, fixture_ints("batch_sampler_sizes"));
  EXPECT_EQ(bs.size(), 3);
  EXPECT_EQ(BatchSampler(std::make_shared<SequentialSampler>(10), 4, true).size(), 2);
}

TEST(Samplers, RejectBadArguments) {
  expect_error([] { RandomSampler(10, {.num_samples = 0}); },
               {"num_samples should be a positive integer value"});
  expect_error([] { RandomSampler(0, {.num_samples = 3}); }, {"RandomSampler", "empty"});
  expect_error([] { SequentialSampler(-1); }, {"SequentialSampler", "-1"});
  expect_error([] { BatchSampler(std::make_shared<SequentialSampler>(3), 0, false); },
               {"batch_size should be a positive integer value, but got batch_size=0"});
}

// ---- datasets

void expect_split(const std::string& name, const std::vector<std::shared_ptr<Subset>>& parts, Generator& g) {
  std::vector<int64_t> sizes, idx;
  for (const auto& p : parts) {
    sizes.push_back(p->size());
    idx.insert(idx.end(), p->indices().begin(), p->indices().end());
  }
  EXPECT_EQ(sizes, fixture_ints(name + "_sizes")) << name;
  EXPECT_EQ(idx, fixture_ints(name + "_idx")) << name;
  expect_next_rand(name + "_genrand", &g);
}

TEST(RandomSplit, MatchesTorch) {
  {
    Generator g(42);
    expect_split("split_10_3_7", random_split(arange_dataset(10), std::vector<int64_t>{3, 7}, &g), g);
  }
  {
    Generator g(42);
    expect_split("split_30_frac", random_split(arange_dataset(30), std::vector<double>{0.3, 0.3, 0.4}, &g),
                 g);
  }
  {
    Generator g(1);
    expect_split("split_7_half", random_split(arange_dataset(7), std::vector<double>{0.5, 0.5}, &g), g);
  }
  {
    Generator g(0);
    expect_split("split_5_int_one", random_split(arange_dataset(5), std::vector<int64_t>{1}, &g), g);
  }
}

TEST(RandomSplit, SubsetsReadTheirIndices) {
  Generator g(42);
  auto parts = random_split(arange_dataset(10), std::vector<int64_t>{3, 7}, &g);
  for (int64_t i = 0; i < parts[1]->size(); ++i)
    EXPECT_EQ(parts[1]->get(i).at(0).item<int64_t>(), parts[1]->indices()[static_cast<std::size_t>(i)]);
}

TEST(RandomSplit, RejectsBadLengths) {
  expect_error(
      [] {
        random_split(arange_dataset(10), std::vector<int64_t>{3, 6});
      },
      {"random_split", "Sum of input lengths (9) does not equal the length of the input dataset (10)"});
  expect_error(
      [] {
        random_split(arange_dataset(10), std::vector<double>{1.5, -0.5});
      },
      {"random_split", "Fraction at index 0 is not between 0 and 1"});
  expect_error(
      [] {
        random_split(arange_dataset(10), std::vector<double>{2.5, 7.5});
      },
      {"random_split", "2.5"});
}

TEST(Datasets, TensorDatasetAndSubsetChecks) {
  expect_error(
      [] {
        TensorDataset({arange(3), arange(4)});
      },
      {"TensorDataset", "Size mismatch between tensors"});
  expect_error([] { TensorDataset(std::vector<Tensor>{}); }, {"TensorDataset", "at least one"});
  TensorDataset ds({arange(3)});
  expect_error([&] { ds.get(3); }, {"TensorDataset", "index 3", "size 3"});
  expect_error([&] { Subset(arange_dataset(3), {0, 5}); }, {"Subset", "index 5"});
}

}  // namespace
}  // namespace xgrad::data
