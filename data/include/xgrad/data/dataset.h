// xgrad/data/dataset.h: map-style datasets, as torch.utils.data's Dataset, TensorDataset,
// Subset and random_split.
//
// A dataset has a size and returns sample i as an Example: a tuple of tensors, what a torch
// dataset's __getitem__ returns (input, target, ...). The DataLoader (dataloader.h) calls get()
// from a worker thread when num_workers > 0, so get() must be safe to call concurrently
// (const, and not drawing from the default generator).
//
//   TensorDataset ds({inputs, targets});           // ds.get(i) = {inputs[i], targets[i]}
//   auto [train, val] = random_split(ds, {0.9, 0.1}, &g);
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "xgrad/random.h"
#include "xgrad/tensor.h"

namespace xgrad::data {

using Example = std::vector<Tensor>;  // one sample: (input, target, ...)

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;              // len(dataset)
  virtual Example get(int64_t index) const = 0;  // dataset[index], 0 <= index < size()
};

// Wraps tensors with the same first dimension; sample i is every tensor's row i.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(std::vector<Tensor> tensors);  // xgrad::Error on a size mismatch
  int64_t size() const override;
  Example get(int64_t index) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
};

// The samples of `dataset` at `indices`, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// torch.utils.data.random_split: one randperm(size) from `gen` (or the default generator),
// cut into consecutive pieces of the given lengths. Lengths must sum to the dataset's size;
// fractions summing to 1 become floor(size * fraction) each, the remainder handed out one by
// one from the first split on (as torch, integer lengths that sum to 1 count as fractions).
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths,
                                                  Generator* gen = nullptr);
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<double>& fractions,
                                                  Generator* gen = nullptr);

}  // namespace xgrad::data
