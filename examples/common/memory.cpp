// examples/common/memory.cpp: see memory.h.
#include "memory.h"

#include <sys/sysinfo.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace xgrad_examples {
namespace {

// Floats alive at the peak of a step (the end of the forward pass and the start of backward): per
// token and layer, x emb_dim (layer norms, q/k/v, attention output, the 4 x emb feed-forward,
// dropout masks, residuals); per attention score and layer (the fused attention keeps the causal
// half of its probabilities and a bit mask of its dropout, and draws a byte mask while it runs);
// per token, x vocabulary (the logits, which cross_entropy keeps and its backward overwrites with
// their gradient); per token, x emb_dim outside the blocks (embeddings, final norm, their
// gradients, workspace). Fitted to two scales at once: the estimate bounds the
// xgrad::memory_stats() peaks of the tiny to small GPTs of tests/train/test_memory.cpp (where
// per-op workspace weighs more), and lands a few percent above the peak RSS of the gpt2 preset
// (124M parameters, batch 8 x 1024) with and without activation checkpointing, the
// vocabulary-sized logits and the attention scores dominating there.
constexpr double kPerTokenPerLayer = 16.5;  // x emb_dim
constexpr double kPerScorePerLayer = 0.6;   // x n_heads x T x T
constexpr double kPerTokenLogits = 1.1;     // x vocab: the logits, then their gradient in place
constexpr double kPerTokenEmbed = 20;       // x emb_dim: embeddings, final norm, their gradients, workspace

// The same, in bytes, for a step whose forward pass runs under autocast (--dtype bf16), fitted
// the same way. Per token and layer a GPT block keeps less than in float32 (x emb_dim): its
// input and the residual (float32), the bfloat16 casts its linears read, q/k/v cast back to
// float32 for the fused attention, the feed-forward's 4 x emb_dim hidden and GELU outputs in
// bfloat16, the dropout masks. Per token x vocabulary less: the bfloat16 logits, which the
// loss widens a block of rows at a time and overwrites with their bfloat16 gradient (the
// output layer's GEMMs widen and round in bounded blocks too, gemm_bf16_kernel.h).
struct BytesPer {
  double token_layer, token_logits, token_embed, score_layer;
};
constexpr BytesPer kFloat32Bytes{4 * kPerTokenPerLayer, 4 * kPerTokenLogits, 4 * kPerTokenEmbed,
                                 4 * kPerScorePerLayer};
constexpr BytesPer kBFloat16Bytes{47, 2.6, 80, 4 * kPerScorePerLayer};

std::optional<double> read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  return v;
}

}  // namespace

MemoryEstimate estimate_training_memory(const GPTConfig& c, int64_t batch_size, bool bf16) {
  const double V = double(c.vocab_size), T = double(c.context_length), C = double(c.emb_dim),
               H = double(c.n_heads), L = double(c.n_layers), B = double(batch_size);
  MemoryEstimate e;
  // reference: the modules of nn/src/gpt.cpp, transformer.cpp, attention.cpp
  const double per_block = 3 * C * C + (c.qkv_bias ? 3 * C : 0)  // W_query, W_key, W_value
                           + C * C + C                           // out_proj
                           + C * 4 * C + 4 * C + 4 * C * C + C   // ff.layers.0, ff.layers.2
                           + 4 * C;                              // norm1, norm2
  e.parameters = V * C + T * C + L * per_block + 2 * C           // + final_norm,
                 + (c.tie_weights ? 0 : C * V);                  // out_head (or tok_emb's)
  e.state_bytes = 16 * e.parameters + L * T * T;                 // + bool masks
  // the weight cast cache: every block's linears and the output head (tied or not)
  if (bf16) e.state_bytes += 2 * (L * (per_block - 4 * C) + C * V);
  const BytesPer& per = bf16 ? kBFloat16Bytes : kFloat32Bytes;
  const double tokens = B * T;
  // with activation checkpointing the blocks keep only their inputs (one x emb_dim per token
  // and layer), and one block's activations are alive at a time (its forward, its rerun)
  const double full_layers = c.activation_checkpointing ? 1 : L;
  const double inputs_kept = c.activation_checkpointing ? L : 0;
  e.activation_bytes = tokens * C * (per.token_layer * full_layers + 4 * inputs_kept + per.token_embed) +
                       B * H * T * T * per.score_layer * full_layers + tokens * V * per.token_logits;
  return e;
}

