// seed004_mhlinear: notebook 004 (batched attention, then a multi-head projection MHLinear
// with one (T, n_heads, d_k) weight and one GEMM for all heads, and an MHA built on it)
// re-run with xgrad.
//
// Like the notebook, attn() and the checks read the globals d_k, B, N, T, n_heads, which cell
// 114 reassigns. MHLinear is xgrad's nn::MHLinear (the notebook's class, same init and
// forward); the MHA class is the notebook's, written with xgrad's Module API. torch.bmm is
// matmul on 3-D tensors in xgrad (a batched matmul), and torch.allclose is seeds::allclose.
//
// Checked against the notebook's printed numbers: w_Q, xT, w_QT, out, out_fmt, both
// allclose(...) == True, and the shapes. The notebook prints only the shape of m(x); its
// values are checked too, against numbers produced by torch 1.13 with the notebook's code
// (they are not in the notebook):
//   torch.manual_seed(0); m = MHA(n_heads=2, N=5, T=3, d_k=2, d_out=3); print(m(x))
//
//   build/examples/seeds/seed004_mhlinear
#include <xgrad/xgrad.h>

#include <cmath>
#include <iostream>
#include <memory>

#include "check.h"

using namespace xgrad;

// In [30]: the notebook's globals
int64_t d_k = 3;
int64_t B = 2;
int64_t N = 5;
int64_t T = 6;
int64_t n_heads = 4;

// In [31]
Tensor attn(const Tensor& Q, const Tensor& K, const Tensor& V, const Tensor& mask) {
  Tensor QKT = matmul(Q, K.transpose(-2, -1)) * std::pow(d_k, -.5);
  Tensor masked_QKT = QKT.masked_fill(mask, -INFINITY);
  Tensor weights = softmax(masked_QKT, -1);
  return matmul(weights, V);
}

// In [125]: MHLinear is nn::MHLinear; the MHA is the notebook's
class MHA : public nn::Module {
 public:
  MHA(int64_t n_heads, int64_t N, int64_t T, int64_t d_k, int64_t d_out) {
    Q = register_module("Q", std::make_shared<nn::MHLinear>(n_heads, T, d_k));
    K = register_module("K", std::make_shared<nn::MHLinear>(n_heads, T, d_k));
    V = register_module("V", std::make_shared<nn::MHLinear>(n_heads, T, d_k));
    out = register_module("out", std::make_shared<nn::Linear>(n_heads * d_k, d_out));
    // a plain attribute in the notebook (not a buffer), so not registered here either
    mask = triu(ones({N, N}), 1).to(kBool);
  }

  Tensor forward(const Tensor& X) override {
    auto [B, N, T] = X.shape3();
    Tensor mha = attn(/*Q=*/(*Q)(X), /*K=*/(*K)(X), /*V=*/(*V)(X), /*mask=*/mask);  // (B, n_heads, N, d_k)
    mha = mha.transpose(1, 2).contiguous().view({B, N, -1});                        // (B, N, n_heads*d_k)
    return (*out)(mha);                                                             // project to d_out
  }

  std::shared_ptr<nn::MHLinear> Q, K, V;
  std::shared_ptr<nn::Linear> out;
  Tensor mask;
};

