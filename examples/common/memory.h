// examples/common/memory.h: how much memory training a GPT or a Llama needs, estimated from
// the flags before anything is allocated, and how much this machine (or its cgroup) offers.
//
// The weights, their gradients and AdamW's two moments are float32 (16 bytes per parameter),
// plus the causal masks and one training step's activations, i.e. what the autograd tape keeps
// for backward plus the gradients flowing back through it. With bf16 (train_lm --dtype bf16:
// the forward pass under xgrad::autocast) the state also holds the bfloat16 cast of every
// matrix and bias a linear reads (the weight cast cache, 2 bytes each, alive until backward),
// and the activations are what autocast leaves: linear outputs in bfloat16, norms, residuals,
// attention and the loss in float32 (xgrad/autocast.h). The per-layer factors were measured
// with xgrad::memory_stats() (tests/train/test_memory.cpp checks the estimate stays above the
// measured peak and within 2x of it, in both dtypes).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "xgrad/nn/llama.h"        // LlamaConfig
#include "xgrad/nn/transformer.h"  // GPTConfig

namespace xgrad_examples {

using xgrad::nn::GPTConfig;

struct MemoryEstimate {
  double parameters = 0;        // count (double: huge flags must not overflow)
  double state_bytes = 0;       // weights + gradients + AdamW moments + masks
  double activation_bytes = 0;  // one step's tape and gradients
  double total_bytes() const { return state_bytes + activation_bytes; }
};

// c.vocab_size must be set (from the corpus).
// bf16: the forward pass runs under autocast (train_lm --dtype bf16).
MemoryEstimate estimate_training_memory(const GPTConfig& c, int64_t batch_size, bool bf16 = false);
MemoryEstimate estimate_training_memory(const xgrad::nn::LlamaConfig& c, int64_t batch_size,
                                        bool bf16 = false);

// Memory this process can still get: the smaller of MemAvailable (/proc/meminfo; without
// /proc, sysinfo()'s free + buffer memory) and the cgroup's memory.max - memory.current;
// XGRAD_MEMORY_LIMIT (bytes) overrides both. nullopt when none is known.
std::optional<double> available_memory_bytes();

std::string format_bytes(double bytes);  // "512.0 KiB", "3.4 GiB"

// Why a configuration cannot train in `available` bytes (nothing: nullopt, also when
// `available` is unknown), naming the flags that drive the estimate (--batch-size,
// --context-length, --emb-dim, --n-layers, --n-heads) and the figures.
std::optional<std::string> memory_problem(const GPTConfig& m, int64_t batch_size, const MemoryEstimate& e,
                                          std::optional<double> available);

// One line for the log / --dry-run: parameters, state, activations, total, available.
std::string describe_memory(const MemoryEstimate& e, std::optional<double> available);

}  // namespace xgrad_examples
