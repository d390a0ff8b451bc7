// tests/nn/test_init.cpp: the normal initialisers of torch.nn.init, kaiming_normal_ and
// xavier_normal_, against torch 1.13 (tests/fixtures/init.txt, written by gen_init.py).
//
// Each case reseeds with manual_seed(123) and fills a tensor of the fixture's shape and dtype;
// the values must equal torch's bit for bit (the generator reproduces torch's streams, and the
// standard deviation is computed with torch's double arithmetic). The fixture also holds the
// standard deviation torch used, which pins the fan mode and the gain on their own. To add a
// case: add it to gen_init.py, regenerate init.txt, and add a row to the table below.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::nn {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& init_fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/init.txt");
  return fx;
}

// The sample standard deviation of t's values (n - 1 in the denominator).
double sample_std(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

struct KaimingCase {
  std::string name;
  double a;
  std::string mode;
  std::string nonlinearity;
};

TEST(InitNormal, KaimingNormalMatchesTorch) {
  const KaimingCase cases[] = {
      {"kaiming_normal.default", 0.0, "fan_in", "leaky_relu"},
      {"kaiming_normal.small", 0.0, "fan_in", "leaky_relu"},
      {"kaiming_normal.fan_out_relu_conv", 0.0, "fan_out", "relu"},
      {"kaiming_normal.leaky_a", 0.2, "fan_in", "leaky_relu"},
      {"kaiming_normal.tanh_f64", 0.0, "fan_in", "tanh"},
      {"kaiming_normal.upper_mode", 0.0, "FAN_OUT", "linear"},  // torch lower-cases the mode
  };
  const Fixture& fx = init_fixture();
  for (const KaimingCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor& expected = fx.get(c.name);
    // the standard deviation torch drew with: gain(nonlinearity, a) / sqrt(fan of the mode)
    const init::Fans fans = init::calculate_fan_in_and_fan_out(expected);
    std::string mode = c.mode;
    for (char& ch : mode) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const double fan = static_cast<double>(mode == "fan_in" ? fans.fan_in : fans.fan_out);
    EXPECT_EQ(init::calculate_gain(c.nonlinearity, c.a) / std::sqrt(fan), fx.get(c.name + ".std").item());

    manual_seed(123);
    Tensor t = empty(expected.shape(), expected.dtype());
    Tensor same = init::kaiming_normal_(t, c.a, c.mode, c.nonlinearity);
    EXPECT_EQ(same.raw_data_ptr(), t.raw_data_ptr());  // the same tensor, filled in place
    expect_close(t, expected, 0.0, 0.0, c.name);
  }
}

TEST(InitNormal, KaimingNormalDefaultsAreTorchs) {
  // a = 0, mode fan_in, nonlinearity leaky_relu: gain sqrt(2 / (1 + 0^2)) = sqrt(2)
  const Tensor& expected = init_fixture().get("kaiming_normal.default");
  manual_seed(123);
  Tensor t = empty(expected.shape());
  init::kaiming_normal_(t);
  expect_close(t, expected, 0.0, 0.0, "kaiming_normal_ with defaults");
  EXPECT_EQ(init_fixture().get("kaiming_normal.default.std").item(), std::sqrt(2.0) / std::sqrt(8.0));
}

TEST(InitNormal, KaimingNormalOfAnEmptyTensorDrawsNothing) {
  manual_seed(123);
  Tensor t = empty({0, 3});
  init::kaiming_normal_(t);
  expect_close(randn({3}), init_fixture().get("kaiming_normal.empty.after"), 0.0, 0.0, "randn after");
}

TEST(InitNormal, KaimingNormalRejectsWhatTorchRejects) {
  EXPECT_THROW(init::kaiming_normal_(empty({4, 4}), 0.0, "fan_avg"), Error);
  EXPECT_THROW(init::kaiming_normal_(empty({4}), 0.0), Error);  // fans need 2 dims
  EXPECT_THROW(init::kaiming_normal_(empty({4, 4}), 0.0, "fan_in", "swish"), Error);
}

TEST(InitNormal, XavierNormalMatchesTorch) {
  const std::pair<std::string, double> cases[] = {
      {"xavier_normal.default", 1.0},
      {"xavier_normal.small", 1.0},
      {"xavier_normal.tanh_gain_conv_f64", init::calculate_gain("tanh")},
  };
  const Fixture& fx = init_fixture();
  for (const auto& [name, gain] : cases) {
    SCOPED_TRACE(name);
    const Tensor& expected = fx.get(name);
    const init::Fans fans = init::calculate_fan_in_and_fan_out(expected);
    EXPECT_EQ(gain * std::sqrt(2.0 / static_cast<double>(fans.fan_in + fans.fan_out)),
              fx.get(name + ".std").item());

    manual_seed(123);
    Tensor t = empty(expected.shape(), expected.dtype());
    Tensor same = init::xavier_normal_(t, gain);
    EXPECT_EQ(same.raw_data_ptr(), t.raw_data_ptr());  // the same tensor, filled in place
    expect_close(t, expected, 0.0, 0.0, name);
  }
  EXPECT_THROW(init::xavier_normal_(empty({5})), Error);
}

TEST(InitNormal, FillsWithoutRecordingAndFromAGivenGenerator) {
  // a parameter that requires grad is filled in place and stays a leaf
  Tensor p = zeros({16, 8}).requires_grad_();
  manual_seed(123);
  init::kaiming_normal_(p);
  EXPECT_TRUE(p.is_leaf());
  expect_close(p.detach(), init_fixture().get("kaiming_normal.default"), 0.0, 0.0,
               "kaiming_normal_ on a parameter");

  // an explicit generator gives the same stream and leaves the default one alone
  manual_seed(7);
  const Tensor untouched = randn({4});
  manual_seed(7);
  Generator g(123);
  Tensor x = empty({20, 12});
  init::xavier_normal_(x, 1.0, &g);
  expect_close(x, init_fixture().get("xavier_normal.default"), 0.0, 0.0, "xavier_normal_ with a generator");
  expect_close(randn({4}), untouched, 0.0, 0.0, "the default generator");
}

TEST(InitNormal, ValuesHaveTheStandardDeviationOfTheirFans) {
  // independent of the fixture: a large draw's sample deviation is within 2% of gain/sqrt(fan)
  manual_seed(5);
  Tensor w = empty({256, 512});
  init::kaiming_normal_(w, 0.0, "fan_out", "relu");
  EXPECT_NEAR(sample_std(w), std::sqrt(2.0) / std::sqrt(256.0), 0.02 * std::sqrt(2.0 / 256.0));
  init::xavier_normal_(w, 2.0);
  EXPECT_NEAR(sample_std(w), 2.0 * std::sqrt(2.0 / 768.0), 0.02 * 2.0 * std::sqrt(2.0 / 768.0));
}

}  // namespace
}  // namespace xgrad::nn
