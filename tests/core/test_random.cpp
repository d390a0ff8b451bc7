// test_random.cpp: xgrad::Generator against PyTorch's CPU streams (tests/fixtures/random.txt,
// written by tests/fixtures/gen_random.py with torch 1.13).
//
// The comparison is exact: the generator claims bit-for-bit equality with torch, and the
// subtle bugs here (a fused vs an unfused multiply-add, log vs log1p) move values by one
// ulp only, so any tolerance would hide them. To add a case: add the torch call to
// gen_random.py, regenerate random.txt, and add a row to kFillCases (or a TEST below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "xgrad/error.h"
#include "xgrad/random.h"

namespace {

using xgrad::Generator;

// ---- fixture -------------------------------------------------------------------------------

struct Record {
  std::string kind;            // f32, f64, i64, hex
  std::vector<double> reals;   // f32 (exactly representable) and f64 values
  std::vector<int64_t> ints;   // i64 values
  std::vector<uint8_t> bytes;  // hex
};

std::map<std::string, Record> load_fixture() {
  std::map<std::string, Record> out;
  std::ifstream in(std::string(XGRAD_FIXTURES_DIR) + "/random.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string name;
    Record r;
    size_t n = 0;
    if (!(ss >> name >> r.kind >> n)) continue;
    std::string tok;
    if (r.kind == "hex") {
      ss >> tok;
      for (size_t i = 0; i + 1 < tok.size(); i += 2)
        r.bytes.push_back(static_cast<uint8_t>(std::stoul(tok.substr(i, 2), nullptr, 16)));
    } else {
      while (ss >> tok) {
        if (r.kind == "f32") r.reals.push_back(std::strtof(tok.c_str(), nullptr));
        else if (r.kind == "f64") r.reals.push_back(std::strtod(tok.c_str(), nullptr));
        else r.ints.push_back(std::stoll(tok));
      }
    }
    const size_t got = r.kind == "hex" ? r.bytes.size() : r.kind == "i64" ? r.ints.size() : r.reals.size();
    if (got != n) ADD_FAILURE() << "fixture record " << name << " has " << got << " of " << n;
    out[name] = std::move(r);
  }
  return out;
}

const Record& fx(const std::string& name) {
  static const std::map<std::string, Record> records = load_fixture();
  static const Record missing;
  auto it = records.find(name);
  if (it == records.end()) {
    ADD_FAILURE() << "no record '" << name << "' in " << XGRAD_FIXTURES_DIR << "/random.txt";
    return missing;
  }
  return it->second;
}

double param(const std::string& name) {
  const Record& r = fx(name);
  return r.reals.empty() ? 0.0 : r.reals[0];
}

// Exact comparison, reporting the first mismatch (the rest are usually shifted copies).
void expect_same(const std::string& name, const std::vector<float>& got) {
  const Record& r = fx(name);
  ASSERT_EQ(r.kind, "f32") << name;
  ASSERT_EQ(got.size(), r.reals.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = static_cast<float>(r.reals[i]);
    ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0)
        << name << "[" << i << "]: got " << got[i] << ", torch " << want << " (diff " << got[i] - want << ")";
  }
}
void expect_same(const std::string& name, const std::vector<double>& got) {
  const Record& r = fx(name);
  ASSERT_EQ(r.kind, "f64") << name;
  ASSERT_EQ(got.size(), r.reals.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got[i], &r.reals[i], sizeof(double)), 0)
        << name << "[" << i << "]: got " << got[i] << ", torch " << r.reals[i] << " (diff "
        << got[i] - r.reals[i] << ")";
  }
}
void expect_same(const std::string& name, const std::vector<int64_t>& got) {
  const Record& r = fx(name);
  ASSERT_EQ(r.kind, "i64") << name;
  EXPECT_EQ(got, r.ints) << name;
}

// Draws from g into a fresh buffer of n elements.
std::vector<float> f32(int64_t n, const std::function<void(float*)>& fill) {
  std::vector<float> v(n);
  fill(v.data());
  return v;
}
std::vector<double> f64(int64_t n, const std::function<void(double*)>& fill) {
  std::vector<double> v(n);
  fill(v.data());
  return v;
}
std::vector<int64_t> i64(int64_t n, const std::function<void(int64_t*)>& fill) {
  std::vector<int64_t> v(n);
  fill(v.data());
  return v;
}