// The Llama's blocks keep, per token and layer, about kLlamaPerTokenPerLayer x emb_dim (norms,
// q/k/v and their rotations, attention output, residuals) and kLlamaPerTokenHidden x
// hidden_dim (the SwiGLU's fc1, fc2, silu and product); the rest is as for a GPT (no dropout).
constexpr double kLlamaPerTokenPerLayer = 14;  // x emb_dim
constexpr double kLlamaPerTokenHidden = 5;     // x hidden_dim

// Under autocast (bf16) the state adds the weight cast cache (every parameter but the norms
// and an untied embedding, 2 bytes each), and the blocks' activations and the logits shrink
// as the GPT's do (the linears' outputs, RoPE's rotations and SwiGLU's product in bfloat16;
// the residual stream and the norms in float32): the GPT's bfloat16 bytes per float32 float.
MemoryEstimate estimate_training_memory(const xgrad::nn::LlamaConfig& c, int64_t batch_size, bool bf16) {
  const double V = double(c.vocab_size), T = double(c.context_length), C = double(c.emb_dim),
               H = double(c.n_heads), L = double(c.n_layers), B = double(batch_size);
  MemoryEstimate e;
  e.parameters = double(xgrad::nn::num_parameters(c));
  e.state_bytes = 16 * e.parameters + 8 * T * double(c.head_dim());  // + the RoPE tables
  if (bf16) e.state_bytes += 2 * (e.parameters - (c.tie_weights ? 0 : V * C) - (2 * L + 1) * C);
  const BytesPer& per = bf16 ? kBFloat16Bytes : kFloat32Bytes;
  const double block_bytes = per.token_layer / kPerTokenPerLayer;  // a block's bytes a float32 float
  const double tokens = B * T;
  e.activation_bytes =
      tokens * L * block_bytes * (kLlamaPerTokenPerLayer * C + kLlamaPerTokenHidden * double(c.hidden_dim)) +
      tokens * C * per.token_embed + B * H * T * T * per.score_layer * L + tokens * V * per.token_logits;
  return e;
}

std::optional<double> available_memory_bytes() {
  if (const char* env = std::getenv("XGRAD_MEMORY_LIMIT")) {
    char* end = nullptr;
    double v = std::strtod(env, &end);
    if (end != env && v > 0) return v;
  }
  std::optional<double> avail;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      avail = kb * 1024;
      break;
    }
  }
  if (!avail) {  // no /proc (a bare chroot): the kernel's own count of free memory
    struct sysinfo si {};
    if (::sysinfo(&si) == 0) avail = (double(si.freeram) + double(si.bufferram)) * si.mem_unit;
  }
  std::optional<double> max = read_number("/sys/fs/cgroup/memory.max");
  std::optional<double> cur = read_number("/sys/fs/cgroup/memory.current");
  if (max && cur) {
    double room = *max - *cur;
    if (!avail || room < *avail) avail = room > 0 ? room : 0;
  }
  return avail;
}

std::string format_bytes(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", b);
  else std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

std::string describe_memory(const MemoryEstimate& e, std::optional<double> available) {
  char params[32];
  std::snprintf(params, sizeof params, "%.0f", e.parameters);
  std::string s = "estimated memory: " + format_bytes(e.total_bytes()) + " (" + params +
                  " parameters: " + format_bytes(e.state_bytes) +
                  " for weights, gradients and AdamW state; " + format_bytes(e.activation_bytes) +
                  " for one step's activations)";
  s += available ? "; available: " + format_bytes(*available) : "; available: unknown";
  return s;
}

std::optional<std::string> memory_problem(const GPTConfig& m, int64_t batch_size, const MemoryEstimate& e,
                                          std::optional<double> available) {
  if (!available || e.total_bytes() <= *available) return std::nullopt;
  std::ostringstream os;
  os << "this configuration needs about " << format_bytes(e.total_bytes()) << " but "
     << format_bytes(*available) << " is available: ";
  if (e.activation_bytes >= e.state_bytes)
    os << "the activations (" << format_bytes(e.activation_bytes) << ") grow with --batch-size " << batch_size
       << " x --context-length " << m.context_length << " x (--emb-dim " << m.emb_dim << " x --n-layers "
       << m.n_layers << ", the vocabulary of " << m.vocab_size << ", --n-heads " << m.n_heads
       << " x --context-length); lower --batch-size or --context-length";
  else
    os << "the model's weights, gradients and AdamW state (" << format_bytes(e.state_bytes)
       << ") grow with --emb-dim " << m.emb_dim << " squared x --n-layers " << m.n_layers
       << "; lower --emb-dim or --n-layers";
  return os.str();
}

}  // namespace xgrad_examples
