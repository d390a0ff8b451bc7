// examples/extending/test_extending.cpp: the tests of the silu op and the RMSNorm module,
// written the way xgrad tests its own ops and modules:
//   - values and gradients against numbers printed by PyTorch (torch 1.13, float32),
//   - xgrad::gradcheck (float64, several shapes, a non-contiguous input),
//   - a broken backward that gradcheck must reject (proof that the check can fail),
//   - errors that name the op and the shapes, and the module API (parameters, printing,
//     state_dict, containers).
//
// The reference numbers come from this snippet (torch 1.13 has no nn.RMSNorm, so its
// formula is written out; torch >= 2.4's nn.RMSNorm gives the same numbers):
//
//   import torch, torch.nn.functional as F
//   x = torch.tensor([[-3.0, -1.5, -0.25, 0.0, 0.5], [1.0, 2.0, 4.0, -0.75, 0.1]],
//                    requires_grad=True)
//   w = torch.tensor([[0.5, -1.0, 2.0, 1.5, -0.5], [1.0, 0.25, -2.0, 3.0, 0.75]])
//   y = F.silu(x); (y * w).sum().backward()            # y, x.grad
//   x = torch.tensor([[1.0, -2.0, 3.0, 0.5], [0.1, 0.2, -0.3, 0.4]], requires_grad=True)
//   weight = torch.tensor([1.0, 0.5, -2.0, 1.5], requires_grad=True)
//   w2 = torch.tensor([[0.3, -1.0, 0.5, 2.0], [1.0, -0.5, 0.25, 0.75]])
//   y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
//   (y * w2).sum().backward()                          # y, x.grad, weight.grad
#include <gtest/gtest.h>
#include <xgrad/xgrad.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "rmsnorm.h"
#include "silu.h"

using namespace xgrad;

namespace {

void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& expected,
                   double atol = 1e-5) {
  ASSERT_EQ(t.shape(), shape);
  const std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], atol) << "element " << i;
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no xgrad::Error thrown)";
}

// float64 randn leaf requiring grad
Tensor leaf(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, &gen, kFloat64).requires_grad_();
}

}  // namespace

// ------------------------------------------------------------------ silu

TEST(Silu, MatchesTorch) {
  Tensor x = tensor({{-3.0, -1.5, -0.25, 0.0, 0.5}, {1.0, 2.0, 4.0, -0.75, 0.1}}).requires_grad_();
  Tensor w = tensor({{0.5, -1.0, 2.0, 1.5, -0.5}, {1.0, 0.25, -2.0, 3.0, 0.75}});
  Tensor y = ext::silu(x);
  EXPECT_EQ(y.grad_fn_name(), "SiluBackward0");
  EXPECT_EQ(y.dtype(), kFloat32);
  (y * w).sum().backward();
  expect_values(y, {2, 5},
                {-0.142278, -0.273638, -0.109456, 0.000000, 0.311230, 0.731059, 1.761594, 3.928055, -0.240616,
                 0.052498});
  expect_values(x.grad(), {2, 5},
                {-0.044052, 0.041294, 0.752580, 0.750000, -0.369981, 0.927671, 0.272696, -2.105329, 0.472200,
                 0.412438});
}

TEST(Silu, EqualsTheLibrarysSilu) {
  manual_seed(3);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = randn({4, 7}).to(dt);
    const auto mine = ext::silu(x).to(kFloat64).to_vector<double>();
    const auto lib = xgrad::silu(x).to(kFloat64).to_vector<double>();
    ASSERT_EQ(mine.size(), lib.size());
    for (std::size_t i = 0; i < mine.size(); ++i)
      EXPECT_NEAR(mine[i], lib[i], 1e-6 * (1 + std::abs(lib[i]))) << dtype_name(dt) << " element " << i;
  }
}

TEST(Silu, Gradcheck) {
  auto fn = [](const std::vector<Tensor>& in) { return ext::silu(in[0]); };
  for (const Shape& shape : {Shape{7}, Shape{3, 4}, Shape{2, 3, 5}}) {
    auto r = gradcheck(fn, {leaf(shape, 1)}, {.name = "silu"});
    EXPECT_TRUE(r.ok) << r.message;
  }
  // a non-contiguous input: the transpose of a (5, 3) leaf
  Tensor base = leaf({5, 3}, 2);
  auto r = gradcheck([](const std::vector<Tensor>& in) { return ext::silu(in[0].t()); }, {base},
                     {.name = "silu/transposed"});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Silu, ModuleAndNoGrad) {
  ext::SiLU act;
  EXPECT_EQ(act.repr(), "SiLU()");
  Tensor x = leaf({4}, 3);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(act(x).requires_grad());  // nothing recorded under no_grad
  }
  EXPECT_TRUE(act(x).requires_grad());
}

