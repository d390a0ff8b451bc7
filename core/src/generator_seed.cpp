// generator_seed.cpp: seeding a Generator from the operating system, and the default
// generator's seed and state functions (torch.seed, torch.initial_seed, torch.get_rng_state,
// torch.set_rng_state), all declared in xgrad/random.h.
#include <random>

#include "xgrad/random.h"

namespace xgrad {

// reference: c10/core/GeneratorImpl.cpp, getNonDeterministicRandom and
// CPUGeneratorImpl::seed: 64 bits of entropy become the new seed, set as manual_seed sets it.
uint64_t Generator::seed() {
  std::random_device entropy;
  const uint64_t s = (static_cast<uint64_t>(entropy()) << 32) | static_cast<uint64_t>(entropy());
  manual_seed(s);
  return s;
}

uint64_t seed() { return default_generator().seed(); }
uint64_t initial_seed() { return default_generator().initial_seed(); }
std::vector<uint8_t> get_rng_state() { return default_generator().get_state(); }
void set_rng_state(const std::vector<uint8_t>& state) { default_generator().set_state(state); }

}  // namespace xgrad
