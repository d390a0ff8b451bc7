// dataset.cpp: TensorDataset, Subset and random_split (xgrad/data/dataset.h).
// reference: torch/utils/data/dataset.py (torch 1.13).
#include "xgrad/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::data {

namespace {
void check_index(const char* op, int64_t index, int64_t size) {
  if (index < 0 || index >= size) fail(op, "index ", index, " is out of range for a dataset of size ", size);
}
}  // namespace

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  if (tensors_.empty()) fail("TensorDataset", "expects at least one tensor");
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].defined()) fail("TensorDataset", "tensor ", i, " is undefined");
    if (tensors_[i].dim() == 0) fail("TensorDataset", "tensor ", i, " is a scalar; samples index dim 0");
    if (tensors_[i].size(0) != tensors_[0].size(0))
      fail("TensorDataset", "Size mismatch between tensors: tensor 0 has shape ", tensors_[0].shape(),
           ", tensor ", i, " has shape ", tensors_[i].shape());
  }
}

int64_t TensorDataset::size() const { return tensors_[0].size(0); }

Example TensorDataset::get(int64_t index) const {
  check_index("TensorDataset", index, size());
  Example sample;
  sample.reserve(tensors_.size());
  for (const Tensor& t : tensors_) sample.push_back(t.select(0, index));
  return sample;
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  if (!dataset_) fail("Subset", "dataset is null");
  const int64_t n = dataset_->size();
  for (int64_t i : indices_) check_index("Subset", i, n);
}

Example Subset::get(int64_t index) const {
  check_index("Subset", index, size());
  return dataset_->get(indices_[index]);
}

// reference: torch/utils/data/dataset.py, random_split.
namespace {

// Fractions summing to 1 (math.isclose, relative tolerance 1e-9): floor(n * f) each, then the
// remainder handed out one by one, round-robin from the first split.
std::vector<int64_t> lengths_of_fractions(int64_t n, const std::vector<double>& fractions) {
  std::vector<int64_t> lengths;
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    if (!(fractions[i] >= 0.0 && fractions[i] <= 1.0))
      fail("random_split", "Fraction at index ", i, " is not between 0 and 1 (", fractions[i], ")");
    lengths.push_back(static_cast<int64_t>(std::floor(static_cast<double>(n) * fractions[i])));
  }
  const int64_t remainder = n - std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  for (int64_t i = 0; i < remainder; ++i) ++lengths[static_cast<std::size_t>(i) % lengths.size()];
  return lengths;
}

bool sums_to_one(const std::vector<double>& fractions) {
  const double sum = std::accumulate(fractions.begin(), fractions.end(), 0.0);
  return std::abs(sum - 1.0) <= 1e-9 * std::max(std::abs(sum), 1.0) && sum <= 1.0;
}

// One randperm(sum(lengths)) from gen, cut into consecutive pieces.
std::vector<std::shared_ptr<Subset>> split_by_lengths(const std::shared_ptr<const Dataset>& dataset,
                                                      const std::vector<int64_t>& lengths, Generator* gen) {
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 0) fail("random_split", "length at index ", i, " is negative: ", lengths[i]);
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  if (total != dataset->size())
    fail("random_split", "Sum of input lengths (", total,
         ") does not equal the length of the input dataset (", dataset->size(), ")!");
  const std::vector<int64_t> perm = randperm(total, gen).to_vector<int64_t>();
  std::vector<std::shared_ptr<Subset>> out;
  int64_t offset = 0;
  for (int64_t length : lengths) {
    out.push_back(std::make_shared<Subset>(
        dataset, std::vector<int64_t>(perm.begin() + offset, perm.begin() + offset + length)));
    offset += length;
  }
  return out;
}

}  // namespace

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<int64_t>& lengths, Generator* gen) {
  if (!dataset) fail("random_split", "dataset is null");
  // as torch, integer lengths that sum to 1 are taken as fractions ([1] means "everything")
  if (std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) == 1)
    return split_by_lengths(
        dataset, lengths_of_fractions(dataset->size(), std::vector<double>(lengths.begin(), lengths.end())),
        gen);
  return split_by_lengths(dataset, lengths, gen);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<const Dataset> dataset,
                                                  const std::vector<double>& fractions, Generator* gen) {
  if (!dataset) fail("random_split", "dataset is null");
  if (sums_to_one(fractions))
    return split_by_lengths(dataset, lengths_of_fractions(dataset->size(), fractions), gen);
  std::vector<int64_t> lengths;  // otherwise they are lengths, and must be whole numbers
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    if (fractions[i] != std::floor(fractions[i]))
      fail("random_split", "length at index ", i, " is ", fractions[i],
           ": fractions must sum to 1, lengths must be whole numbers");
    lengths.push_back(static_cast<int64_t>(fractions[i]));
  }
  return split_by_lengths(dataset, lengths, gen);
}

}  // namespace xgrad::data
