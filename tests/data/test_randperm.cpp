// test_randperm.cpp: randperm and the Generator's seed functions against torch 1.13
// (tests/fixtures/data.txt, from gen_data.py): the same permutation for the same generator
// state, and the generator left in the same state (the next torch.rand draws match).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "error_message.h"
#include "fixture.h"
#include "xgrad/ops.h"
#include "xgrad/random.h"

namespace xgrad {
namespace {

using testing::expect_next_rand;
using testing::fixture_ints;

TEST(Randperm, MatchesTorchForSmallN) {
  for (int seed : {0, 123}) {
    for (int n : {0, 1, 2, 5, 10, 100, 1000}) {
      const std::string name = "randperm_s" + std::to_string(seed) + "_n" + std::to_string(n);
      manual_seed(static_cast<uint64_t>(seed));
      Tensor p = randperm(n);
      EXPECT_EQ(p.dtype(), kInt64);
      EXPECT_EQ(p.shape(), (Shape{n}));
      EXPECT_EQ(p.to_vector<int64_t>(), fixture_ints(name)) << name;
      expect_next_rand(name + "_rand");
    }
  }
}

TEST(Randperm, DrawsFromTheGivenGenerator) {
  manual_seed(1);
  const std::vector<uint8_t> before = default_generator().get_state();
  Generator g(7);
  EXPECT_EQ(randperm(20, &g).to_vector<int64_t>(), fixture_ints("randperm_gen7_n20"));
  expect_next_rand("randperm_gen7_n20_rand", &g);
  EXPECT_EQ(default_generator().get_state(), before);  // the default generator was not used
}

uint64_t fnv1a64(const int64_t* v, int64_t n) {
  uint64_t h = 0xCBF29CE484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(v);
  for (int64_t i = 0; i < 8 * n; ++i) h = (h ^ bytes[i]) * 0x100000001B3ULL;
  return h;
}

TEST(Randperm, MatchesTorchForLargeN) {
  const int64_t n = fixture_ints("randperm_big_n").at(0);  // 2^24 + 3
  manual_seed(123);
  const std::vector<int64_t> p = randperm(n).to_vector<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(p.size()), n);
  EXPECT_EQ(std::vector<int64_t>(p.begin(), p.begin() + 8), fixture_ints("randperm_big_head"));
  EXPECT_EQ(std::vector<int64_t>(p.end() - 8, p.end()), fixture_ints("randperm_big_tail"));
  const std::vector<int64_t> hi_lo = fixture_ints("randperm_big_fnv_hi_lo");
  EXPECT_EQ(fnv1a64(p.data(), n),
            (static_cast<uint64_t>(hi_lo.at(0)) << 32) | static_cast<uint64_t>(hi_lo.at(1)));
  expect_next_rand("randperm_big_rand");
}

TEST(Randperm, IsAPermutation) {
  Generator g(5);
  std::vector<int64_t> p = randperm(257, &g).to_vector<int64_t>();
  std::sort(p.begin(), p.end());
  std::vector<int64_t> iota(257);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(p, iota);
}

TEST(Randperm, RejectsNegativeN) {
  testing::expect_error([] { randperm(-1); }, {"randperm", "-1"});
}

TEST(GeneratorSeed, SeedReseedsAndInitialSeedReportsIt) {
  Generator g(1);
  const uint64_t s = g.seed();
  EXPECT_EQ(g.initial_seed(), s);
  Generator h(s);  // the same stream as a generator seeded with it by hand
  EXPECT_EQ(rand({4}, &g).to_vector<float>(), rand({4}, &h).to_vector<float>());
  // two calls draw different seeds (64 bits of entropy each)
  EXPECT_NE(g.seed(), s);
}

TEST(GeneratorSeed, DefaultGeneratorFunctions) {
  manual_seed(42);
  EXPECT_EQ(initial_seed(), 42u);
  const std::vector<uint8_t> state = get_rng_state();
  const std::vector<float> a = rand({5}).to_vector<float>();
  set_rng_state(state);
  EXPECT_EQ(rand({5}).to_vector<float>(), a);
  const uint64_t s = seed();
  EXPECT_EQ(initial_seed(), s);
  testing::expect_error([] { set_rng_state(std::vector<uint8_t>(10)); }, {"set_state", "5056", "10"});
}

}  // namespace
}  // namespace xgrad
