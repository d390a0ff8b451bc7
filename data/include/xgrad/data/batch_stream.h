// xgrad/data/batch_stream.h: the batches of a DataLoader, one pass after another without end,
// at a position that can be saved and restored (what torchdata's StatefulDataLoader keeps in
// its state_dict), so a resumed training run takes the batches the uninterrupted run takes.
//
//   data::BatchStream batches(dataset, {.batch_size = 16, .shuffle = true, .drop_last = true}, seed);
//   Example b = batches.next();                       // into the next pass when one ends
//   data::BatchStream::Position p = batches.position();   // save p.epoch, p.batch, p.rng
//   ...
//   batches.seek(p);                                  // a new process: the same next batch
//
// The stream owns the generator its loader draws from (options.generator is ignored), seeded
// with `seed`. A position is the pass (epoch), the batches taken from it, and the generator's
// state when that pass began: seek() restores the state, begins the pass and takes `batch`
// batches (loading them), so nothing but the generator's state needs saving.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "xgrad/data/dataloader.h"
#include "xgrad/random.h"

namespace xgrad::data {

class BatchStream {
 public:
  struct Position {
    int64_t epoch = 0;
    int64_t batch = 0;         // batches taken from the epoch's pass
    std::vector<uint8_t> rng;  // the generator's state when the pass began (Generator::get_state)
  };

  BatchStream(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, uint64_t seed);

  Example next();
  Position position() const { return pos_; }
  // Throws xgrad::Error, changing nothing, when p.batch is past a pass's batches or p.rng is
  // not a generator state.
  void seek(const Position& p);
  void rewind();  // to the first pass, as constructed
  const DataLoader& loader() const { return loader_; }

 private:
  void begin_pass(const std::vector<uint8_t>& rng, int64_t batches);
  std::unique_ptr<Generator> gen_;  // the loader keeps its address
  DataLoader loader_;
  std::optional<DataLoader::Iterator> pass_;
  Position pos_;
  std::vector<uint8_t> first_rng_;  // the generator's state as seeded
};

}  // namespace xgrad::data
