// xgrad/nn/loss.h: loss modules over the fused ops of ops.h (torch.nn.CrossEntropyLoss,
// nn.MSELoss), for code that prefers `criterion(logits, targets)`; mean reduction.
#pragma once
#include <cstdint>
#include <string>

#include "xgrad/nn/module.h"
#include "xgrad/ops.h"

namespace xgrad::nn {

class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(int64_t ignore_index = -100) : ignore_index(ignore_index) {}
  // logits (N, C) or (B, T, C), targets int64 (N) or (B, T).
  Tensor forward(const Tensor& logits, const Tensor& targets) const {
    return xgrad::cross_entropy(logits, targets, ignore_index);
  }
  Tensor operator()(const Tensor& logits, const Tensor& targets) const {
    return forward(logits, targets);
  }
  int64_t ignore_index;
};

class MSELoss : public Module {
 public:
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return xgrad::mse_loss(input, target);
  }
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return forward(input, target);
  }
};

}  // namespace xgrad::nn