TEST(Silu, RejectsIntegerTensors) {
  const std::string msg = error_message([] { ext::silu(tensor({1, 2, 3})); });
  EXPECT_NE(msg.find("silu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
}

// The same forward with a deliberately wrong backward (it forgets the x * s * (1 - s) term):
// gradcheck must fail and say where.
Tensor silu_with_wrong_backward(const Tensor& x) {
  Tensor out = ext::silu(x.detach());
  return record("SiluBackward0", out, {x}, [x = save(x)](const Tensor& dout, Grads& grads) {
    grads.add(0, dout * sigmoid(x.get()));  // wrong: d/dx x*s is s + x*s*(1-s)
  });
}

TEST(Silu, GradcheckCatchesAWrongBackward) {
  auto r = gradcheck([](const std::vector<Tensor>& in) { return silu_with_wrong_backward(in[0]); },
                     {leaf({3, 4}, 4)}, {.name = "silu_with_wrong_backward"});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("silu_with_wrong_backward"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("analytic"), std::string::npos) << r.message;
}

// ------------------------------------------------------------------ RMSNorm

TEST(RMSNorm, MatchesTorch) {
  ext::RMSNorm norm(4, /*eps=*/1e-6);
  {
    NoGradGuard no_grad;
    norm.weight.copy_(tensor({1.0, 0.5, -2.0, 1.5}));
  }
  Tensor x = tensor({{1.0, -2.0, 3.0, 0.5}, {0.1, 0.2, -0.3, 0.4}}).requires_grad_();
  Tensor w2 = tensor({{0.3, -1.0, 0.5, 2.0}, {1.0, -0.5, 0.25, 0.75}});
  Tensor y = norm(x);
  (y * w2).sum().backward();
  expect_values(y, {2, 4},
                {0.529813, -0.529813, -3.178877, 0.397360, 0.365146, 0.365146, 2.190876, 2.190876});
  expect_values(x.grad(), {2, 4},
                {0.166380, -0.279778, -0.507505, 1.593157, 2.860320, -2.495143, 0.547688, 0.943336}, 2e-5);
  expect_values(norm.weight.grad(), {4}, {0.524090, 0.694480, 0.520860, 1.625251});
}

TEST(RMSNorm, Gradcheck) {
  auto norm = std::make_shared<ext::RMSNorm>(5, 1e-6);
  norm->to(kFloat64);
  {
    NoGradGuard no_grad;
    norm->weight.copy_(randn({5}, nullptr, kFloat64));  // not all ones, so weight matters
  }
  // inputs: x, and the module's own weight (gradcheck perturbs it in place, which the module
  // sees because it holds the same tensor)
  auto fn = [norm](const std::vector<Tensor>& in) { return (*norm)(in[0]); };
  for (const Shape& shape : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}}) {
    auto r = gradcheck(fn, {leaf(shape, 5), norm->weight}, {.name = "RMSNorm"});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

TEST(RMSNorm, ParametersAndPrinting) {
  ext::RMSNorm norm(8, 1e-6);
  auto named = norm.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "weight");
  expect_values(norm.weight, {8}, std::vector<double>(8, 1.0), 0.0);  // reset_parameters: ones
  EXPECT_EQ(norm.repr(), "RMSNorm((8,), eps=1e-06, elementwise_affine=True)");
  EXPECT_EQ(ext::RMSNorm(8).repr(), "RMSNorm((8,), eps=None, elementwise_affine=True)");

  ext::RMSNorm plain(8, std::nullopt, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.parameters().empty());
  EXPECT_FALSE(plain.weight.defined());
}

TEST(RMSNorm, InAContainerWithStateDict) {
  manual_seed(0);
  auto block = std::make_shared<nn::Sequential>();
  block->push_back(std::make_shared<nn::Linear>(4, 8));
  block->push_back(std::make_shared<ext::SiLU>());
  block->push_back(std::make_shared<ext::RMSNorm>(8, 1e-5));
  std::vector<std::string> keys = block->state_dict().keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"0.weight", "0.bias", "2.weight"}));

  Tensor y = (*block)(randn({2, 3, 4}));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 8}));
  y.sum().backward();
  for (const auto& [name, p] : block->named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;

  std::ostringstream os;
  os << *block;
  EXPECT_NE(os.str().find("(2): RMSNorm((8,), eps=1e-05, elementwise_affine=True)"), std::string::npos)
      << os.str();
}

TEST(RMSNorm, RejectsAWrongLastDim) {
  ext::RMSNorm norm(4);
  const std::string msg = error_message([&] { norm(zeros({2, 3})); });
  EXPECT_NE(msg.find("RMSNorm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
}

// ------------------------------------------------------------------ the guide

// docs/extending.md quotes this folder: each code block that follows a line
// "From `examples/extending/<file>`:" must appear verbatim in <file>, so the guide cannot
// drift from the code that is compiled and tested here.
TEST(Docs, ExcerptsAreTheRealCode) {
  const std::string dir = XGRAD_EXT_SOURCE_DIR;
  std::ifstream doc(dir + "/../../docs/extending.md");
  if (!doc) GTEST_SKIP() << "docs/extending.md is not beside this folder";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string marker = "From `examples/extending/";
  std::string line, file;
  int excerpts = 0;
  while (std::getline(doc, line)) {
    if (auto at = line.find(marker); at != std::string::npos) {
      const std::size_t start = at + marker.size();
      file = line.substr(start, line.find('`', start) - start);
      continue;
    }
    if (file.empty() || line.rfind("```", 0) != 0) continue;
    std::string block;  // up to the closing fence
    while (std::getline(doc, line) && line.rfind("```", 0) != 0) block += line + "\n";
    const std::string source = read(dir + "/" + file);
    EXPECT_FALSE(source.empty()) << file << " is missing";
    EXPECT_NE(source.find(block), std::string::npos)
        << "docs/extending.md quotes " << file << " but the file has no such text:\n"
        << block;
    ++excerpts;
    file.clear();
  }
  EXPECT_GE(excerpts, 8);
}
