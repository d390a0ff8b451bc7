// tests/core/test_creation_like.cpp: full_like, rand_like and randn_like against torch 1.13
// (tests/fixtures/init.txt, written by gen_init.py), and Tensor::shape4.
//
// A *_like op takes the shape and dtype of its argument, never its values or strides, and
// returns a new contiguous tensor that does not require grad. The random ones draw torch's
// stream: after manual_seed(123) their values equal torch's bit for bit.
#include <gtest/gtest.h>

#include <string>

#include "core/fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using xgrad::testing::expect_close;
using xgrad::testing::Fixture;
using xgrad::testing::read_fixture;

const Fixture& like_fixture() {
  static Fixture fx = read_fixture(XGRAD_FIXTURES_DIR "/init.txt");
  return fx;
}

void expect_fresh_like(const Tensor& out, const Tensor& like) {
  EXPECT_EQ(out.shape(), like.shape());
  EXPECT_EQ(out.dtype(), like.dtype());
  EXPECT_TRUE(out.is_contiguous());
  EXPECT_FALSE(out.requires_grad());
}

TEST(CreationLike, RandLikeIsTorchsStream) {
  for (const char* name : {"rand_like.f32", "rand_like.f64", "rand_like.f32_3d"}) {
    SCOPED_TRACE(name);
    const Tensor& expected = like_fixture().get(name);
    // the argument's values do not matter: only its shape and dtype
    Tensor like = full(expected.shape(), 5.0, expected.dtype());
    manual_seed(123);
    Tensor out = rand_like(like);
    expect_fresh_like(out, like);
    expect_close(out, expected, 0.0, 0.0, name);
  }
}

TEST(CreationLike, RandnLikeIsTorchsStream) {
  for (const char* name : {"randn_like.f32", "randn_like.f32_small", "randn_like.f64"}) {
    SCOPED_TRACE(name);
    const Tensor& expected = like_fixture().get(name);
    Tensor like = zeros(expected.shape(), expected.dtype()).requires_grad_();
    manual_seed(123);
    Tensor out = randn_like(like);
    expect_fresh_like(out, like);
    expect_close(out, expected, 0.0, 0.0, name);
  }
  // an odd count below 16 leaves a cached normal sample, which the next randn starts with
  manual_seed(123);
  randn_like(zeros({3}));
  expect_close(randn({3}), like_fixture().get("randn_like.odd.after"), 0.0, 0.0, "randn after randn_like");
}

TEST(CreationLike, RandomLikeDrawsFromAGivenGenerator) {
  manual_seed(9);
  const Tensor untouched = rand({2});
  manual_seed(9);
  Generator g(123);
  expect_close(rand_like(zeros({3, 4}), &g), like_fixture().get("rand_like.f32"), 0.0, 0.0, "rand_like(gen)");
  g.manual_seed(123);
  expect_close(randn_like(zeros({4, 5}), &g), like_fixture().get("randn_like.f32"), 0.0, 0.0,
               "randn_like(gen)");
  expect_close(rand({2}), untouched, 0.0, 0.0, "the default generator");
}

TEST(CreationLike, RandomLikeOfANonContiguousTensorIsContiguous) {
  // torch keeps a dense input's strides (preserve_format) and fills in memory order; xgrad
  // returns a contiguous tensor with the values of rand(shape) (README: differences)
  Tensor base = zeros({5, 4});
  Tensor t = base.transpose(0, 1);  // (4, 5), not contiguous
  manual_seed(123);
  Tensor out = rand_like(t);
  expect_fresh_like(out, t);
  manual_seed(123);
  expect_close(out, rand({4, 5}), 0.0, 0.0, "rand_like of a transpose");
}

TEST(CreationLike, RandomLikeRejectsIntegerTensors) {
  // torch: "check_uniform_bounds" / "normal_kernel_cpu" not implemented for 'Long'
  EXPECT_THROW(rand_like(zeros({3}, kInt64)), Error);
  EXPECT_THROW(randn_like(zeros({3}, kInt64)), Error);
  EXPECT_THROW(rand_like(zeros({3}, kBool)), Error);
}

TEST(CreationLike, FullLikeConvertsTheValueAsTorchDoes) {
  const std::pair<const char*, Tensor> cases[] = {
      {"full_like.f32", full_like(ones({2, 3}), -1.25)},
      {"full_like.f64", full_like(ones({2}, kFloat64), 0.1)},
      {"full_like.i64", full_like(ones({4}, kInt64), 2.7)},       // truncated toward zero
      {"full_like.i64_neg", full_like(ones({4}, kInt64), -2.7)},  // truncated toward zero
      {"full_like.bool", full_like(zeros({3}, kBool), 0.5)},      // nonzero is true
      {"full_like.empty", full_like(ones({0, 2}), 3.0)},
  };
  for (const auto& [name, out] : cases) {
    SCOPED_TRACE(name);
    const Tensor& expected = like_fixture().get(name);
    EXPECT_EQ(out.dtype(), expected.dtype());
    expect_close(out, expected, 0.0, 0.0, name);
  }
  // the argument is not touched, and a strided one gives a contiguous result
  Tensor base = arange(6.0).view({2, 3});
  Tensor out = full_like(base.transpose(0, 1), 4.0);
  expect_fresh_like(out, base.transpose(0, 1));
  EXPECT_EQ(out.to_vector<double>(), std::vector<double>(6, 4.0));
  EXPECT_EQ(base.to_vector<double>(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST(Shape4, UnpacksAFourDimensionalShape) {
  auto [b, h, t, d] = zeros({2, 3, 5, 7}).shape4();
  EXPECT_EQ(b, 2);
  EXPECT_EQ(h, 3);
  EXPECT_EQ(t, 5);
  EXPECT_EQ(d, 7);
  // a view's shape, not its storage's
  auto [b2, h2, t2, d2] = zeros({2, 3, 5, 7}).transpose(1, 2).shape4();
  EXPECT_EQ((std::array<int64_t, 4>{b2, h2, t2, d2}), (std::array<int64_t, 4>{2, 5, 3, 7}));
  // any other rank throws, naming the shape
  for (const Shape& s : {Shape{2, 3, 5}, Shape{2, 3, 5, 7, 1}, Shape{}}) {
    try {
      zeros(s).shape4();
      ADD_FAILURE() << "shape4 of " << shape_str(s) << " did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("4-D"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(shape_str(s)), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace xgrad
