// xtensor_interop: bring xtensor arrays into xgrad, train on them, and read the results back
// as xtensor expressions, without copying (<xgrad/xtensor.h>).
//
// The story: data prepared with xtensor (a (64, 3) feature matrix and a target column), a
// linear model fitted with xgrad's autograd, the learned weights read back with xtensor.
// Along the way: the four ways an array becomes a tensor (share, hand over, borrow, copy),
// which of them share memory, and what happens with a layout xgrad cannot share.
//
//   build/examples/xtensor_interop
#include <xgrad/xgrad.h>
#include <xgrad/xtensor.h>  // the only xgrad header that includes xtensor

#include <xtensor/xio.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xview.hpp>

#include <cmath>
#include <iostream>
#include <memory>

using namespace xgrad;

int main() {
  // ---- 1. Data made with xtensor: y = X @ [2, -1, 0.5] + 1 + noise
  const std::size_t n = 64;
  xt::random::seed(0);
  auto X = std::make_shared<xt::xarray<float>>(xt::random::randn<float>({n, std::size_t{3}}));
  const xt::xarray<float> true_w = {2.f, -1.f, 0.5f};
  // a reduction goes into a concrete array before anything else uses it: a lazy reduction
  // inside a broadcast expression can give wrong values (xtensor 0.24), and is recomputed
  // on every access
  xt::xarray<float> y = xt::sum(*X * true_w, {1});  // (n,)
  y = y + 1.f + 0.05f * xt::random::randn<float>({n});
  y.reshape({n, 1});  // (n, 1)

  // ---- 2. Into xgrad. A shared_ptr shares the memory, like torch.from_numpy: the tensor
  // keeps the array alive, and a write on either side shows on the other.
  Tensor x = from_xtensor(X);  // (n, 3), no copy
  std::cout << "x shares X's memory: " << std::boolalpha << (x.data_ptr<float>() == X->data()) << ", shape "
            << shape_str(x.shape()) << "\n";
  // std::move hands an array over (no copy either); y is empty afterwards.
  Tensor target = from_xtensor(std::move(y));  // (n, 1)

  // ---- 3. Train with autograd. Parameters are ordinary xgrad leaves.
  Tensor w = zeros({3, 1}).requires_grad_();  // (3, 1)
  Tensor b = zeros({1}).requires_grad_();     // (1)
  const double lr = 0.1;
  for (int step = 0; step <= 200; ++step) {
    Tensor pred = matmul(x, w) + b;                 // (n, 1)
    Tensor loss = (pred - target).pow(2.0).mean();  // ()
    loss.backward();
    {
      NoGradGuard no_grad;
      w.add_(w.grad(), -lr);
      b.add_(b.grad(), -lr);
    }
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << loss.item() << "\n";
  }

  // ---- 4. Back to xtensor. to_xtensor views the tensor's memory (like t.numpy()); a tensor
  // that requires grad is refused, as in torch: view its detached twin.
  auto learned = to_xtensor<float>(w.detach());    // (3, 1) adaptor, no copy
  xt::xarray<float> w_row = xt::flatten(learned);  // a copy: (3,)
  std::cout << "learned w = " << w_row << " (true " << true_w << "), b = " << b.item() << " (true 1)\n";

  // ---- 5. Strided views are shared too; borrowing means you keep the array alive.
  Tensor x_t = from_xtensor(xt::transpose(*X), borrow);  // (3, n), strides (1, 3)
  std::cout << "X^T borrowed: strides " << shape_str(x_t.strides()) << "\n";
  Tensor first_rows = from_xtensor(xt::view(*X, xt::range(0, 4), xt::all()), borrow);
  first_rows.mul_(0.0);  // writes into X itself
  std::cout << "after zeroing 4 rows through a borrowed view, X(0, 0) = " << (*X)(0, 0) << "\n";

  // ---- 6. A layout xgrad cannot share (negative strides) is refused; xgrad::tensor copies.
  xt::xarray<float> small = {{1.f, 2.f}, {3.f, 4.f}};
  try {
    from_xtensor(xt::flip(small, 0), borrow);
  } catch (const Error& e) {
    std::cout << "refused: " << e.what() << "\n";
  }
  Tensor copied = xgrad::tensor(xt::flip(small, 0));  // [[3, 4], [1, 2]]
  std::cout << "copied: " << copied << "\n";

  const bool fitted = xt::allclose(w_row, true_w, 0.0, 0.05) && std::abs(b.item() - 1.0) < 0.05 &&
                      (*X)(0, 0) == 0.f && copied.to_vector<float>()[0] == 3.f;
  std::cout << (fitted ? "ok" : "FAILED") << "\n";
  return fitted ? 0 : 1;
}
