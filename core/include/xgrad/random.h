// xgrad/random.h: the CPU random number generator, bit-for-bit compatible with PyTorch's.
//
// Generator reproduces torch 1.13's at::CPUGeneratorImpl (an mt19937 plus a cached second
// Box-Muller sample) and the CPU kernels that fill a contiguous tensor from it: after
// `Generator g(123)`, `g.uniform(buf, 16, 0, 1)` writes exactly the 16 floats that
// `torch.manual_seed(123); torch.rand(4, 4)` returns, and so on for randn, uniform_,
// normal_, bernoulli_ (hence dropout masks) and randint. It works on raw contiguous buffers;
// Tensor methods (uniform_, normal_, ...) call it with the tensor's storage.
//
// get_state()/set_state() use the byte layout of torch.get_rng_state() (5056 bytes), so a
// state saved by torch can be loaded here and the other way round.
//
// Adding a distribution: find the torch kernel it must match (aten/src/ATen/native/cpu/
// DistributionTemplates.h), mirror its draw order and float arithmetic in random.cpp with a
// `// reference:` comment, and add a case to tests/fixtures/gen_random.py.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace xgrad {

class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // torch's default CPU seed
  static constexpr size_t kStateSize = 5056;  // bytes in get_state(), as torch.get_rng_state()

  explicit Generator(uint64_t seed = kDefaultSeed);
  Generator(const Generator& other);             // copies the full state: both then draw
  Generator& operator=(const Generator& other);  // the same stream

  // Reseeds like torch.manual_seed (only the low 32 bits feed mt19937, as in torch) and
  // drops any cached normal sample.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;
  // Reseeds from the operating system's entropy and returns the new seed (torch's
  // Generator.seed()); initial_seed() then returns it too. generator_seed.cpp.
  uint64_t seed();

  uint32_t random();    // one mt19937 draw                  (CPUGeneratorImpl::random)
  uint64_t random64();  // two draws, first one in high bits (CPUGeneratorImpl::random64)

  // Each fill writes out[0..n) exactly as torch's CPU kernel fills a contiguous tensor of n
  // elements of that dtype, and advances the generator by the same amount.
  void uniform(float* out, int64_t n, double from, double to);  // torch.rand, uniform_
  void uniform(double* out, int64_t n, double from, double to);
  void normal(float* out, int64_t n, double mean, double std);  // torch.randn, normal_
  void normal(double* out, int64_t n, double mean, double std);
  void bernoulli(float* out, int64_t n, double p);  // bernoulli_(p): 1 w.p. p
  void bernoulli(double* out, int64_t n, double p);
  void bernoulli(bool* out, int64_t n, double p);                       // the same draws as a mask
  void random_int(int64_t* out, int64_t n, int64_t low, int64_t high);  // randint: [low, high)

  // Full state (mt19937 words, position, seed, cached normal samples) in torch's layout;
  // set_state(get_state()) resumes the identical stream. set_state throws xgrad::Error on
  // a wrong size or an invalid mt19937 position.
  std::vector<uint8_t> get_state() const;
  void set_state(const std::vector<uint8_t>& state);

 private:
  static constexpr int kN = 624;  // mt19937 state words
  static constexpr int kM = 397;

  // The engine, as torch's at::mt19937_data_pod. Callers below hold mutex_.
  struct Engine {
    uint64_t seed = 0;
    int left = 1;
    bool seeded = false;
    uint32_t next = 0;
    std::array<uint32_t, kN> state{};
  };
  void seed_engine(uint64_t seed);
  void twist();
  uint32_t draw32();
  uint64_t draw64();
  // n draw32() results, a state block at a time; kTempered false gives the raw state words
  // (draw32() is temper() of them), for fills that temper only the words they need
  template <bool kTempered>
  void draw_block(uint32_t* out, int64_t n);
  template <int kPerElement, bool kTempered = true, class F>
  void for_draw_blocks(int64_t n, F&& f);  // the bulk fills' chunk loop (random.cpp)
  template <class T>
  void bernoulli_fill(T* out, int64_t n, double p);
  static constexpr int64_t kBlockDraws = 1024;  // words per block in the bulk fills
  double normal_sample();                       // one at::normal_distribution<double> draw, mean 0 std 1

  Engine engine_;
  std::optional<double> next_double_normal_;  // second Box-Muller sample, used next time
  std::optional<float> next_float_normal_;    // kept only to round-trip torch's state
  // Every public member locks it, so one Generator may be shared between threads: each
  // call is atomic, but which thread gets which values depends on the call order.
  mutable std::mutex mutex_;
};

// The process-wide generator that ops use when given no Generator (torch's default CPU
// generator). Safe to call from several threads (see Generator::mutex_), but reproducible
// streams need the calls to come in a fixed order, e.g. from one thread.
Generator& default_generator();

// Reseeds default_generator(), like torch.manual_seed.
void manual_seed(uint64_t seed);
// The default generator's seed functions and state, as torch.seed(), torch.initial_seed(),
// torch.get_rng_state() and torch.set_rng_state() (generator_seed.cpp).
uint64_t seed();
uint64_t initial_seed();
std::vector<uint8_t> get_rng_state();
void set_rng_state(const std::vector<uint8_t>& state);

}  // namespace xgrad
