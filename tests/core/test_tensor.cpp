// tests/core/test_tensor.cpp: creation, accessors, dtypes, storage identity, set_data, out of
// memory, and printing (compared with the reprs torch printed for the same tensors:
// tests/fixtures/print.txt from gen_print.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

std::map<std::string, std::string> read_reprs() {
  std::ifstream in(std::string(XGRAD_FIXTURES_DIR) + "/print.txt");
  std::map<std::string, std::string> out;
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      name = line.substr(4);
      out[name] = "";
    } else {
      if (!out[name].empty()) out[name] += "\n";
      out[name] += line;
    }
  }
  return out;
}

TEST(Tensor, PrintsLikeTorch) {
  auto reprs = read_reprs();
  ASSERT_EQ(reprs.size(), 16u) << "fixture print.txt missing or changed";
  const double inf = INFINITY;
  std::map<std::string, Tensor> cases = {
      {"small2d", tensor({{0.3374, -0.1778}, {-0.3035, -0.5880}})},
      {"int2d", arange(12).reshape({3, 4})},
      {"intmode3d", arange(0, 24, 1, kFloat32).reshape({2, 3, 4})},
      {"summarized2d", arange(0, 2000, 1, kFloat32).reshape({40, 50}) / 7.0},
      {"summarized1d", arange(0, 1500, 1, kFloat32) / 3.0},
      {"sci", tensor({1e-5, 1.0, 1000.0})},
      {"bool", arange(6).reshape({2, 3}) > 2.0},
      {"float64", tensor({1.5, 2.25}, kFloat64)},
      {"requires_grad", tensor({1.0, 2.0}).requires_grad_()},
      {"grad_fn", tensor({1.0, 2.0}).requires_grad_() * 2.0},
      {"inf", tensor({1.0, -inf, 0.5})},
      {"empty", zeros({0, 3})},
      {"scalar", scalar_tensor(3.1416)},
      {"wrap", arange(0, 30, 1, kFloat32) / 3.0},
      {"negzero_mix", tensor({{-1.25, 0.0}, {3.5, -0.0}})},
      {"big4d", arange(0, 24, 1, kFloat32).reshape({2, 2, 2, 3}) - 5.5},
  };
  for (auto& [name, t] : cases) {
    ASSERT_TRUE(reprs.count(name)) << name;
    EXPECT_EQ(to_string(t), reprs[name]) << "case " << name;
  }
  std::ostringstream os;
  os << cases["small2d"];
  EXPECT_EQ(os.str(), reprs["small2d"]);
}

