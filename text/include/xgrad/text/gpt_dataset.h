// xgrad/text/gpt_dataset.h: next-token windows over a token stream, the book's GPTDatasetV1
// and create_dataloader_v1 ("Build a Large Language Model (From Scratch)", chapter 2).
//
// Window k starts at token k * stride; its input is max_length tokens and its target the same
// window shifted by one. The windows are those of range(0, len(ids) - max_length, stride), so
// a text of exactly max_length + 1 tokens gives one window and a shorter one none.
//
//   auto tok = text::GPT2Tokenizer::from_files("data/gpt2/vocab.bpe", "data/gpt2/encoder.json");
//   data::DataLoader train = text::create_dataloader(
//       train_text, tok, {.batch_size = 2, .max_length = 256, .stride = 256});
//   for (const data::Example& b : train) { /* b[0], b[1]: (2, 256) int64 */ }
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "xgrad/data/dataloader.h"
#include "xgrad/data/dataset.h"
#include "xgrad/tensor.h"
#include "xgrad/text/tokenizer.h"

namespace xgrad::text {

class GPTDataset : public data::Dataset {
 public:
  // xgrad::Error unless max_length > 0 and stride > 0.
  GPTDataset(const std::vector<int64_t>& token_ids, int64_t max_length, int64_t stride);
  GPTDataset(std::string_view txt, const Tokenizer& tokenizer, int64_t max_length, int64_t stride);

  int64_t size() const override { return windows_; }
  // {input_ids, target_ids}: two int64 tensors of shape (max_length,)
  data::Example get(int64_t index) const override;

  int64_t max_length() const { return max_length_; }
  int64_t stride() const { return stride_; }
  const Tensor& token_ids() const { return ids_; }  // (tokens,) int64

 private:
  Tensor ids_;
  int64_t max_length_, stride_, windows_;
};

// create_dataloader_v1's arguments, with its defaults.
struct GPTLoaderOptions {
  int64_t batch_size = 4;
  int64_t max_length = 256;
  int64_t stride = 128;
  bool shuffle = true;
  bool drop_last = true;
  int64_t num_workers = 0;
};

// A DataLoader over GPTDataset(txt tokenized by `tokenizer`, max_length, stride), as the
// book's create_dataloader_v1.
data::DataLoader create_dataloader(std::string_view txt, const Tokenizer& tokenizer,
                                   GPTLoaderOptions options = {});

}  // namespace xgrad::text