int main() {
  seeds::Checker check("seed004_mhlinear");

  // In [30]
  manual_seed(0);
  Tensor Q = randn({B, n_heads, N, d_k});
  Tensor K = randn({B, n_heads, N, d_k});
  Tensor V = randn({B, n_heads, N, d_k});

  // In [31]
  // torch.triu(torch.ones((N, N), dtype=torch.bool), diagonal=1)
  Tensor result = attn(Q, K, V, /*mask=*/triu(ones({N, N}), 1).to(kBool));
  std::cout << seeds::size_str(result.shape()) << "\n\n";
  check.shape("attn(Q, K, V, mask).shape", result, {2, 4, 5, 3});

  // In [32]-[33]: does @ do the batched matrix multiply? Unroll and use bmm
  manual_seed(0);
  Tensor a = randn({B, n_heads, N, d_k});
  Tensor b = randn({B, n_heads, N, d_k});
  Tensor a_unrolled = a.view({-1, N, d_k});
  Tensor b_unrolled = b.view({-1, N, d_k});
  Tensor bmm = matmul(a_unrolled, b_unrolled.transpose(-2, -1)).view({B, n_heads, N, N}).contiguous();
  Tensor regular = matmul(a, b.transpose(-2, -1));
  const bool same = seeds::allclose(bmm, regular);
  std::cout << (same ? "True" : "False") << "\n\n";
  check.is_true("torch.allclose(bmm, regular)", same);

  // In [114]: weights for all heads as one (T, n_heads, d_k) tensor
  n_heads = 2;
  B = 2;
  N = 5;
  d_k = 2;
  T = 3;

  manual_seed(0);
  Tensor x = randn({B, N, T});
  manual_seed(0);
  Tensor w_Q = empty({T, n_heads, d_k});
  const double r = std::pow(1.0 / T, .5);
  nn::init::uniform_(w_Q, /*a=*/-r, /*b=*/r);
  std::cout << w_Q << "\n\n";
  check.tensor("w_Q", w_Q, {3, 2, 2},
               {-0.0043, 0.3097, -0.4752, -0.4249,

                -0.2224, 0.1548, -0.0114, 0.4578,

                -0.0512, 0.1528, -0.1745, -0.1135});

  // In [115]
  Tensor xT = x.view({-1, T});  // (B * N, T)
  std::cout << xT << "\n\n";
  check.tensor("xT", xT, {10, 3},
               {-1.1258, -1.1524, -0.2506, -0.4339, 0.8487,  0.6920,  -0.3160, -2.1152, 0.3223,  -1.2633,
                0.3500,  0.3081,  0.1198,  1.2377,  -0.1435, -0.1116, -0.6136, 0.0316,  -0.4927, 0.2484,
                0.4397,  0.1124,  -0.8411, -2.3160, -0.1023, 0.7924,  -0.2897, 0.0525,  0.5229,  2.3022});

  // In [116]
  Tensor w_QT = w_Q.view({T, -1});  // (T, n_heads * d_k)
  std::cout << w_QT << "\n\n";
  check.tensor("w_QT", w_QT, {3, 4},
               {-0.0043, 0.3097, -0.4752, -0.4249, -0.2224, 0.1548, -0.0114, 0.4578, -0.0512, 0.1528, -0.1745,
                -0.1135});

  // In [117]
  Tensor out = matmul(xT, w_QT);  // (B*N, n_heads*d_k)
  std::cout << out << "\n\n";
  check.tensor("out", out, {10, 4},
               {0.2740, -0.5654, 0.5919,  -0.0207, -0.2223, 0.1027,  0.0757,  0.4943, 0.4552,  -0.3761,
                0.1181, -0.8706, -0.0882, -0.2900, 0.5426,  0.6620,  -0.2684, 0.2068, -0.0461, 0.5319,
                0.1353, -0.1247, 0.0545,  -0.2370, -0.0756, -0.0470, 0.1546,  0.2732, 0.3052,  -0.4492,
                0.3603, -0.1699, -0.1609, 0.0467,  0.0901,  0.4391,  -0.2345, 0.4489, -0.4326, -0.0442});

  // In [118]
  Tensor out_fmt = out.view({B, N, n_heads, d_k}).transpose(1, 2).contiguous();  // (B, n_heads, N, d_k)
  std::cout << out_fmt << "\n\n";
  check.tensor("out_fmt", out_fmt, {2, 2, 5, 2},
               {0.2740, -0.5654, -0.2223, 0.1027,  0.4552, -0.3761, -0.0882, -0.2900, -0.2684, 0.2068,

                0.5919, -0.0207, 0.0757,  0.4943,  0.1181, -0.8706, 0.5426,  0.6620,  -0.0461, 0.5319,

                0.1353, -0.1247, -0.0756, -0.0470, 0.3052, -0.4492, -0.1609, 0.0467,  -0.2345, 0.4489,

                0.0545, -0.2370, 0.1546,  0.2732,  0.3603, -0.1699, 0.0901,  0.4391,  -0.4326, -0.0442});

  // In [119]: the same, one head at a time: out_fmt_2[:, i, :, :] = x @ w_Q[:, i, :]
  Tensor out_fmt_2 = empty({B, n_heads, N, d_k});
  for (int64_t i = 0; i < n_heads; ++i) out_fmt_2.select(1, i).copy_(matmul(x, w_Q.select(1, i)));
  const bool same_heads = seeds::allclose(out_fmt_2, out_fmt);
  std::cout << (same_heads ? "True" : "False") << "\n\n";
  check.is_true("torch.allclose(out_fmt_2, out_fmt)", same_heads);

  // nn::MHLinear draws its weight like uniform_parameter((T, n_heads, d_k), -T**-.5, T**-.5)
  // and projects exactly as above
  manual_seed(0);
  nn::MHLinear projection(n_heads, T, d_k);
  check.is_true("nn::MHLinear weights == w_Q", seeds::allclose(projection.weights, w_Q));
  check.is_true("nn::MHLinear(x) == out_fmt", seeds::allclose(projection(x), out_fmt));

  // In [125]
  manual_seed(0);
  auto m = std::make_shared<MHA>(/*n_heads=*/n_heads, /*N=*/N, /*T=*/T, /*d_k=*/d_k, /*d_out=*/T);
  Tensor y = (*m)(x);
  std::cout << seeds::size_str(y.shape()) << "\n";
  check.shape("m(x).shape", y, {2, 5, 3});
  std::cout << "\nm(x) (not printed in the notebook; checked against torch 1.13):\n" << y << "\n";
  check.tensor("m(x) [torch 1.13]", y, {2, 5, 3},
               {-0.3417, -0.1401, 0.0299,  -0.3181, -0.1358, 0.2498,  -0.3886, 0.0197,
                0.0842,  -0.3939, 0.0369,  0.1072,  -0.3172, -0.0629, 0.2396,

                -0.3033, 0.0973,  0.1645,  -0.3079, 0.0064,  0.2460,  -0.1077, -0.1684,
                0.2557,  -0.1407, -0.1695, 0.2989,  -0.2511, -0.0138, 0.3655});

  return check.finish();
}