TEST(Tensor, LiteralsGiveTorchDtypesAndShapes) {
  Tensor a = tensor({{0.43, 0.15, 0.89}, {0.55, 0.87, 0.66}});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_FLOAT_EQ(a.to_vector<float>()[4], 0.87f);
  Tensor ids = tensor({0, 1, 2, 3});
  EXPECT_EQ(ids.dtype(), kInt64);
  Tensor cube = tensor({{{1.0, 2.0}}, {{3.0, 4.0}}});
  EXPECT_EQ(cube.shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(tensor({1.0, 2.0}, kFloat64).dtype(), kFloat64);
  EXPECT_THROW(tensor({{1.0, 2.0}, {3.0}}), Error);
}

TEST(Tensor, CreationFunctions) {
  EXPECT_EQ(zeros({2, 3}).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({4}, kInt64).to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  EXPECT_EQ(full({2}, 2.5).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25, kFloat32).to_vector<float>(), (std::vector<float>{1, 1.25, 1.5, 1.75}));
  auto ls = linspace(-5, 5, 5).to_vector<float>();
  EXPECT_EQ(ls, (std::vector<float>{-5, -2.5, 0, 2.5, 5}));
  EXPECT_EQ(eye(2, 3).to_vector<float>(), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor m = triu(ones({3, 3}), 1);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(tril(ones({2, 2})).to_vector<float>(), (std::vector<float>{1, 0, 1, 1}));
  EXPECT_EQ(zeros_like(m).shape(), m.shape());
  EXPECT_THROW(arange(0, 5, 0), Error);
  EXPECT_THROW(empty({2, -1}), Error);
  EXPECT_THROW(randint(5, 5, {2}), Error);
}

TEST(Tensor, SeededRandomMatchesTorch) {
  manual_seed(123);
  auto r = rand({4, 4}).to_vector<float>();
  EXPECT_NEAR(r[0], 0.2961, 1e-4);
  EXPECT_NEAR(r[1], 0.5166, 1e-4);
  manual_seed(123);
  auto n = randn({20}).to_vector<float>();
  EXPECT_NEAR(n[0], 0.3374, 1e-4);
  EXPECT_NEAR(n[1], -0.1778, 1e-4);
  Generator g(123);
  EXPECT_NEAR(rand({1}, &g).item(), 0.2961, 1e-4);
}

TEST(Tensor, Accessors) {
  Tensor t = arange(0, 6, 1, kFloat32).reshape({2, 3});
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.t().is_contiguous());
  EXPECT_EQ(t[1][2].item(), 5.0);
  auto [rows, cols] = t.shape2();
  EXPECT_EQ(rows * cols, 6);
  EXPECT_THROW(t.shape3(), Error);
  EXPECT_THROW(t.item(), Error);
  EXPECT_THROW(t.size(2), Error);
  EXPECT_THROW(t.data_ptr<double>(), Error);
  EXPECT_THROW(Tensor().shape(), Error);
  Tensor c = t.clone();
  EXPECT_NE(c.data_ptr<float>(), t.data_ptr<float>());
  EXPECT_EQ(c.to_vector<float>(), t.to_vector<float>());
  Tensor d = t.detach();
  EXPECT_EQ(d.data_ptr<float>(), t.data_ptr<float>());
  EXPECT_EQ(t.to(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(t.to(kInt64).to_vector<int64_t>()[5], 5);
}

TEST(Tensor, InPlaceOpsBumpTheVersionAndBroadcast) {
  Tensor t = zeros({2, 3});
  const uint64_t v0 = t.version();
  t.fill_(2.0);
  EXPECT_EQ(t.version(), v0 + 1);
  t.add_(tensor({1.0, 2.0, 3.0}), 2.0);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{4, 6, 8, 4, 6, 8}));
  t.mul_(0.5);
  t.t().copy_(ones({3, 2}));
  EXPECT_EQ(t.to_vector<float>(), std::vector<float>(6, 1.0f));
  EXPECT_THROW(t.copy_(ones({4})), Error);
  Tensor leaf = zeros({2}).requires_grad_();
  EXPECT_THROW(leaf.fill_(1.0), Error);
  {
    NoGradGuard g;
    leaf.fill_(1.0);  // allowed under no-grad, like torch
  }
  EXPECT_EQ(leaf.to_vector<float>(), (std::vector<float>{1, 1}));
}

}  // namespace
}  // namespace xgrad

namespace xgrad {
namespace {
TEST(Tensor, BracedDimsAreDimsNotFlags) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 6.0, 8.0}});
  EXPECT_EQ(x.var({1}).shape(), (Shape{2}));
  EXPECT_EQ(var(x, {1}).shape(), (Shape{2}));
  EXPECT_EQ(x.var({0}).shape(), (Shape{3}));
  EXPECT_NEAR(x.var({1}).to_vector<float>()[1], 4.0, 1e-6);
  EXPECT_EQ(x.var(false).dim(), 0);
}
}  // namespace
}  // namespace xgrad

namespace xgrad {
namespace {
TEST(Tensor, FreedStorageIsReusedAndCanBeReleased) {
  empty_cache();
  EXPECT_EQ(cached_bytes(), 0);
  const int64_t live = memory_stats().current_bytes;
  void* first = nullptr;
  {
    Tensor a = empty({1000, 1000});
    first = a.raw_data_ptr();
    EXPECT_EQ(memory_stats().current_bytes, live + 4'000'000);
  }
  EXPECT_EQ(memory_stats().current_bytes, live);  // live bytes count only live tensors
#ifndef XGRAD_ADDRESS_SANITIZER
  EXPECT_GE(cached_bytes(), 4'000'000);
  Tensor b = zeros({999, 1000});  // a slightly smaller tensor lands in the same size class
  EXPECT_EQ(b.raw_data_ptr(), first);
  EXPECT_EQ(b.sum().item(), 0.0);  // reused memory is still zeroed by zeros()
  b = Tensor();
  EXPECT_GT(cached_bytes(), 0);
#else
  EXPECT_EQ(cached_bytes(), 0);  // ASan must see every free
  (void)first;
#endif
  empty_cache();
  EXPECT_EQ(cached_bytes(), 0);
}
}  // namespace
}  // namespace xgrad

