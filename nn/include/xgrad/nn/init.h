// xgrad/nn/init.h: parameter initialisers (torch.nn.init), bit-for-bit like torch's.
//
// Each one fills `tensor` in place without recording gradients and returns the same handle.
// Random ones draw from `gen` or the default generator (random.h) in torch's order, and
// compute their bounds with the same double arithmetic as torch/nn/init.py, so
// manual_seed(123) followed by the same calls gives the same numbers as PyTorch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "xgrad/tensor.h"

namespace xgrad::nn::init {

struct Fans {
  int64_t fan_in = 0;
  int64_t fan_out = 0;
};
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (>= 2 dims).
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);
// "linear", "conv*", "sigmoid": 1; "tanh": 5/3; "relu": sqrt(2); "leaky_relu":
// sqrt(2 / (1 + param^2)) with param default 0.01; "selu": 3/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

Tensor uniform_(const Tensor& tensor, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor normal_(const Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor constant_(const Tensor& tensor, double value);
Tensor ones_(const Tensor& tensor);
Tensor zeros_(const Tensor& tensor);
// mode "fan_in" or "fan_out". Linear uses kaiming_uniform_(w, sqrt(5)) = U(-1/sqrt(in), ..).
Tensor kaiming_uniform_(const Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
Tensor kaiming_normal_(const Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
Tensor xavier_uniform_(const Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);
Tensor xavier_normal_(const Tensor& tensor, double gain = 1.0, Generator* gen = nullptr);

}  // namespace xgrad::nn::init
