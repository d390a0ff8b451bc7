// A program built against an installed xgrad (see CMakeLists.txt next to it). It runs a
// small autograd computation, checks the numbers against values worked out by hand, and
// exits non-zero on any mismatch, so `scripts/test.sh --consumer` fails loudly.
#include <xgrad/text/tokenizer.h>
#include <xgrad/xgrad.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

using namespace xgrad;

namespace {

int failures = 0;

void expect_near(const char* what, const std::vector<double>& got, const std::vector<double>& want) {
  bool ok = got.size() == want.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i)
    ok = std::abs(got[i] - want[i]) <= 1e-5 * (1.0 + std::abs(want[i]));
  std::printf("%-8s %s:", ok ? "ok" : "MISMATCH", what);
  for (double v : got) std::printf(" %g", v);
  if (!ok) {
    std::printf("   (want");
    for (double v : want) std::printf(" %g", v);
    std::printf(")");
    ++failures;
  }
  std::printf("\n");
}

}  // namespace

int main() {
  try {
    // loss = sum((x @ w) * (x @ w)), x (2, 2) constant, w (2, 1) a leaf.
    // x @ w = [1*0.5 + 2*(-1), 3*0.5 + 4*(-1)] = [-1.5, -2.5], loss = 2.25 + 6.25 = 8.5
    // dloss/dw = x^T (2 * x @ w) = [[1, 3], [2, 4]] @ [-3, -5] = [-18, -26]
    Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}});
    Tensor w = tensor({{0.5}, {-1.0}}).requires_grad_();
    Tensor y = matmul(x, w);  // (2, 1), through OpenBLAS
    Tensor loss = (y * y).sum();
    loss.backward();
    expect_near("loss", {loss.item()}, {8.5});
    expect_near("w.grad", w.grad().to_vector<double>(), {-18.0, -26.0});

    // A zero-copy view: x.t() shares x's storage.
    Tensor xt = x.t();
    expect_near("x.t()", xt.contiguous().to_vector<double>(), {1.0, 3.0, 2.0, 4.0});
    if (xt.is_contiguous() || xt.data_ptr<float>() != x.data_ptr<float>()) {
      std::printf("MISMATCH x.t() is not a view of x\n");
      ++failures;
    }

    // The tokenizers come with xgrad::xgrad: a BPE learnt from "aaab aaab aaab ab" merges
    // (a, a), then (a, b), so "aab" is the tokens 256 ("aa") and 'b'.
    auto bpe = xgrad::text::BPETokenizer::train("aaab aaab aaab ab", 2);
    const std::vector<int64_t> ids = bpe.encode("aab");
    expect_near("bpe ids", std::vector<double>(ids.begin(), ids.end()), {256.0, 98.0});
  } catch (const std::exception& e) {
    std::printf("exception: %s\n", e.what());
    return 1;
  }
  if (failures) {
    std::printf("consumer: %d mismatch(es)\n", failures);
    return 1;
  }
  std::printf("consumer: all checks passed\n");
  return 0;
}
