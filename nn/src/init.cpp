// nn/src/init.cpp: torch.nn.init, with torch's double arithmetic for every bound.
// reference: torch/nn/init.py (torch 1.13)
#include "xgrad/nn/init.h"

#include <cctype>
#include <cmath>

#include "xgrad/autograd.h"
#include "xgrad/random.h"

namespace xgrad::nn::init {

Fans calculate_fan_in_and_fan_out(const Tensor& tensor) {
  if (tensor.dim() < 2)
    fail("calculate_fan_in_and_fan_out",
         "fan in and fan out can not be computed for a tensor "
         "with fewer than 2 dimensions, got shape ",
         tensor.shape());
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity.rfind("conv", 0) == 0) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  fail("calculate_gain", "unsupported nonlinearity '", nonlinearity, "'");
}

// mode is case-insensitive, as torch lower-cases it
static int64_t correct_fan(const Tensor& tensor, const std::string& mode) {
  std::string m = mode;
  for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (m != "fan_in" && m != "fan_out")
    fail("kaiming init", "mode must be 'fan_in' or 'fan_out', got '", mode, "'");
  Fans f = calculate_fan_in_and_fan_out(tensor);
  return m == "fan_in" ? f.fan_in : f.fan_out;
}

Tensor uniform_(const Tensor& tensor, double a, double b, Generator* gen) {
  NoGradGuard no_grad;
  Tensor t = tensor;
  t.uniform_(a, b, gen);
  return t;
}

Tensor normal_(const Tensor& tensor, double mean, double std, Generator* gen) {
  NoGradGuard no_grad;
  Tensor t = tensor;
  t.normal_(mean, std, gen);
  return t;
}

Tensor constant_(const Tensor& tensor, double value) {
  NoGradGuard no_grad;
  Tensor t = tensor;
  t.fill_(value);
  return t;
}
Tensor ones_(const Tensor& tensor) { return constant_(tensor, 1.0); }
Tensor zeros_(const Tensor& tensor) { return constant_(tensor, 0.0); }

Tensor kaiming_uniform_(const Tensor& tensor, double a, const std::string& mode,
                        const std::string& nonlinearity, Generator* gen) {
  if (tensor.numel() == 0) return tensor;  // torch: "Initializing zero-element tensors is a no-op"
  const auto fan = static_cast<double>(correct_fan(tensor, mode));
  const double gain = calculate_gain(nonlinearity, a);
  const double std = gain / std::sqrt(fan);
  const double bound = std::sqrt(3.0) * std;  // uniform(-b, b) has standard deviation b/sqrt(3)
  return uniform_(tensor, -bound, bound, gen);
}

Tensor kaiming_normal_(const Tensor& tensor, double a, const std::string& mode,
                       const std::string& nonlinearity, Generator* gen) {
  if (tensor.numel() == 0) return tensor;
  const auto fan = static_cast<double>(correct_fan(tensor, mode));
  const double gain = calculate_gain(nonlinearity, a);
  return normal_(tensor, 0.0, gain / std::sqrt(fan), gen);
}

Tensor xavier_uniform_(const Tensor& tensor, double gain, Generator* gen) {
  Fans f = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  const double a = std::sqrt(3.0) * std;
  return uniform_(tensor, -a, a, gen);
}

Tensor xavier_normal_(const Tensor& tensor, double gain, Generator* gen) {
  Fans f = calculate_fan_in_and_fan_out(tensor);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out));
  return normal_(tensor, 0.0, std, gen);
}

}  // namespace xgrad::nn::init
