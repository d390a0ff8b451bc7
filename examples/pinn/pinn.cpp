// pinn: a physics-informed network solving the 1-D Poisson problem
//
//   u''(x) = f(x) on [0, 1],  u(0) = u(1) = 0,  f(x) = -pi^2 sin(pi x)   (exact: u = sin(pi x))
//
// with no solution data at all: the network u = Linear(1, 32) -> Tanh -> Linear(32, 1) is
// trained so that its own second derivative, taken by autograd, matches f at collocation
// points, and its boundary values are 0:
//
//   loss = mean_i (u''(x_i) - f(x_i))^2 + u(0)^2 + u(1)^2
//
// u' and u'' come from autograd::grad with create_graph = true (torch.autograd.grad(...,
// create_graph=True)), so the loss, which contains u'', can itself be backpropagated to the
// weights: a third derivative of the network in every step. Adam, 64 collocation points on a
// grid, then the largest error against sin(pi x) on 101 points. Exits 1 if that error is not
// below --tol (ctest runs it so).
//
//   build/examples/pinn/pinn [--steps N] [--tol T]
#include <xgrad/nn.h>
#include <xgrad/optim.h>
#include <xgrad/xgrad.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

using namespace xgrad;

int main(int argc, char** argv) {
  int steps = 3000;
  double tol = 1e-2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::stoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--tol") == 0) tol = std::stod(argv[i + 1]);
    else {
      std::cerr << "usage: pinn [--steps N] [--tol T]\n";
      return 2;
    }
  }
  manual_seed(0);
  constexpr double pi = std::numbers::pi;
  auto f = [&](const Tensor& x) { return -pi * pi * sin(pi * x); };

  const Tensor x = linspace(0.0, 1.0, 64, kFloat64).unsqueeze(1).requires_grad_();  // (64, 1) collocation
  const Tensor f_x = f(x.detach());
  const Tensor ends = tensor({0.0, 1.0}, kFloat64).unsqueeze(1);  // the boundary, (2, 1)
  nn::Sequential u{std::make_shared<nn::Linear>(1, 32), std::make_shared<nn::Tanh>(),
                   std::make_shared<nn::Linear>(32, 1)};
  u.to(kFloat64);
  optim::Adam opt(u.parameters(), {.lr = 0.01});

  for (int step = 0; step <= steps; ++step) {
    Tensor ux = u(x);
    // each u(x_i) depends on x_i only, so d sum(u) / dx_i = u'(x_i), and again for u''
    Tensor du = autograd::grad({ux.sum()}, {x}, {}, {.create_graph = true})[0];
    Tensor d2u = autograd::grad({du.sum()}, {x}, {}, {.create_graph = true})[0];
    Tensor residual = (d2u - f_x).pow(2.0).mean();
    Tensor boundary = u(ends).pow(2.0).sum();
    Tensor loss = residual + boundary;
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 500 == 0)
      std::cout << "step " << step << "  loss " << loss.item() << "  (residual " << residual.item()
                << ", boundary " << boundary.item() << ")\n";
  }

  NoGradGuard no_grad;
  const Tensor grid = linspace(0.0, 1.0, 101, kFloat64).unsqueeze(1);
  const double err = amax(abs(u(grid) - sin(pi * grid))).item();
  std::cout << "max |u - sin(pi x)| on 101 points: " << err << " (tolerance " << tol << ")\n";
  std::cout << "u(0.5) = " << u(tensor({0.5}, kFloat64).unsqueeze(1)).item() << " (exact 1)\n";
  return err < tol ? 0 : 1;
}
