// xgrad/data/dataloader.h: torch.utils.data.DataLoader for map-style datasets, with torch's
// default collate.
//
//   auto ds = std::make_shared<data::TensorDataset>(std::vector<Tensor>{inputs, targets});
//   data::DataLoader loader(ds, {.batch_size = 2, .shuffle = true, .drop_last = true});
//   for (const data::Example& batch : loader) {   // batch[0]: (2, ...), batch[1]: (2, ...)
//     Tensor loss = cross_entropy(model(batch[0]).flatten(0, 1), batch[1].flatten());
//   }
//
// Random numbers are drawn where torch draws them, so `manual_seed(123)` then the same loop
// gives torch's batches and leaves the default generator (dropout masks, sampling) in torch's
// state. Each pass (iter(), or the begin() of a range-for) draws the iterator's base seed,
// one int64 random_() from `generator` or the default generator, even without workers; the
// RandomSampler that shuffle = true makes draws its own seed from the same generator on the
// pass's first batch (sampler.h). A pass cut short (a break) skips the draws its rest would
// have made (with a `generator`, the sampler's closing randperm), as torch's does.
//
// num_workers > 0 loads batches on that many threads, keeping up to prefetch_factor *
// num_workers batches in flight, in the same order and with the same draws as num_workers = 0
// (the indices are drawn on the calling thread, as torch's main process does). Then the
// dataset's get() and the collate function run on the workers: they must be safe to call
// concurrently and must not draw from the default generator.
//
// Options are torch's, with torch's checks (xgrad::Error with torch's ValueError message):
// sampler and shuffle are exclusive; batch_sampler excludes batch_size != 1, shuffle, sampler
// and drop_last; batch_size must be positive; num_workers >= 0; prefetch_factor only with
// workers. (torch's batch_size=None, iterable-style datasets, pin_memory, timeout and
// persistent_workers have no counterpart here.)
#pragma once
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "xgrad/data/dataset.h"
#include "xgrad/data/sampler.h"
#include "xgrad/random.h"

namespace xgrad::data {

// Makes a batch from the samples of one batch (torch's collate_fn).
using CollateFn = std::function<Example(const std::vector<Example>& samples)>;

// torch's default_collate for tuples of tensors: field j of the batch is stack() of field j
// of every sample (a new first dimension, the dtype kept). xgrad::Error when the samples have
// different numbers of fields, or a field's shapes or dtypes differ.
Example default_collate(const std::vector<Example>& samples);

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;                               // a RandomSampler over the dataset (with `generator`)
  std::shared_ptr<const Sampler<int64_t>> sampler{};  // {}: designated initializers may omit it
  std::shared_ptr<const Sampler<BatchIndices>> batch_sampler{};
  int64_t num_workers = 0;
  CollateFn collate_fn{};  // empty: default_collate
  bool drop_last = false;
  Generator* generator = nullptr;            // not owned; default: the default generator
  std::optional<int64_t> prefetch_factor{};  // batches in flight per worker; default 2
};

class DataLoader {
 public:
  class Iterator;
  class RangeIterator;

  explicit DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  int64_t size() const;  // len(loader): batches in one pass
  // One pass, as iter(loader): draws the base seed now; next() gives the batches, then
  // std::nullopt.
  Iterator iter() const;
  RangeIterator begin() const;  // iter() and its first next()
  std::default_sentinel_t end() const { return {}; }

  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  const std::shared_ptr<const Sampler<int64_t>>& sampler() const { return sampler_; }
  const std::shared_ptr<const Sampler<BatchIndices>>& batch_sampler() const { return batch_sampler_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  int64_t num_workers() const { return num_workers_; }
  Generator* generator() const { return generator_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::shared_ptr<const Sampler<int64_t>> sampler_;
  std::shared_ptr<const Sampler<BatchIndices>> batch_sampler_;
  CollateFn collate_fn_;
  int64_t batch_size_;
  bool drop_last_;
  int64_t num_workers_;
  int64_t prefetch_factor_;
  Generator* generator_;
};

class DataLoader::Iterator {
 public:
  struct State;
  explicit Iterator(std::unique_ptr<State> state);
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  ~Iterator();  // stops and joins the workers

  std::optional<Example> next();
  int64_t base_seed() const;  // the int64 this pass drew (torch's _base_seed)

 private:
  std::unique_ptr<State> state_;
};

// What a range-for walks: an input iterator over one pass.
class DataLoader::RangeIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Example;
  using difference_type = std::ptrdiff_t;
  using reference = const Example&;
  using pointer = const Example*;

  explicit RangeIterator(Iterator it);
  reference operator*() const { return *current_; }
  pointer operator->() const { return &*current_; }
  RangeIterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(std::default_sentinel_t) const { return !current_.has_value(); }

 private:
  Iterator it_;
  std::optional<Example> current_;
};

}  // namespace xgrad::data