// ---- one fill after torch.manual_seed(123): a table ------------------------------------

struct FillCase {
  std::string name;  // fixture record
  std::function<void(Generator&, const std::string&)> run;
};

FillCase rand_case(const std::string& name, int64_t n) {
  return {name, [n](Generator& g, const std::string& rec) {
            expect_same(rec, f32(n, [&](float* p) { g.uniform(p, n, 0.0, 1.0); }));
          }};
}
FillCase rand64_case(const std::string& name, int64_t n) {
  return {name, [n](Generator& g, const std::string& rec) {
            expect_same(rec, f64(n, [&](double* p) { g.uniform(p, n, 0.0, 1.0); }));
          }};
}
FillCase normal_case(const std::string& name, int64_t n, bool params = false) {
  return {name, [n, params](Generator& g, const std::string& rec) {
            const double m = params ? param("normal_mean") : 0.0;
            const double s = params ? param("normal_std") : 1.0;
            expect_same(rec, f32(n, [&](float* p) { g.normal(p, n, m, s); }));
          }};
}
FillCase normal64_case(const std::string& name, int64_t n, bool params = false) {
  return {name, [n, params](Generator& g, const std::string& rec) {
            const double m = params ? param("normal_mean") : 0.0;
            const double s = params ? param("normal_std") : 1.0;
            expect_same(rec, f64(n, [&](double* p) { g.normal(p, n, m, s); }));
          }};
}
FillCase bernoulli_case(const std::string& name, int64_t n, double p) {
  return {name, [n, p](Generator& g, const std::string& rec) {
            expect_same(rec, f32(n, [&](float* o) { g.bernoulli(o, n, p); }));
          }};
}
FillCase randint_case(const std::string& name, int64_t n, int64_t lo, int64_t hi) {
  return {name, [n, lo, hi](Generator& g, const std::string& rec) {
            expect_same(rec, i64(n, [&](int64_t* o) { g.random_int(o, n, lo, hi); }));
          }};
}

std::vector<FillCase> fill_cases() {
  std::vector<FillCase> c = {
      rand_case("rand_4x4", 16),
      rand_case("rand_1", 1),
      rand_case("rand_7", 7),
      rand_case("rand_100", 100),
      rand64_case("rand_f64_1", 1),
      rand64_case("rand_f64_7", 7),
      rand64_case("rand_f64_100", 100),
      {"uniform_37",
       [](Generator& g, const std::string& rec) {
         const double a = param("uniform_from"), b = param("uniform_to");
         expect_same(rec, f32(37, [&](float* p) { g.uniform(p, 37, a, b); }));
       }},
      {"uniform_f64_37",
       [](Generator& g, const std::string& rec) {
         const double a = param("uniform_from"), b = param("uniform_to");
         expect_same(rec, f64(37, [&](double* p) { g.uniform(p, 37, a, b); }));
       }},
      normal64_case("randn_f64_5", 5),
      normal64_case("randn_f64_16", 16),
      normal64_case("randn_f64_17", 17),
      normal64_case("randn_f64_33", 33),
      normal64_case("randn_f64_100", 100),
      normal_case("normal_10", 10, true),
      normal_case("normal_50", 50, true),
      normal64_case("normal_f64_10", 10, true),
      normal64_case("normal_f64_50", 50, true),
      bernoulli_case("bernoulli_p2_25", 25, 0.2),
      bernoulli_case("bernoulli_p2_1000", 1000, 0.2),
      bernoulli_case("bernoulli_p5_25", 25, 0.5),
      bernoulli_case("bernoulli_p5_1000", 1000, 0.5),
      {"bernoulli_f64_p5_25",
       [](Generator& g, const std::string& rec) {
         expect_same(rec, f64(25, [&](double* p) { g.bernoulli(p, 25, 0.5); }));
       }},
      randint_case("randint_0_10_20", 20, 0, 10),
      randint_case("randint_m5_5_7", 7, -5, 5),
      randint_case("randint_0_2p40_10", 10, 0, int64_t{1} << 40),
      randint_case("randint_m2p62_2p62_5", 5, -(int64_t{1} << 62), int64_t{1} << 62),
  };
  for (int n : {1, 5, 15, 16, 17, 20, 33, 1000}) c.push_back(normal_case("randn_" + std::to_string(n), n));
  return c;
}