namespace xgrad {
namespace {
TEST(Tensor, OutOfMemoryIsCaughtByTypeAndNamesTheRequest) {
#if defined(XGRAD_ADDRESS_SANITIZER)
  GTEST_SKIP() << "AddressSanitizer aborts on a 4 PiB request instead of returning null";
#endif
  // 2^50 float64 elements (8 PiB): the counts fit in int64, the allocation cannot succeed
  try {
    empty({int64_t{1} << 25, int64_t{1} << 25}, kFloat64);
    FAIL() << "expected xgrad::OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("empty"), std::string::npos) << m;
    EXPECT_NE(m.find("[33554432, 33554432]"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
    EXPECT_NE(m.find("out of memory"), std::string::npos) << m;
  }
  // an OutOfMemory is an Error, so code that catches Error still sees it
  EXPECT_THROW(zeros({int64_t{1} << 25, int64_t{1} << 25}), Error);
  // a bad shape is an Error but not an OutOfMemory
  try {
    empty({-1, 2});
    FAIL() << "expected xgrad::Error";
  } catch (const OutOfMemory&) {
    FAIL() << "a negative size is not an allocation failure";
  } catch (const Error&) {
  }
}

TEST(Tensor, StorageIdentity) {
  Tensor a = arange(0, 6, 1, kFloat32).reshape({2, 3});
  Tensor v = a.t().slice(0, 1, 3);  // a view of a view
  Tensor d = a.detach();
  Tensor c = a.clone();
  EXPECT_TRUE(v.is_alias_of(a));
  EXPECT_TRUE(a.is_alias_of(v));
  EXPECT_TRUE(d.is_alias_of(v));
  EXPECT_FALSE(c.is_alias_of(a));
  EXPECT_EQ(v.storage_id(), a.storage_id());
  EXPECT_EQ(d.storage_id(), a.storage_id());
  EXPECT_NE(c.storage_id(), a.storage_id());
  EXPECT_NE(a.contiguous().storage_id(), a.t().contiguous().storage_id());  // the second copies
  EXPECT_THROW(Tensor().storage_id(), Error);
  EXPECT_THROW(a.is_alias_of(Tensor()), Error);
}

TEST(Tensor, SetDataSwapsTheDataAndKeepsTheAutogradIdentity) {
  Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor same = w;  // another handle to the same tensor
  (w * w).sum().backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));

  // torch: w.data = torch.tensor([[5., 6.], [7., 8.]], dtype=torch.float64)
  Tensor fresh = tensor({{5.0, 6.0}, {7.0, 8.0}}).to(kFloat64);
  w.set_data(fresh);
  EXPECT_EQ(same.shape(), (Shape{2, 2}));  // every handle sees the new data
  EXPECT_EQ(same.dtype(), kFloat64);
  EXPECT_EQ(same.to_vector<double>(), (std::vector<double>{5, 6, 7, 8}));
  EXPECT_TRUE(w.is_alias_of(fresh));  // the same storage: no copy
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));  // .grad untouched
  w.set_grad(Tensor());
  (w * 2.0).sum().backward();  // the new data is what backward differentiates
  EXPECT_EQ(w.grad().shape(), (Shape{2, 2}));
  EXPECT_EQ(w.grad().dtype(), kFloat64);
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(4, 2.0));

  // a view that takes new data stops being a view: writing its old base leaves it alone
  Tensor base = zeros({4});
  Tensor view = base.slice(0, 0, 2);
  view.set_data(ones({3}));
  base.fill_(5.0);
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_FALSE(view.is_alias_of(base));

  // a tensor that requires grad cannot take integer data; undefined data is refused
  testing::expect_error([&] { w.set_data(arange(3)); }, {"set_data", "int64", "requires grad"});
  testing::expect_error([&] { w.set_data(Tensor()); }, {"set_data", "undefined"});
  Tensor ints = zeros({2});
  ints.set_data(arange(3));  // no grad: any dtype
  EXPECT_EQ(ints.dtype(), kInt64);
}
}  // namespace
}  // namespace xgrad
