// train/src/loop.cpp: see xgrad/train/loop.h.
#include "xgrad/train/loop.h"

#include <algorithm>

#include "xgrad/autograd.h"
#include "xgrad/data/dataloader.h"
#include "xgrad/data/sampler.h"
#include "xgrad/random.h"

namespace xgrad::train {

std::vector<optim::AdamW::ParamGroup> weight_decay_groups(const std::vector<Tensor>& params) {
  std::vector<Tensor> decay, no_decay;
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  return {{decay}, {no_decay, {.weight_decay = 0.0}}};
}

double estimate_loss(nn::Module& model, std::shared_ptr<const data::Dataset> dataset,
                     const EstimateLossOptions& o, const std::function<double(const data::Example&)>& loss) {
  Generator gen(o.seed);
  auto sampler = std::make_shared<data::RandomSampler>(
      dataset->size(), data::RandomSamplerOptions{
                           .replacement = true, .num_samples = o.iters * o.batch_size, .generator = &gen});
  const data::DataLoader batches(std::move(dataset),
                                 {.batch_size = o.batch_size, .sampler = sampler, .generator = &gen});
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  double total = 0;
  for (const data::Example& b : batches) total += loss(b);
  model.train(was_training);
  return total / static_cast<double>(o.iters);
}

StepTimer::StepTimer(double budget_s) : budget_s_(budget_s) {}

bool StepTimer::budget_spent() const { return budget_s_ > 0 && since(begin_) >= budget_s_; }

void StepTimer::start() { step_begin_ = clock::now(); }

double StepTimer::stop() {
  const double dt = since(step_begin_);
  average_ = average_ == 0 ? dt : 0.9 * average_ + 0.1 * dt;
  return dt;
}

double StepTimer::tokens_per_second(double tokens_per_step) const {
  return tokens_per_step / std::max(average_, 1e-9);
}

double StepTimer::eta(int64_t steps_left) const {
  const double eta = double(steps_left) * average_;
  return budget_s_ > 0 ? std::min(eta, std::max(0.0, budget_s_ - since(begin_))) : eta;
}

}  // namespace xgrad::train