void PrintTo(const FillCase& c, std::ostream* os) { *os << c.name; }

class TorchFill : public ::testing::TestWithParam<FillCase> {};

TEST_P(TorchFill, MatchesTorchAfterManualSeed123) {
  Generator g(123);
  GetParam().run(g, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(Random, TorchFill, ::testing::ValuesIn(fill_cases()),
                         [](const auto& info) { return info.param.name; });

// ---- long streams, compared by hash (see gen_random.py) -------------------------------------

template <class T>
std::vector<uint8_t> fnv1a64(const std::vector<T>& v) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(T); ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(h >> (56 - 8 * i));
  return out;
}

TEST(Random, LongStreamsMatchTorchBitForBit) {
  const double lo = -0.40824829046386296, hi = 0.75;
  Generator g(7);
  EXPECT_EQ(fnv1a64(f32(262144, [&](float* p) { g.normal(p, 262144, 0, 1); })),
            fx("stress_randn_262144").bytes);
  g.manual_seed(7);
  EXPECT_EQ(fnv1a64(f32(65536, [&](float* p) { g.normal(p, 65536, 0.5, 2.0); })),
            fx("stress_normal_65536").bytes);
  g.manual_seed(7);
  EXPECT_EQ(fnv1a64(f32(65536, [&](float* p) { g.uniform(p, 65536, lo, hi); })),
            fx("stress_uniform_65536").bytes);
  g.manual_seed(7);
  EXPECT_EQ(fnv1a64(f64(65536, [&](double* p) { g.uniform(p, 65536, lo, hi); })),
            fx("stress_uniform_f64_65536").bytes);
  g.manual_seed(7);
  EXPECT_EQ(fnv1a64(f64(20000, [&](double* p) { g.normal(p, 20000, 0.5, 3.0); })),
            fx("stress_normal_f64_20000").bytes);
  g.manual_seed(7);
  std::vector<double> small(15 * 1000);
  for (int i = 0; i < 1000; ++i) g.normal(small.data() + 15 * i, 15, 0.5, 3.0);
  EXPECT_EQ(fnv1a64(small), fx("stress_normal_f64_15x1000").bytes);
}

TEST(Random, NormalAtThetaThreePiOverTwo) {
  Generator g(2);
  std::vector<float> skip(1 << 16);
  for (int64_t left = 11158320; left > 0; left -= static_cast<int64_t>(skip.size()))
    g.uniform(skip.data(), std::min<int64_t>(left, skip.size()), 0, 1);
  expect_same("stress_randn_theta_3pi2", f32(16, [&](float* p) { g.normal(p, 16, 0, 1); }));
}

// ---- the engine ----------------------------------------------------------------------------

TEST(Random, EngineIsMt19937OnTheLow32BitsOfTheSeed) {
  Generator g(123), big((uint64_t{7} << 32) | 123);
  std::mt19937 ref(123);
  for (int i = 0; i < 2000; ++i) {  // crosses three twists
    const uint32_t want = ref();
    ASSERT_EQ(g.random(), want) << "draw " << i;
    ASSERT_EQ(big.random(), want) << "draw " << i;
  }
  EXPECT_EQ(big.initial_seed(), (uint64_t{7} << 32) | 123);
}

TEST(Random, Random64IsHighWordFirst) {
  Generator a(5), b(5);
  for (int i = 0; i < 10; ++i) {
    const uint64_t hi = a.random(), lo = a.random();
    EXPECT_EQ(b.random64(), (hi << 32) | lo);
  }
}

TEST(Random, RawDrawsMatchTorchRandom_) {
  Generator g(123);
  std::vector<int64_t> r32(8), r64(8);
  for (auto& v : r32) v = g.random() & 0x7fffffffu;  // int32 random_(): random() % 2^31
  g.manual_seed(123);
  for (auto& v : r64) v = static_cast<int64_t>(g.random64() & 0x7fffffffffffffffull);
  expect_same("random_i32", r32);
  expect_same("random_i64", r64);
}

TEST(Random, DefaultSeedIsTorchs) {
  Generator g;
  EXPECT_EQ(g.initial_seed(), 67280421310721ULL);
  expect_same("default_seed_rand5", f32(5, [&](float* p) { g.uniform(p, 5, 0, 1); }));
}

TEST(Random, DefaultGeneratorFollowsManualSeed) {
  xgrad::manual_seed(123);
  EXPECT_EQ(xgrad::default_generator().initial_seed(), 123u);
  expect_same("rand_4x4", f32(16, [](float* p) { xgrad::default_generator().uniform(p, 16, 0, 1); }));
}

// ---- streams across calls ----------------------------------------------------------------

TEST(Random, SequenceSharesStreamAndNormalCache) {
  Generator g(123);
  expect_same("seq_a_rand3", f32(3, [&](float* p) { g.uniform(p, 3, 0, 1); }));
  expect_same("seq_a_randn5", f32(5, [&](float* p) { g.normal(p, 5, 0, 1); }));
  expect_same("seq_a_rand2", f32(2, [&](float* p) { g.uniform(p, 2, 0, 1); }));
  expect_same("seq_a_randn3", f32(3, [&](float* p) { g.normal(p, 3, 0, 1); }));
  expect_same("seq_a_randn20", f32(20, [&](float* p) { g.normal(p, 20, 0, 1); }));
  expect_same("seq_a_randn1", f32(1, [&](float* p) { g.normal(p, 1, 0, 1); }));
  expect_same("seq_a_randn_f64_3", f64(3, [&](double* p) { g.normal(p, 3, 0, 1); }));
  expect_same("seq_a_randn1_b", f32(1, [&](float* p) { g.normal(p, 1, 0, 1); }));
  expect_same("seq_a_bern7", f32(7, [&](float* p) { g.bernoulli(p, 7, 0.5); }));
  expect_same("seq_a_randint4", i64(4, [&](int64_t* p) { g.random_int(p, 4, 0, 1000); }));
  expect_same("seq_a_rand_f64_2", f64(2, [&](double* p) { g.uniform(p, 2, 0, 1); }));
}

TEST(Random, LinearInitIsWeightThenBiasUniform) {
  // nn.Linear(6, 6): kaiming_uniform_(weight, a=sqrt(5)) then uniform_(bias), weight (out, in)
  Generator g(123);
  const double wb = param("linear_weight_bound"), bb = param("linear_bias_bound");
  expect_same("linear_weight", f32(36, [&](float* p) { g.uniform(p, 36, -wb, wb); }));
  expect_same("linear_bias", f32(6, [&](float* p) { g.uniform(p, 6, -bb, bb); }));
}

TEST(Random, DropoutZerosWhereBernoulliOfKeepProbIsZero) {
  // F.dropout(ones(5, 5), 0.2) = ones * bernoulli_(0.8) / 0.8 on CPU
  Generator g(123);
  const std::vector<float> mask = f32(25, [&](float* p) { g.bernoulli(p, 25, 0.8); });
  std::vector<float> out(25);
  for (int i = 0; i < 25; ++i) out[i] = 1.0f * (mask[i] / static_cast<float>(1.0 - 0.2));
  expect_same("dropout_5x5_p2", out);
  int kept = 0;
  for (float m : mask) kept += m == 1.0f;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 25);
}

