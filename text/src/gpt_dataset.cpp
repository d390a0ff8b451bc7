// gpt_dataset.cpp: GPTDataset and create_dataloader (xgrad/text/gpt_dataset.h).
// reference: rasbt/LLMs-from-scratch, ch02, GPTDatasetV1 and create_dataloader_v1.
#include "xgrad/text/gpt_dataset.h"

#include <memory>

#include "xgrad/error.h"
#include "xgrad/ops.h"

namespace xgrad::text {

GPTDataset::GPTDataset(const std::vector<int64_t>& token_ids, int64_t max_length, int64_t stride)
    : max_length_(max_length), stride_(stride) {
  if (max_length <= 0) fail("GPTDataset", "max_length must be positive, got ", max_length);
  if (stride <= 0) fail("GPTDataset", "stride must be positive, got ", stride);
  const int64_t n = static_cast<int64_t>(token_ids.size());
  ids_ = from_vector(token_ids, {n});
  // len(range(0, n - max_length, stride))
  windows_ = n - max_length > 0 ? (n - max_length + stride - 1) / stride : 0;
}

GPTDataset::GPTDataset(std::string_view txt, const Tokenizer& tokenizer, int64_t max_length, int64_t stride)
    : GPTDataset(tokenizer.encode(txt), max_length, stride) {}

data::Example GPTDataset::get(int64_t index) const {
  if (index < 0 || index >= windows_)
    fail("GPTDataset", "index ", index, " is out of range for a dataset of size ", windows_);
  const int64_t start = index * stride_;
  return {ids_.slice(0, start, start + max_length_),           // input_chunk
          ids_.slice(0, start + 1, start + max_length_ + 1)};  // target_chunk
}

data::DataLoader create_dataloader(std::string_view txt, const Tokenizer& tokenizer, GPTLoaderOptions o) {
  auto dataset = std::make_shared<GPTDataset>(txt, tokenizer, o.max_length, o.stride);
  data::DataLoaderOptions loader;
  loader.batch_size = o.batch_size;
  loader.shuffle = o.shuffle;
  loader.drop_last = o.drop_last;
  loader.num_workers = o.num_workers;
  return data::DataLoader(dataset, loader);
}

}  // namespace xgrad::text
