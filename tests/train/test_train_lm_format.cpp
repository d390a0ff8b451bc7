// tests/train/test_train_lm_format.cpp: train_lm's checkpoint format on xgrad::train's: from
// format_version 2 on both files must carry their header checksum, so a file whose checksum
// key was damaged is refused instead of being read unchecked.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "train.h"
#include "train_test_util.h"

using namespace train_lm;
using train_test::expect_error;
using train_test::load_checkpoint_files;
using train_test::TempDir;

TEST(TrainLmFormat, AFileWithoutItsHeaderChecksumIsRefused) {
  spdlog::set_level(spdlog::level::warn);
  TempDir tmp;
  TrainOptions o;
  o.model = {
      .vocab_size = 0, .context_length = 8, .emb_dim = 16, .n_heads = 2, .n_layers = 1, .drop_rate = 0.0};
  o.batch_size = 4;
  o.steps = 2;
  o.warmup = 0;
  o.eval_iters = 1;
  o.sample_length = 0;
  o.checkpoint_dir = (tmp / "ck").string();
  Trainer a(o, make_corpus(train_test::ishmael_corpus(), 8, "corpus.txt"));
  a.train();
  for (const char* file : {kModelFile, kTrainStateFile}) {
    auto ck = load_checkpoint_files(o.checkpoint_dir);
    ASSERT_TRUE(ck.at(file).header_verified);
    ck.at(file).header_verified = false;
    Trainer b(o, make_corpus(train_test::ishmael_corpus(), 8, "corpus.txt"));
    expect_error([&] { b.load(ck); }, {file, "format_version 5 but no xgrad_header_crc32"});
    EXPECT_EQ(b.step(), 0);
  }
  spdlog::set_level(spdlog::level::info);
}