TEST(Random, BernoulliEdgeProbabilities) {
  Generator g(1);
  std::vector<float> v(100);
  g.bernoulli(v.data(), 100, 0.0);
  for (float x : v) ASSERT_EQ(x, 0.0f);
  g.bernoulli(v.data(), 100, 1.0);
  for (float x : v) ASSERT_EQ(x, 1.0f);
}

// The bulk fills take whole blocks of mt19937 state at a time; they must give the same
// values as one scalar draw per element, from any position in the state (just before, at and
// after a twist) and across several twists.
TEST(Random, BulkFillsMatchScalarDrawsAtEveryOffset) {
  for (int offset : {0, 1, 2, 311, 622, 623, 624, 625, 1000, 1247, 1248}) {
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{513}, int64_t{1500}}) {
      SCOPED_TRACE("offset " + std::to_string(offset) + ", n " + std::to_string(n));
      Generator bulk(99), ref(99);
      for (int i = 0; i < offset; ++i) {
        bulk.random();
        ref.random();
      }
      const double p = 0.3;
      const uint64_t threshold = static_cast<uint64_t>(std::ceil(p * 9007199254740992.0));
      std::vector<float> bf(n);
      std::vector<char> bb(n);
      std::vector<double> bd(n);
      std::vector<float> uf(n);
      bulk.bernoulli(bf.data(), n, p);
      bulk.bernoulli(reinterpret_cast<bool*>(bb.data()), n, p);
      bulk.bernoulli(bd.data(), n, p);
      bulk.uniform(uf.data(), n, 0, 1);
      auto keep = [&] { return (ref.random64() & ((uint64_t{1} << 53) - 1)) < threshold; };
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bf[i], keep() ? 1.0f : 0.0f) << "float, i " << i;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bb[i] != 0, keep()) << "bool, i " << i;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bd[i], keep() ? 1.0 : 0.0) << "double, i " << i;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(uf[i], static_cast<float>(ref.random() & 0xffffffu) / 16777216.0f) << "uniform, i " << i;
      EXPECT_EQ(bulk.get_state(), ref.get_state());
    }
  }
}

