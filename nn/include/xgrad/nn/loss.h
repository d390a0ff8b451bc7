// xgrad/nn/loss.h: loss modules over the fused ops of ops.h (torch.nn.CrossEntropyLoss,
// nn.MSELoss), for code that prefers `criterion(logits, targets)`.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "xgrad/nn/module.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

class CrossEntropyLoss : public Module {
 public:
  // torch.nn.CrossEntropyLoss(ignore_index=..., reduction=..., label_smoothing=...)
  explicit CrossEntropyLoss(CrossEntropyOptions options = {}) : options(std::move(options)) {}
  // As F.cross_entropy: input (N, C) or (N, C, d1, ...), target int64 (N) or (N, d1, ...).
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return xgrad::cross_entropy(input, target, options);
  }
  using Module::forward;  // the one-tensor forward stays visible: it throws, naming this one
  Tensor operator()(const Tensor& logits, const Tensor& targets) const { return forward(logits, targets); }
  CrossEntropyOptions options;
};

class MSELoss : public Module {
 public:
  Tensor forward(const Tensor& input, const Tensor& target) const { return xgrad::mse_loss(input, target); }
  using Module::forward;  // the one-tensor forward stays visible: it throws, naming this one
  Tensor operator()(const Tensor& input, const Tensor& target) const { return forward(input, target); }
};

}  // namespace xgrad::nn
