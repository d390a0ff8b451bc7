// demo_autograd: fit y = 3x + 2 with autograd and a hand-written SGD loop.
//
// The data are 64 points on [-1, 1] with a little Gaussian noise. The model is
// pred = x @ w + b with w (1, 1) and b (1); the loss is the mean squared error. Each step:
// forward, loss.backward(), then update w and b in place under NoGradGuard (like
// `with torch.no_grad(): w -= lr * w.grad`) and reset their gradients. The same loop in
// PyTorch (torch.manual_seed(0), torch.linspace, torch.randn) prints the same losses and
// ends at the same w = 3.0304, b = 2.0093.
//
//   build/examples/demo_autograd
#include <xgrad/xgrad.h>

#include <cmath>
#include <iostream>

using namespace xgrad;

int main() {
  manual_seed(0);
  const int64_t n = 64;
  const double lr = 0.1;
  const int steps = 200;

  // data: y = 3x + 2 + noise
  Tensor x = linspace(-1.0, 1.0, n).unsqueeze(1);  // (n, 1)
  Tensor y = 3.0 * x + 2.0 + 0.1 * randn({n, 1});  // (n, 1)

  // parameters: leaves that require grad
  Tensor w = zeros({1, 1}).requires_grad_();  // (1, 1)
  Tensor b = zeros({1}).requires_grad_();     // (1)

  for (int step = 0; step <= steps; ++step) {
    Tensor pred = matmul(x, w) + b;            // (n, 1)
    Tensor loss = (pred - y).pow(2.0).mean();  // ()
    loss.backward();
    {
      NoGradGuard no_grad;
      w.add_(w.grad(), -lr);
      b.add_(b.grad(), -lr);
    }
    w.set_grad(Tensor());  // zero_grad(set_to_none=True)
    b.set_grad(Tensor());
    if (step % 20 == 0) {
      std::cout << "step " << step << "  loss " << loss.item() << "\n";
    }
  }

  std::cout << "learned w = " << w.item() << " (true 3), b = " << b.item() << " (true 2)\n";
  std::cout << "w: " << w << "\nb: " << b << "\n";
  const bool fitted = std::abs(w.item() - 3.0) < 0.1 && std::abs(b.item() - 2.0) < 0.1;
  if (!fitted) std::cout << "the fit did not converge\n";
  return fitted ? 0 : 1;
}
