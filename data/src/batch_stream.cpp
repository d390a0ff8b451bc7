// data/src/batch_stream.cpp: see xgrad/data/batch_stream.h.
#include "xgrad/data/batch_stream.h"

#include <utility>

#include "xgrad/error.h"

namespace xgrad::data {

namespace {

DataLoaderOptions with_generator(DataLoaderOptions o, Generator* gen) {
  o.generator = gen;
  return o;
}

}  // namespace

BatchStream::BatchStream(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, uint64_t seed)
    : gen_(std::make_unique<Generator>(seed)),
      loader_(std::move(dataset), with_generator(std::move(options), gen_.get())),
      pos_{0, 0, gen_->get_state()},
      first_rng_(pos_.rng) {}

void BatchStream::begin_pass(const std::vector<uint8_t>& rng, int64_t batches) {
  gen_->set_state(rng);
  pos_.rng = rng;
  pass_.emplace(loader_.iter());
  for (pos_.batch = 0; pos_.batch < batches; ++pos_.batch) pass_->next();
}

Example BatchStream::next() {
  for (;;) {
    if (!pass_) begin_pass(gen_->get_state(), 0);
    if (std::optional<Example> b = pass_->next()) {
      ++pos_.batch;
      return std::move(*b);
    }
    pass_.reset();
    ++pos_.epoch;
  }
}

void BatchStream::seek(const Position& p) {
  if (p.batch < 0 || p.batch > loader_.size())
    fail("BatchStream", "batch ", p.batch, " is not within the ", loader_.size(), " batches of a pass");
  if (p.epoch < 0) fail("BatchStream", "epoch ", p.epoch, " is negative");
  Generator(0).set_state(p.rng);  // throws for a bad state before anything changes
  pos_.epoch = p.epoch;
  begin_pass(p.rng, p.batch);
}

void BatchStream::rewind() { seek({0, 0, first_rng_}); }

}  // namespace xgrad::data