// bernoulli decides x < ceil(p 2^53) from the high draw's 21 bits alone unless they tie with
// the threshold's (2^-21 per element, never in the test above); then the low draw decides.
// Here p is chosen so that one element's x ties: p = x / 2^53 must drop it (x < x is false)
// and p = (x + 1) / 2^53 must keep it, and every other element must match the scalar draws.
TEST(Random, BernoulliDecidesHighWordTiesByTheLowWord) {
  constexpr uint64_t kMask53 = (uint64_t{1} << 53) - 1;
  const int64_t n = 2000;
  for (int64_t tie : {int64_t{0}, int64_t{311}, int64_t{312}, int64_t{1999}}) {
    Generator probe(7);
    uint64_t x = 0;
    for (int64_t i = 0; i <= tie; ++i) x = probe.random64() & kMask53;
    ASSERT_EQ((x + 1) >> 32, x >> 32) << "pick another seed: x + 1 changes the high bits";
    for (uint64_t t : {x, x + 1}) {
      SCOPED_TRACE("tie at " + std::to_string(tie) + ", threshold x + " + std::to_string(t - x));
      const double p = std::ldexp(static_cast<double>(t), -53);  // exact: t < 2^53
      Generator bulk(7), ref(7);
      std::vector<char> mask(n);
      std::vector<float> mf(n);
      bulk.bernoulli(reinterpret_cast<bool*>(mask.data()), n, p);
      bulk.bernoulli(mf.data(), n, p);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(mask[i] != 0, (ref.random64() & kMask53) < t) << "bool, i " << i;
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(mf[i], (ref.random64() & kMask53) < t ? 1.0f : 0.0f) << "float, i " << i;
      EXPECT_EQ(mask[tie] != 0, t == x + 1);
    }
  }
}

// ---- state -------------------------------------------------------------------------------

std::vector<uint8_t> bytes_of(const std::string& name) { return fx(name).bytes; }

TEST(Random, GetStateIsTorchGetRngState) {
  Generator g(123);
  EXPECT_EQ(g.get_state(), bytes_of("state_fresh"));
  std::vector<float> tmp(5);
  g.uniform(tmp.data(), 5, 0, 1);
  g.normal(tmp.data(), 3, 0, 1);  // leaves a cached sample
  EXPECT_EQ(g.get_state(), bytes_of("state_mid"));
  g.manual_seed(123);
  std::vector<float> big(700);
  g.uniform(big.data(), 700, 0, 1);
  EXPECT_EQ(g.get_state(), bytes_of("state_late"));
}

TEST(Random, SetStateFromTorchResumesTorchsStream) {
  Generator g(999);
  g.set_state(bytes_of("state_mid"));
  EXPECT_EQ(g.initial_seed(), 123u);
  expect_same("state_mid_randn3", f32(3, [&](float* p) { g.normal(p, 3, 0, 1); }));
  expect_same("state_mid_rand4", f32(4, [&](float* p) { g.uniform(p, 4, 0, 1); }));
  g.set_state(bytes_of("state_late"));
  expect_same("state_late_rand4", f32(4, [&](float* p) { g.uniform(p, 4, 0, 1); }));
}

