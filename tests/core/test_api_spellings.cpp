// tests/core/test_api_spellings.cpp: torch spellings that C++ could read another way. C++
// slides ints, bools and doubles into one another, so a torch spelling could compile and mean
// something else (x.var(-1) as the unbiased variance of every element, when torch reads -1 as
// a dim). Here, at compile time, every such spelling either compiles (and the runtime tests
// below and in test_api_ops.cpp check it means torch's thing, against tests/fixtures/api.txt)
// or does not compile. Adding an overload that lets one of them slide again breaks this
// file's build.
#include <gtest/gtest.h>

#include <concepts>
#include <type_traits>
#include <vector>

#include "fixture_reader.h"
#include "xgrad/xgrad.h"

namespace xgrad::testing {
namespace {

// ---------------------------------------------------------------- compile time

// The argument types themselves: a flag takes only bool, an int or a dim list no bool/float.
static_assert(std::is_convertible_v<bool, Flag>);
static_assert(!std::is_convertible_v<int, Flag> && !std::is_convertible_v<int64_t, Flag>);
static_assert(!std::is_convertible_v<double, Flag> && !std::is_convertible_v<float, Flag>);
static_assert(std::is_convertible_v<int, Int> && std::is_convertible_v<int64_t, Int> &&
              std::is_convertible_v<std::size_t, Int>);
static_assert(!std::is_convertible_v<bool, Int> && !std::is_convertible_v<double, Int>);
static_assert(std::is_convertible_v<int, Dims> && std::is_convertible_v<Shape, Dims>);
static_assert(!std::is_convertible_v<bool, Dims> && !std::is_convertible_v<double, Dims>);

// COMPILES(e): does expression e compile, with x and y Tensors, v a std::vector<Tensor>, i an
// int64 index tensor and f a double in scope (a requires-expression: false instead of an
// error; f's type is spelled through T so that expressions using only f are checked too).
template <class T>
using Double = std::conditional_t<sizeof(T) != 0, double, T>;
#define COMPILES(...) (requires(T x, T y, T i, std::vector<T> v, Double<T> f) { __VA_ARGS__; })

template <class T>
constexpr bool spellings_mean_torch_or_fail() {
  // -- var / std: an int is a dim (torch's x.var(-1)), a bool the unbiased flag
  static_assert(COMPILES(x.var(-1)) && COMPILES(x.var(0)) && COMPILES(var(x, 1)));
  static_assert(COMPILES(x.var(1, true)) && COMPILES(x.var(1, false, true)) && COMPILES(x.var({0, 2})));
  static_assert(COMPILES(x.var()) && COMPILES(x.var(true)) && COMPILES(var(x, false)) && COMPILES(x.var({})));
  static_assert(COMPILES(x.std(-1)) && COMPILES(xgrad::std(x, 0)) && COMPILES(x.std(true)));
  static_assert(!COMPILES(x.var(0.5)) && !COMPILES(x.var(1, 0)) && !COMPILES(x.var(-1, true, 1)));
  static_assert(!COMPILES(x.var(true, true)) && !COMPILES(xgrad::std(x, 1, 1)) && !COMPILES(x.std(2.0)));
  // -- sum / mean: keepdim takes a bool only (torch rejects x.sum(0, 1))
  static_assert(COMPILES(x.sum(-1)) && COMPILES(x.sum(-1, true)) && COMPILES(x.mean(-1, true)));
  static_assert(COMPILES(sum(x, 1)) && COMPILES(sum(x, {0, 1})) && COMPILES(sum(x, {})) &&
                COMPILES(x.mean({-1})));
  static_assert(!COMPILES(x.sum(0, 1)) && !COMPILES(x.mean(-1, 1)) && !COMPILES(x.sum(true)));
  static_assert(!COMPILES(x.sum(1.0)) && !COMPILES(sum(x, 1, 1)) && !COMPILES(mean(x, 0.5)));
  // -- max / min: an int dim gives (values, indices); a tensor is torch.max(x, y) = maximum
  static_assert(COMPILES({ x.max(-1) } -> std::same_as<ValuesIndices>));
  static_assert(COMPILES({ min(x, 0, true) } -> std::same_as<ValuesIndices>));
  static_assert(COMPILES({ x.max() } -> std::same_as<T>) && COMPILES({ max(x, y) } -> std::same_as<T>));
  static_assert(COMPILES({ x.min(y) } -> std::same_as<T>));
  static_assert(!COMPILES(x.max(1.0)) && !COMPILES(x.max(true)) && !COMPILES(x.max(-1, 1)));
  static_assert(!COMPILES(max(x, 0.5)) && !COMPILES(min(x, true)));
  static_assert(COMPILES(x.amax(-1)) && COMPILES(amin(x)) && COMPILES(x.amin({0, 1}, true)));
  static_assert(!COMPILES(x.amax(-1, 1)) && !COMPILES(amin(x, 1.5)));
  static_assert(COMPILES(x.argmax(-1)) && COMPILES(x.argmax()) && COMPILES(argmin(x, 0, true)));
  static_assert(!COMPILES(x.argmax(true)) && !COMPILES(x.argmax(1.0)) && !COMPILES(argmax(x, 1, 1)));
  static_assert(COMPILES({ x.topk(2) } -> std::same_as<ValuesIndices>) &&
                COMPILES(topk(x, 2, 1, false, true)));
  static_assert(!COMPILES(x.topk(2, 1, 1)) && !COMPILES(x.topk(2.0)) && !COMPILES(x.topk(2, true)));
  // -- softmax, cat, stack, split, chunk, index_select, gather: dims are ints only
  static_assert(COMPILES(x.softmax(-1)) && COMPILES(log_softmax(x, 0)));
  static_assert(!COMPILES(x.softmax(1.0)) && !COMPILES(softmax(x, true)) && !COMPILES(x.log_softmax(true)));
  static_assert(COMPILES(cat(v, 1)) && COMPILES(stack(v, -1)));
  static_assert(!COMPILES(cat(v, 1.0)) && !COMPILES(cat(v, true)) && !COMPILES(stack(v, true)));
  static_assert(COMPILES(split(x, 2, 1)) && COMPILES(split(x, {2}, 1)) && COMPILES(x.split({1, 2}, -1)));
  static_assert(!COMPILES(split(x, 2.0)) && !COMPILES(split(x, true)) && !COMPILES(x.split(2, 1.0)));
  static_assert(COMPILES(x.chunk(2, -1)) && !COMPILES(chunk(x, 2.5)) && !COMPILES(x.chunk(true)));
  static_assert(COMPILES(x.index_select(0, i)) && !COMPILES(x.index_select(true, i)));
  static_assert(COMPILES(x.gather(1, i)) && COMPILES(x.scatter_add(0, i, y)) && !COMPILES(x.gather(1.0, i)));
  static_assert(COMPILES(triu(x, -1)) && COMPILES(x.tril_(1)) && !COMPILES(triu(x, true)) &&
                !COMPILES(x.tril_(0.5)));
  static_assert(COMPILES(x.roll(1)) && COMPILES(x.roll(1, 0)) && COMPILES(roll(x, {1, 2}, {0, 1})));
  static_assert(!COMPILES(x.roll(1.0)) && !COMPILES(x.roll(1, true)));
  static_assert(COMPILES(x.norm(2, 1)) && COMPILES(norm(x)) && COMPILES(x.norm(1, -1, true)));  // p, dim
  static_assert(!COMPILES(x.norm(2, 1, 1)) && !COMPILES(x.norm(2, 1.0)) && !COMPILES(norm(x, 2, true)));
  // -- views: plain ints as in torch; a bool or a float index does not compile (torch's
  //    x[True] adds a dim, C++ would have read x[1])
  static_assert(COMPILES(x.view(-1)) && COMPILES(x.view(2, 3, 4, 5)) && COMPILES(x.view({2, -1})));
  static_assert(COMPILES(x.reshape(3, -1)) && COMPILES(x.permute(2, 0, 1)) && COMPILES(x.expand(2, -1)));
  static_assert(COMPILES(x.transpose(-2, -1)) && COMPILES(x.flatten(0, 1)) && COMPILES(x[0]) &&
                COMPILES(x.permute({1, 0})));
  static_assert(!COMPILES(x.view(2.0, 3)) && !COMPILES(x.view(true)) && !COMPILES(x.permute(true, 0)));
  static_assert(!COMPILES(x[true]) && !COMPILES(x[1.0]) && !COMPILES(x.transpose(true, 0)));
  static_assert(!COMPILES(x.transpose(0.0, 1)) && !COMPILES(x.select(0, 1.5)) &&
                !COMPILES(x.unsqueeze(true)));
  static_assert(!COMPILES(x.squeeze(1.0)) && !COMPILES(x.flatten(0.0)) && !COMPILES(x.narrow(0, 1.0, 2)));
  static_assert(!COMPILES(x.size(true)) && !COMPILES(x.slice(1, 0.5, 2)));
  // -- scalars: an int is a value wherever torch takes a number
  static_assert(COMPILES(clamp(x, 0, 1)) && COMPILES(x.clamp(0)) && COMPILES(x.pow(2)) &&
                COMPILES(pow(x, 2)));
  static_assert(COMPILES(where(y, x, 0.0)) && COMPILES(where(y, 1, x)) && COMPILES(x.where(y, x)));
  // -- creation and nn functions: counts and indices are ints, flags bools
  static_assert(COMPILES(full({2}, 1)) && COMPILES(arange(0, 1, 0.25)) && COMPILES(linspace(0, 1, 5)));
  static_assert(COMPILES(linspace(f, f, 5)) && COMPILES(eye(3, 4)) && COMPILES(randint(0, 10, {3})));
  static_assert(!COMPILES(linspace(0, 1, f)) && !COMPILES(eye(f)) && !COMPILES(randint(0, f, {3})));
  static_assert(COMPILES(dropout(x, 0.5, false)) && !COMPILES(dropout(x, 0.5, 0)));
  // torch's third positional argument is `weight`, so the keywords are an options struct
  static_assert(COMPILES(cross_entropy(x, i, {.ignore_index = -1})) && !COMPILES(cross_entropy(x, i, -1)));
  static_assert(!COMPILES(cross_entropy(x, i, {.ignore_index = true})) &&
                !COMPILES(cross_entropy(x, i, 1.0)));
  static_assert(COMPILES(scaled_dot_product_attention(x, x, x, 0.0, true)));
  static_assert(!COMPILES(scaled_dot_product_attention(x, x, x, 0.0, 1)));
  // -- no overload takes a plain bool or int64_t where these take Flag/Int/Dims: one would
  //    catch ints (x.var(-1) as var(bool)) before the strict types are even considered
  static_assert(!COMPILES(static_cast<T (T::*)(bool) const>(&T::var)));
  static_assert(!COMPILES(static_cast<T (T::*)(bool) const>(&T::std)));
  static_assert(!COMPILES(static_cast<T (*)(const T&, bool)>(&var)));
  static_assert(!COMPILES(static_cast<T (*)(const T&, bool)>(&xgrad::std)));
  static_assert(!COMPILES(static_cast<T (T::*)(Shape, bool) const>(&T::sum)));
  static_assert(!COMPILES(static_cast<T (*)(const T&, const Shape&, bool)>(&sum)));
  static_assert(!COMPILES(static_cast<T (*)(const T&, const Shape&, bool, bool)>(&var)));
  static_assert(!COMPILES(static_cast<ValuesIndices (*)(const T&, int64_t, bool)>(&max)));
  static_assert(!COMPILES(static_cast<std::vector<T> (*)(const T&, int64_t, int64_t)>(&split)));
  return true;
}
static_assert(spellings_mean_torch_or_fail<Tensor>());

#undef COMPILES

// ---------------------------------------------------------------- what they mean

const Fixture& fx() {
  static const Fixture f = read_fixture(XGRAD_FIXTURES_DIR "/api.txt");
  return f;
}

// x.var(-1) and friends against torch, values and gradients (the loss is sum(out * w)).
struct IntDimCase {
  const char* name;
  Tensor (*fn)(const Tensor&);
};

inline void PrintTo(const IntDimCase& c, std::ostream* os) { *os << c.name; }

class IntDimVsTorch : public ::testing::TestWithParam<IntDimCase> {};

TEST_P(IntDimVsTorch, ValuesAndGradients) {
  const std::string c = GetParam().name;
  Tensor x = fx().get(c + ".x").clone().requires_grad_();
  Tensor out = GetParam().fn(x);
  expect_close(out, fx().get(c + ".out"), 1e-12, 1e-12, c + ".out");
  (out * fx().get(c + ".w")).sum().backward();
  expect_close(x.grad(), fx().get(c + ".x.grad"), 1e-12, 1e-12, c + ".x.grad");
}

INSTANTIATE_TEST_SUITE_P(
    Api, IntDimVsTorch,
    ::testing::Values(IntDimCase{"var_m1", [](const Tensor& x) { return x.var(-1); }},
                      IntDimCase{"var_0", [](const Tensor& x) { return x.var(0); }},
                      IntDimCase{"var_fn1", [](const Tensor& x) { return var(x, 1); }},
                      IntDimCase{"var_1_biased_keep", [](const Tensor& x) { return x.var(1, false, true); }},
                      IntDimCase{"var_true", [](const Tensor& x) { return x.var(true); }},
                      IntDimCase{"var_false", [](const Tensor& x) { return var(x, false); }},
                      IntDimCase{"std_m1", [](const Tensor& x) { return x.std(-1); }},
                      IntDimCase{"std_0_biased_keep",
                                 [](const Tensor& x) { return xgrad::std(x, 0, false, true); }},
                      IntDimCase{"std_dims",
                                 [](const Tensor& x) {
                                   return x.std({0, 2});
                                 }},
                      IntDimCase{"std_all", [](const Tensor& x) { return x.std(); }},
                      IntDimCase{"std_all_biased", [](const Tensor& x) { return x.std(false); }},
                      IntDimCase{"std_const", [](const Tensor& x) { return x.std(1); }},
                      IntDimCase{"sum_m1", [](const Tensor& x) { return x.sum(-1); }},
                      IntDimCase{"mean_m1_keep", [](const Tensor& x) { return x.mean(-1, true); }}),
    [](const ::testing::TestParamInfo<IntDimCase>& info) { return std::string(info.param.name); });

TEST(ApiSpellings, VarOverAnIntDimIsPerRowNotOverEverything) {
  // -1 is a dim, never the `unbiased` flag: not var(unbiased=true) over all 60 elements
  Tensor x = fx().get("var_m1.x");
  EXPECT_EQ(x.var(-1).shape(), (Shape{4, 5}));
  EXPECT_EQ(x.var(0).shape(), (Shape{5, 3}));
  EXPECT_EQ(var(x, 1).shape(), (Shape{4, 3}));
  EXPECT_EQ(x.std(-1).shape(), (Shape{4, 5}));
  EXPECT_EQ(x.var(true).shape(), Shape{});
}

TEST(ApiSpellings, MaxAlongADimIsAValuesIndicesPair) {
  Tensor x = fx().get("max_m1.x");
  auto [values, indices] = x.max(-1);
  expect_close(values, fx().get("max_m1.out"), 0, 0, "values");
  expect_close(indices, fx().get("max_m1.out1"), 0, 0, "indices");
  auto [mv, mi] = min(x, 0, true);
  expect_close(mv, fx().get("min_0_keep.out"), 0, 0, "min values");
  expect_close(mi, fx().get("min_0_keep.out1"), 0, 0, "min indices");
  // torch.max(x, y) is the elementwise maximum
  Tensor y = x * -1.0;
  expect_close(max(x, y), maximum(x, y), 0, 0, "max(x, y)");
  expect_close(x.min(y), minimum(x, y), 0, 0, "x.min(y)");
}

TEST(ApiSpellings, SplitWithABracedListMeansSizes) {
  // torch.split(x, [3], 0) is one piece of size 3; split(x, {3}, 0) must not be split_size 3
  Tensor x = fx().get("split_one_size.x");
  std::vector<Tensor> pieces = split(x, {3}, 0);
  ASSERT_EQ(pieces.size(), 1u);
  expect_close(pieces[0], fx().get("split_one_size.out"), 0, 0, "split(x, {3}, 0)");
  // with split_size 2 this would be two pieces; as sizes it is an error, as in torch
  EXPECT_THROW(split(zeros({2, 3}), {2}, 1), Error);
  EXPECT_EQ(split(zeros({2, 3}), 2, 1).size(), 2u);
  EXPECT_EQ(zeros({2, 5}).split({2, 3}, 1)[1].shape(), (Shape{2, 3}));
}

TEST(ApiSpellings, ArangeInfersItsDtypeLikeTorch) {
  // a floating step makes float32 [0, 0.25, 0.5, 0.75], as torch (not int64 [0, 0, 0, 0])
  expect_close(arange(0, 1, 0.25), fx().get("arange_float.out"), 0, 0, "arange(0, 1, 0.25)");
  expect_close(arange(3.0), fx().get("arange_float_end.out"), 0, 0, "arange(3.0)");
  expect_close(arange(2, 7, 2), fx().get("arange_int.out"), 0, 0, "arange(2, 7, 2)");
  EXPECT_EQ(arange(3.0).dtype(), kFloat32);
  EXPECT_EQ(arange(int64_t{3}).dtype(), kInt64);
  EXPECT_EQ(arange(0, 4, 1, kFloat64).dtype(), kFloat64);
}

TEST(ApiSpellings, FullInfersItsDtypeLikeTorch) {
  // torch.full((2, 3), 7) is int64, full((2,), True) bool, full((2,), 1.5) float32
  expect_close(full({2, 3}, 7), fx().get("full_int.out"), 0, 0, "full(s, 7)");
  expect_close(full({2}, true), fx().get("full_bool.out"), 0, 0, "full(s, true)");
  expect_close(full({2}, 1.5), fx().get("full_float.out"), 0, 0, "full(s, 1.5)");
  EXPECT_EQ(full({2}, 7, kFloat64).dtype(), kFloat64);
}

TEST(ApiSpellings, PlainIntViewFormsEqualTheBracedForms) {
  Tensor x = randn({2, 3, 4});
  const int64_t b = 2, t = 3, h = 2, d = 2;
  EXPECT_EQ(x.view(b, t, h, d).shape(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(x.view(-1).shape(), (Shape{24}));
  expect_close(x.view(6, -1), x.view({6, 4}), 0, 0, "view");
  expect_close(x.permute(2, 0, 1), x.permute({2, 0, 1}), 0, 0, "permute");
  expect_close(x.transpose(-2, -1), x.transpose(1, 2), 0, 0, "transpose");
  expect_close(x.permute(2, 0, 1).reshape(4, 6), x.permute({2, 0, 1}).reshape({4, 6}), 0, 0, "reshape");
  expect_close(x.flatten(0, 1), x.reshape({6, 4}), 0, 0, "flatten");
  expect_close(x.sum(-1), x.sum({2}), 0, 0, "sum(-1)");
  expect_close(x.mean(-1, true), x.mean({2}, true), 0, 0, "mean(-1, true)");
  expect_close(x.slice(2, 0, 1).expand(2, 3, 5), x.slice(2, 0, 1).expand({2, 3, 5}), 0, 0, "expand");
  // the grad_fn names are torch's
  Tensor w = randn({2, 3}).requires_grad_();
  EXPECT_EQ(w.view(-1).grad_fn_name(), "ViewBackward0");
  EXPECT_EQ(w.permute(1, 0).grad_fn_name(), "PermuteBackward0");
  EXPECT_EQ(w.var(-1).grad_fn_name(), "VarBackward0");
  EXPECT_EQ(w.std(-1).grad_fn_name(), "StdBackward0");
}

}  // namespace
}  // namespace xgrad::testing
