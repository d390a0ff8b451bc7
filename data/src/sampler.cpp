// sampler.cpp: SequentialSampler, RandomSampler, BatchSampler (xgrad/data/sampler.h).
// reference: torch/utils/data/sampler.py (torch 1.13). Each iterator is a state machine that
// draws at the points where torch's generator function would.
#include "xgrad/data/sampler.h"

#include <algorithm>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::data {

// reference: aten/src/ATen/native/cpu/DistributionTemplates.h, random_kernel with
// uniform_int_distribution<int64_t>: random64() % (INT64_MAX + 1).
int64_t draw_seed(Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  return static_cast<int64_t>(g.random64() % (uint64_t{1} << 63));
}

// ------------------------------------------------------------------ SequentialSampler

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  if (n < 0) fail("SequentialSampler", "expects a dataset size >= 0, got ", n);
}

std::unique_ptr<SamplerIterator<int64_t>> SequentialSampler::iter() const {
  struct It : SamplerIterator<int64_t> {
    int64_t i = 0, n = 0;
    std::optional<int64_t> next() override { return i < n ? std::optional<int64_t>(i++) : std::nullopt; }
  };
  auto it = std::make_unique<It>();
  it->n = n_;
  return it;
}

// ------------------------------------------------------------------ RandomSampler

RandomSampler::RandomSampler(int64_t n, RandomSamplerOptions options)
    : n_(n),
      replacement_(options.replacement),
      num_samples_(options.num_samples.value_or(n)),
      generator_(options.generator) {
  if (num_samples_ <= 0)
    fail("RandomSampler",
         "num_samples should be a positive integer value, but got num_samples=", num_samples_);
  if (n_ <= 0) fail("RandomSampler", "cannot draw ", num_samples_, " samples from an empty dataset");
}

namespace {

// Yields the indices of a sequence of chunks, drawing each chunk when the previous one is used
// up: `full` chunks of `size`, then one of `last` (drawn even when last == 0, as torch does).
class ChunkedIterator : public SamplerIterator<int64_t> {
 public:
  ChunkedIterator(int64_t full, int64_t size, int64_t last) : full_(full), size_(size), last_(last) {}

  std::optional<int64_t> next() final {
    while (pos_ == limit_) {
      if (drawn_ > full_) return std::nullopt;
      if (!started_) start();
      started_ = true;
      limit_ = drawn_ < full_ ? size_ : last_;
      buf_ = draw(limit_);
      ++drawn_;
      pos_ = 0;
    }
    return buf_[static_cast<std::size_t>(pos_++)];
  }

 protected:
  virtual void start() {}  // at the first next(): the seed draw
  // the next chunk: at least `size` indices, of which the first `size` are yielded
  virtual std::vector<int64_t> draw(int64_t size) = 0;

 private:
  int64_t full_, size_, last_;
  int64_t drawn_ = 0, pos_ = 0, limit_ = 0;
  bool started_ = false;
  std::vector<int64_t> buf_;
};

}  // namespace

// reference: sampler.py, RandomSampler.__iter__: without a generator, a seed from the default
// generator and a fresh Generator; then randperm(n) per num_samples // n, and the first
// num_samples % n of one more; with replacement, randint(0, n, (32,)) per num_samples // 32
// and randint(0, n, (num_samples % 32,)).
std::unique_ptr<SamplerIterator<int64_t>> RandomSampler::iter() const {
  struct It : ChunkedIterator {
    It(const RandomSampler& s)
        : ChunkedIterator(s.replacement_ ? s.num_samples_ / 32 : s.num_samples_ / s.n_,
                          s.replacement_ ? 32 : s.n_,
                          s.replacement_ ? s.num_samples_ % 32 : s.num_samples_ % s.n_),
          n(s.n_),
          replacement(s.replacement_),
          gen(s.generator_) {}
    void start() override {
      if (gen == nullptr) {
        own = std::make_unique<Generator>(static_cast<uint64_t>(draw_seed(nullptr)));
        gen = own.get();
      }
    }
    std::vector<int64_t> draw(int64_t size) override {
      if (!replacement) return randperm(n, gen).to_vector<int64_t>();  // all n drawn, `size` used
      std::vector<int64_t> out(static_cast<std::size_t>(size));
      gen->random_int(out.data(), size, 0, n);  // torch.randint(high=n, size=(size,))
      return out;
    }
    int64_t n;
    bool replacement;
    Generator* gen;
    std::unique_ptr<Generator> own;
  };
  return std::make_unique<It>(*this);
}

// ------------------------------------------------------------------ BatchSampler

BatchSampler::BatchSampler(std::shared_ptr<const Sampler<int64_t>> sampler, int64_t batch_size,
                           bool drop_last)
    : sampler_(std::move(sampler)), batch_size_(batch_size), drop_last_(drop_last) {
  if (batch_size_ <= 0)
    fail("BatchSampler", "batch_size should be a positive integer value, but got batch_size=", batch_size_);
  if (!sampler_) fail("BatchSampler", "sampler is null");
}

int64_t BatchSampler::size() const {
  const int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

// reference: sampler.py, BatchSampler.__iter__: a batch is the next batch_size indices; at the
// end, a partial batch is yielded unless drop_last.
std::unique_ptr<SamplerIterator<BatchIndices>> BatchSampler::iter() const {
  struct It : SamplerIterator<BatchIndices> {
    std::unique_ptr<SamplerIterator<int64_t>> indices;
    int64_t batch_size = 0;
    bool drop_last = false, done = false;
    std::optional<BatchIndices> next() override {
      if (done) return std::nullopt;
      BatchIndices batch;
      batch.reserve(static_cast<std::size_t>(batch_size));
      while (static_cast<int64_t>(batch.size()) < batch_size) {
        std::optional<int64_t> i = indices->next();
        if (!i) {
          done = true;
          if (batch.empty() || drop_last) return std::nullopt;
          return batch;
        }
        batch.push_back(*i);
      }
      return batch;
    }
  };
  auto it = std::make_unique<It>();
  it->indices = sampler_->iter();
  it->batch_size = batch_size_;
  it->drop_last = drop_last_;
  return it;
}

}  // namespace xgrad::data