TEST(Random, SetStateOfGetStateResumesIdenticalStreamWithCache) {
  Generator a(42);
  std::vector<double> tmp(7);
  a.normal(tmp.data(), 7, 0, 1);  // odd: a sample is cached
  Generator b(0);
  b.set_state(a.get_state());
  Generator c = a;  // copies share the state too
  for (int round = 0; round < 3; ++round) {
    std::vector<double> x(5), y(5), z(5);
    a.normal(x.data(), 5, 0, 1);
    b.normal(y.data(), 5, 0, 1);
    c.normal(z.data(), 5, 0, 1);
    EXPECT_EQ(x, y);
    EXPECT_EQ(x, z);
    const uint32_t r = a.random();
    EXPECT_EQ(b.random(), r);
    EXPECT_EQ(c.random(), r);
  }
  EXPECT_EQ(a.get_state(), b.get_state());
}

TEST(Random, SetStateRejectsMalformedInput) {
  Generator g(1);
  const std::vector<uint8_t> good = g.get_state();
  EXPECT_THROW(g.set_state({}), xgrad::Error);
  EXPECT_THROW(g.set_state(std::vector<uint8_t>(good.begin(), good.end() - 8)), xgrad::Error);
  auto with = [](std::vector<uint8_t> s, size_t off, int32_t v) {
    std::memcpy(s.data() + off, &v, sizeof v);
    return s;
  };
  // offsets: 8 left, 12 seeded, 16 next
  EXPECT_THROW(g.set_state(with(good, 8, 0)), xgrad::Error);     // left = 0
  EXPECT_THROW(g.set_state(with(good, 8, 625)), xgrad::Error);   // left > 624
  EXPECT_THROW(g.set_state(with(good, 12, 0)), xgrad::Error);    // not seeded
  EXPECT_THROW(g.set_state(with(good, 16, 625)), xgrad::Error);  // next past the state
  // left 300 draws from next 400 would read past state[623]
  EXPECT_THROW(g.set_state(with(with(good, 8, 300), 16, 400)), xgrad::Error);
  g.set_state(with(with(good, 8, 300), 16, 325));  // the last legal position for left 300
  g.set_state(good);
  EXPECT_EQ(g.get_state(), good);
  Generator h(1);
  EXPECT_THROW(h.set_state(with(good, 8, 0)), xgrad::Error);
  EXPECT_EQ(h.get_state(), good);  // a failed set_state leaves the generator alone
}

// ---- errors and threads --------------------------------------------------------------------

TEST(Random, BadArgumentsThrow) {
  Generator g(1);
  float f[4];
  double d[4];
  int64_t i[4];
  EXPECT_THROW(g.uniform(f, 4, 1.0, 0.0), xgrad::Error);
  EXPECT_THROW(g.uniform(f, 4, 0.0, 1e300), xgrad::Error);  // not a float
  EXPECT_THROW(g.uniform(d, 4, 0.0, NAN), xgrad::Error);
  EXPECT_THROW(g.normal(f, 4, 0.0, -1.0), xgrad::Error);
  EXPECT_THROW(g.normal(d, 20, 0.0, -1.0), xgrad::Error);
  EXPECT_THROW(g.bernoulli(f, 4, 1.5), xgrad::Error);
  EXPECT_THROW(g.bernoulli(d, 4, -0.1), xgrad::Error);
  EXPECT_THROW(g.random_int(i, 4, 5, 5), xgrad::Error);
  EXPECT_THROW(g.uniform(f, -1, 0.0, 1.0), xgrad::Error);
  EXPECT_THROW(g.uniform(static_cast<float*>(nullptr), 3, 0.0, 1.0), xgrad::Error);
  g.uniform(static_cast<float*>(nullptr), 0, 0.0, 1.0);  // empty fill is fine
  EXPECT_EQ(g.get_state(), Generator(1).get_state());    // and nothing was drawn
}

TEST(Random, ConcurrentCallsEachDrawWholeValues) {
  Generator shared(7), serial(7);
  std::vector<uint32_t> a(5000), b(5000);
  std::thread t1([&] {
    for (auto& v : a) v = shared.random();
  });
  std::thread t2([&] {
    for (auto& v : b) v = shared.random();
  });
  t1.join();
  t2.join();
  std::vector<uint32_t> got = a, want(10000);
  got.insert(got.end(), b.begin(), b.end());
  for (auto& v : want) v = serial.random();
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);  // no draw lost or repeated
}

}  // namespace
