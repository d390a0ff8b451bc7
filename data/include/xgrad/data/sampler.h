// xgrad/data/sampler.h: the order in which a DataLoader visits a dataset, as
// torch.utils.data's SequentialSampler, RandomSampler and BatchSampler.
//
// A Sampler<T> has a length and makes iterators; an iterator yields T's until it returns
// std::nullopt. Sampler<> yields sample indices, Sampler<BatchIndices> lists of them
// (BatchSampler, or your own batch_sampler). Iterators are lazy like torch's generator
// functions: they draw random numbers exactly when torch's would, so the same seed gives
// the same order and leaves the generators in the same state:
//   - RandomSampler without a generator draws its seed (one int64 random_(), two mt19937
//     words) from the default generator on the iterator's first next(), then shuffles with a
//     fresh Generator seeded with it;
//   - without replacement it yields num_samples / n permutations, then takes one more
//     permutation for the num_samples % n remaining indices -- taken even when that
//     remainder is 0, once the iterator runs past the last full permutation (which
//     advances a given generator by n - 1 words);
//   - with replacement, randint draws in chunks of 32.
// Writing a sampler: derive from Sampler<int64_t>, return an iterator whose next() yields the
// indices.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "xgrad/random.h"

namespace xgrad::data {

using BatchIndices = std::vector<int64_t>;  // the sample indices of one batch

template <class T>
class SamplerIterator {
 public:
  virtual ~SamplerIterator() = default;
  virtual std::optional<T> next() = 0;  // std::nullopt at the end
};

template <class T = int64_t>
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t size() const = 0;  // len(sampler): how many T's an iterator yields
  virtual std::unique_ptr<SamplerIterator<T>> iter() const = 0;
};

// 0, 1, ..., n - 1.
class SequentialSampler : public Sampler<int64_t> {
 public:
  explicit SequentialSampler(int64_t n);  // n = len(data_source) >= 0
  int64_t size() const override { return n_; }
  std::unique_ptr<SamplerIterator<int64_t>> iter() const override;

 private:
  int64_t n_;
};

struct RandomSamplerOptions {
  bool replacement = false;
  std::optional<int64_t> num_samples;  // default: n
  Generator* generator = nullptr;      // not owned; default: a fresh seed from the default generator
};

// A random order of 0 .. n-1, or num_samples draws with replacement (torch's RandomSampler).
// xgrad::Error (torch's ValueError) unless num_samples > 0 (hence also for n = 0).
class RandomSampler : public Sampler<int64_t> {
 public:
  explicit RandomSampler(int64_t n, RandomSamplerOptions options = {});
  int64_t size() const override { return num_samples_; }
  std::unique_ptr<SamplerIterator<int64_t>> iter() const override;
  bool replacement() const { return replacement_; }
  Generator* generator() const { return generator_; }

 private:
  int64_t n_;
  bool replacement_;
  int64_t num_samples_;
  Generator* generator_;
};

// Groups another sampler's indices into batches of batch_size; the last one is shorter, or
// dropped with drop_last (torch's BatchSampler). xgrad::Error unless batch_size > 0.
class BatchSampler : public Sampler<BatchIndices> {
 public:
  BatchSampler(std::shared_ptr<const Sampler<int64_t>> sampler, int64_t batch_size, bool drop_last);
  int64_t size() const override;
  std::unique_ptr<SamplerIterator<BatchIndices>> iter() const override;
  const std::shared_ptr<const Sampler<int64_t>>& sampler() const { return sampler_; }
  int64_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }

 private:
  std::shared_ptr<const Sampler<int64_t>> sampler_;
  int64_t batch_size_;
  bool drop_last_;
};

// One torch.empty((), dtype=torch.int64).random_(generator=gen).item(): a seed in [0, 2^63)
// from two mt19937 words. What RandomSampler and each DataLoader iterator draw.
int64_t draw_seed(Generator* gen);

}  // namespace xgrad::data
