// nn/src/sampling.cpp: see sampling.h.
// reference: rasbt/LLMs-from-scratch ch05 generate(); HF TopPLogitsWarper; nanoGPT's top-k
#include "xgrad/nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "xgrad/error.h"

namespace xgrad::nn {

std::string sampling_problem(const SamplingOptions& s) {
  std::ostringstream os;
  os.precision(17);
  if (!std::isfinite(s.temperature) || s.temperature < 0) {
    os << "temperature " << s.temperature << " must be 0 (greedy) or a finite positive number";
  } else if (s.temperature != 0 && std::fpclassify(s.temperature) == FP_SUBNORMAL) {
    os << "temperature " << s.temperature << " is a subnormal number: logits / temperature "
       << "overflow to inf (torch.multinomial refuses such probabilities); use 0 for greedy "
       << "decoding or a value >= " << std::numeric_limits<double>::min();
  } else if (s.top_k < 0) {
    os << "top_k " << s.top_k << " must be >= 0 (0 = all tokens)";
  } else if (!(s.top_p > 0 && s.top_p <= 1)) {
    os << "top_p " << s.top_p << " must be in (0, 1] (1 = all tokens)";
  }
  return os.str();
}

void validate_sampling(const SamplingOptions& s) {
  const std::string problem = sampling_problem(s);
  if (!problem.empty()) fail("generate", problem);
}

int64_t sample_token(std::vector<double>& logits, const SamplingOptions& s, Generator& gen) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V == 0) fail("generate", "no logits to sample from");
  for (double l : logits)
    if (std::isnan(l) || l == std::numeric_limits<double>::infinity())
      fail("generate", "the model's logits hold ", l, " (a diverged checkpoint?)");
  if (s.temperature == 0) return std::max_element(logits.begin(), logits.end()) - logits.begin();

  if (s.top_k > 0 && s.top_k < V) {  // keep the top_k largest (ties included), as nanoGPT
    std::vector<double> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (s.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<std::size_t>(s.top_k - 1)];
    for (double& l : logits)
      if (l < kth) l = -std::numeric_limits<double>::infinity();
  }
  // softmax(logits / T) as exp((l - max) / T): subtracting first keeps every exponent <= 0,
  // so a tiny temperature gives 0s and one 1 instead of inf / inf
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double& l : logits) sum += (l = std::exp((l - mx) / s.temperature));
  if (s.top_p < 1) {  // reference: HF TopPLogitsWarper (keeps at least the most likely one)
    std::vector<int64_t> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
    });
    double kept = 0;
    for (int64_t i : order) {
      double& p = logits[static_cast<std::size_t>(i)];
      if (kept > 0 && kept >= s.top_p * sum) p = 0;
      else kept += p;
    }
    sum = kept;
  }
  if (!std::isfinite(sum) || !(sum > 0))  // torch.multinomial's check
    fail("generate", "the sampling probabilities sum to ", sum, " (temperature ", s.temperature, ")");
  double u = 0;
  gen.uniform(&u, 1, 0.0, 1.0);
  const double target = u * sum;
  double acc = 0;
  int64_t next = V - 1;
  for (int64_t i = 0; i < V; ++i) {
    acc += logits[static_cast<std::size_t>(i)];
    if (target < acc) {
      next = i;
      break;
    }
  }
  while (next > 0 && logits[static_cast<std::size_t>(next)] == 0) --next;  // never a masked id
  return next;
}

}  // namespace xgrad::nn
