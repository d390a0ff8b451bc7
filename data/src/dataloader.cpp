// dataloader.cpp: DataLoader, its iterators and default_collate (xgrad/data/dataloader.h).
// reference: torch/utils/data/dataloader.py (DataLoader.__init__, _BaseDataLoaderIter,
// _MultiProcessingDataLoaderIter's prefetching) and _utils/collate.py (torch 1.13).
#include "xgrad/data/dataloader.h"

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::data {

// reference: _utils/collate.py, default_collate: a batch of tuples becomes a tuple of batches
// (after checking every sample has as many fields), each field torch.stack(batch, 0).
Example default_collate(const std::vector<Example>& samples) {
  if (samples.empty()) fail("default_collate", "expects at least one sample");
  const std::size_t fields = samples[0].size();
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (samples[i].size() != fields)
      fail("default_collate", "each element in list of batch should be of equal size: sample 0 has ", fields,
           " fields, sample ", i, " has ", samples[i].size());
  Example batch;
  batch.reserve(fields);
  std::vector<Tensor> column(samples.size());
  for (std::size_t j = 0; j < fields; ++j) {
    for (std::size_t i = 0; i < samples.size(); ++i) column[i] = samples[i][j];
    batch.push_back(stack(column, 0));  // (batch, ...field shape)
  }
  return batch;
}

// reference: DataLoader.__init__: its checks in its order, then the default samplers.
DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions o)
    : dataset_(std::move(dataset)),
      collate_fn_(o.collate_fn ? std::move(o.collate_fn) : CollateFn(default_collate)),
      batch_size_(o.batch_size),
      drop_last_(o.drop_last),
      num_workers_(o.num_workers),
      prefetch_factor_(o.prefetch_factor.value_or(2)),
      generator_(o.generator) {
  if (!dataset_) fail("DataLoader", "dataset is null");
  if (num_workers_ < 0)
    fail("DataLoader",
         "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.");
  if (num_workers_ == 0 && o.prefetch_factor && *o.prefetch_factor != 2)
    fail("DataLoader",
         "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to "
         "enable multiprocessing.");
  if (prefetch_factor_ <= 0) fail("DataLoader", "prefetch_factor should be positive, got ", prefetch_factor_);
  if (o.sampler && o.shuffle) fail("DataLoader", "sampler option is mutually exclusive with shuffle");
  if (o.batch_sampler) {
    if (batch_size_ != 1 || o.shuffle || o.sampler || drop_last_)
      fail("DataLoader",
           "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last");
    drop_last_ = false;
  }
  sampler_ = o.sampler;
  if (!sampler_) {
    if (o.shuffle) {
      RandomSamplerOptions shuffled;
      shuffled.generator = generator_;
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), shuffled);
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    }
  }
  batch_sampler_ =
      o.batch_sampler ? o.batch_sampler : std::make_shared<BatchSampler>(sampler_, batch_size_, drop_last_);
}

int64_t DataLoader::size() const { return batch_sampler_->size(); }

// ------------------------------------------------------------------ one pass

// The pass's batch-index iterator and, with workers, the threads and the batches in flight.
// Indices are always drawn here, on the thread that calls next(); the workers only fetch
// samples and collate them.
struct DataLoader::Iterator::State {
  std::shared_ptr<const Dataset> dataset;
  CollateFn collate;
  std::unique_ptr<SamplerIterator<BatchIndices>> batches;
  int64_t base_seed = 0;
  int64_t max_in_flight = 0;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<std::packaged_task<Example()>> tasks;  // queued, not yet taken by a worker
  std::deque<std::future<Example>> in_flight;       // in order; the front is the next batch
  bool stopping = false;
  std::vector<std::thread> workers;

  Example fetch(const BatchIndices& indices) const {
    std::vector<Example> samples;
    samples.reserve(indices.size());
    for (int64_t i : indices) samples.push_back(dataset->get(i));
    return collate(samples);
  }

  // reference: _MultiProcessingDataLoaderIter._try_put_index: the next batch's indices go to
  // the workers while fewer than prefetch_factor * num_workers are outstanding.
  void try_put_index() {
    if (static_cast<int64_t>(in_flight.size()) >= max_in_flight) return;
    std::optional<BatchIndices> indices = batches->next();
    if (!indices) return;
    std::packaged_task<Example()> task([this, idx = std::move(*indices)] { return fetch(idx); });
    in_flight.push_back(task.get_future());
    {
      std::lock_guard<std::mutex> lock(mutex);
      tasks.push_back(std::move(task));
    }
    wake.notify_one();
  }

  void work() {
    for (;;) {
      std::packaged_task<Example()> task;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || !tasks.empty(); });
        if (stopping) return;
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();  // an exception is stored in the future and rethrown by next()
    }
  }

  ~State() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread& t : workers) t.join();
  }
};

// reference: _BaseDataLoaderIter.__init__: iter(batch_sampler) (lazy: no draw yet), then
// _base_seed = one int64 random_() from loader.generator, with or without workers. With
// workers, the prefetch then takes the first batches' indices (and the sampler's draws) now.
DataLoader::Iterator DataLoader::iter() const {
  auto s = std::make_unique<Iterator::State>();
  s->dataset = dataset_;
  s->collate = collate_fn_;
  s->batches = batch_sampler_->iter();
  s->base_seed = draw_seed(generator_);
  if (num_workers_ > 0) {
    s->max_in_flight = prefetch_factor_ * num_workers_;
    Iterator::State* raw = s.get();
    for (int64_t w = 0; w < num_workers_; ++w) s->workers.emplace_back([raw] { raw->work(); });
    for (int64_t k = 0; k < s->max_in_flight; ++k) s->try_put_index();
  }
  return Iterator(std::move(s));
}

DataLoader::Iterator::Iterator(std::unique_ptr<State> state) : state_(std::move(state)) {}
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

int64_t DataLoader::Iterator::base_seed() const { return state_->base_seed; }

std::optional<Example> DataLoader::Iterator::next() {
  State& s = *state_;
  if (s.workers.empty()) {
    std::optional<BatchIndices> indices = s.batches->next();
    if (!indices) return std::nullopt;
    return s.fetch(*indices);
  }
  if (s.in_flight.empty()) return std::nullopt;
  std::future<Example> front = std::move(s.in_flight.front());
  s.in_flight.pop_front();
  Example batch = front.get();
  s.try_put_index();  // as _process_data: refill after each batch received
  return batch;
}

DataLoader::RangeIterator DataLoader::begin() const { return RangeIterator(iter()); }

DataLoader::RangeIterator::RangeIterator(Iterator it) : it_(std::move(it)), current_(it_.next()) {}

DataLoader::RangeIterator& DataLoader::RangeIterator::operator++() {
  current_ = it_.next();
  return *this;
}

}  // namespace xgrad::data
