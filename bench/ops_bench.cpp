// bench/ops_bench.cpp: op micro-benchmarks (forward + backward) for the attention path, at a
// GPT-sized shape and at a tiny shape where per-op overhead dominates; the GPT's other
// element-wise and row ops (gelu, layer_norm, cross_entropy, dropout: forward + backward, and
// forward only as "<op>_fwd") and one AdamW step at GPT sizes, so that a kernel falling back
// to scalar code shows at once. Its PyTorch twin is bench/pytorch/ops_bench.py: the same
// cases, by the same names, computing the same thing; scripts/bench.sh --ops runs both and
// prints them side by side.
//
//   build/bench/ops_bench                       all cases (Google Benchmark flags work too)
//   build/bench/ops_bench --threads=2           xgrad::set_num_threads (else XGRAD_NUM_THREADS,
//                                               OMP_NUM_THREADS, or the core count)
//   build/bench/ops_bench --benchmark_filter=softmax
//
// Every case is named "<op>/<shape>" and measures one iteration of: forward, then backward
// with a fixed upstream gradient, with the leaves' .grad reset to none first (as
// `x.grad = None` in torch); "<op>_fwd/<shape>" the forward alone, without grad. Times are
// wall-clock (UseRealTime), so BLAS threads count. The JSON's context records the build's
// simd_level and gemm_backend.
//
// The GEMM rows report GFLOP/s (the "GFLOPS" counter): "matmul_fwd/<m>x<n>x<k>" is x (m, k)
// @ W^T, W (n, k) as a linear layer stores it, in float32, and "matmul_bf16_fwd/..." the same
// on bfloat16 tensors (a bfloat16 result); "gemm_bf16_<path>/..." times the bfloat16 GEMM
// alone on raw buffers (float32 C preallocated) on one path (xgrad/bf16_gemm.h: dpbf16 where
// the build has AVX512_BF16, amx where the CPU grants AMX tiles, widened everywhere): these
// have no PyTorch twin. "linear_bf16/..." is linear's forward and backward in bfloat16.
// XGRAD_BF16_GEMM=widened|dpbf16|amx picks the path the bfloat16 ops run.
//
// Adding a case: add a row to the table in register_cases() and the same row to CASES in
// bench/pytorch/ops_bench.py (same name, same shapes, same computation).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xgrad/autograd.h"
#include "xgrad/backend.h"
#include "xgrad/bf16_gemm.h"
#include "xgrad/nn.h"
#include "xgrad/ops.h"
#include "xgrad/optim/adam.h"
#include "xgrad/parallel.h"
#include "xgrad/random.h"

namespace {

using xgrad::Shape;
using xgrad::Tensor;

std::string shape_str(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

Tensor leaf(const Shape& s) {
  Tensor t = xgrad::randn(s);
  t.requires_grad_(true);
  return t;
}

// One benchmark case: `setup` builds the inputs once; `step` runs one forward + backward.
struct Case {
  std::string name;
  std::function<std::function<void()>()> setup;
  double flops = 0.0;  // per iteration, for a GFLOP/s counter (GEMM rows)
};

// (B, H, T, T) scores -> softmax over the last dim.
Case softmax_case(const Shape& s) {
  return {"softmax/" + shape_str(s), [s] {
            Tensor x = leaf(s), g = xgrad::randn(s);
            return std::function<void()>([x, g]() mutable {
              x.set_grad(Tensor());
              xgrad::softmax(x, -1).backward(g);
            });
          }};
}

// (B, H, T, T) scores, causal (T, T) bool mask broadcast over (B, H), filled with -inf.
Case masked_fill_case(const Shape& s) {
  return {"masked_fill/" + shape_str(s), [s] {
            const int64_t T = s[s.size() - 1];
            Tensor x = leaf(s), g = xgrad::randn(s);
            Tensor mask = xgrad::triu(xgrad::ones({T, T}), 1) > 0.5;  // bool, true above the diagonal
            return std::function<void()>([x, g, mask]() mutable {
              x.set_grad(Tensor());
              xgrad::masked_fill(x, mask, -INFINITY).backward(g);
            });
          }};
}

// (B, H, T, D) -> transpose(1, 2) -> contiguous (B, T, H, D), as the attention context.
Case transpose_case(const Shape& s) {
  return {"transpose_contiguous/" + shape_str(s), [s] {
            Tensor x = leaf(s), g = xgrad::randn({s[0], s[2], s[1], s[3]});
            return std::function<void()>([x, g]() mutable {
              x.set_grad(Tensor());
              x.transpose(1, 2).contiguous().backward(g);
            });
          }};
}

// queries (B, H, T, D) @ keys(B, H, T, D).transpose(2, 3) -> scores (B, H, T, T).
Case bmm_qk_case(const Shape& s) {
  return {"bmm_qkT/" + shape_str(s), [s] {
            Tensor q = leaf(s), k = leaf(s), g = xgrad::randn({s[0], s[1], s[2], s[2]});
            return std::function<void()>([q, k, g]() mutable {
              q.set_grad(Tensor());
              k.set_grad(Tensor());
              xgrad::matmul(q, k.transpose(2, 3)).backward(g);
            });
          }};
}

// weights (B, H, T, T) @ values (B, H, T, D) -> context (B, H, T, D); s = (B, H, T, D).
Case bmm_av_case(const Shape& s) {
  return {"bmm_av/" + shape_str(s), [s] {
            Tensor w = leaf({s[0], s[1], s[2], s[2]}), v = leaf(s), g = xgrad::randn(s);
            return std::function<void()>([w, v, g]() mutable {
              w.set_grad(Tensor());
              v.set_grad(Tensor());
              xgrad::matmul(w, v).backward(g);
            });
          }};
}

// F.linear: x (B, T, in) @ weight (out, in).T + bias (out); s = (B, T, in, out). In bfloat16
// ("linear_bf16/..."): every tensor bfloat16, the gradients too.
Case linear_case(const Shape& s, xgrad::DType dtype = xgrad::kFloat32) {
  const std::string op = dtype == xgrad::kBFloat16 ? "linear_bf16/" : "linear/";
  return {op + shape_str(s), [s, dtype] {
            auto leaf_of = [dtype](const Shape& shape) {
              Tensor t = xgrad::randn(shape).to(dtype);
              t.requires_grad_(true);
              return t;
            };
            Tensor x = leaf_of({s[0], s[1], s[2]}), w = leaf_of({s[3], s[2]}), b = leaf_of({s[3]});
            Tensor g = xgrad::randn({s[0], s[1], s[3]}).to(dtype);
            return std::function<void()>([x, w, b, g]() mutable {
              x.set_grad(Tensor());
              w.set_grad(Tensor());
              b.set_grad(Tensor());
              xgrad::linear(x, w, b).backward(g);
            });
          }};
}

// nn::MultiHeadAttention (Raschka's, as in the seeds), dropout 0, forward + backward;
// s = (B, T, d, heads). Compared with the identical torch module in bench/pytorch/gpt_bench.py.
Case mha_case(const Shape& s) {
  return {"mha/" + shape_str(s), [s] {
            auto mha = std::make_shared<xgrad::nn::MultiHeadAttention>(s[2], s[2], s[1], 0.0, s[3]);
            Tensor x = leaf({s[0], s[1], s[2]}), g = xgrad::randn({s[0], s[1], s[2]});
            return std::function<void()>([mha, x, g]() mutable {
              mha->zero_grad(true);  // set_to_none, as the torch bench
              x.set_grad(Tensor());
              (*mha)(x).backward(g);
            });
          }};
}

// Causal attention of (B, H, T, D) heads, as MultiHeadAttention runs it: q, k, v are
// transpose(1, 2) views of (B, T, H, D) leaves; s = (B, H, T, D), dropout p (the GPTs train
// with 0.1). "sdpa" is the fused scaled_dot_product_attention, "sdpa_composed" the chain it
// replaced (matmul, masked_fill, softmax(scores / sqrt(D)), dropout, matmul, transpose +
// contiguous); a nonzero p is named in the case ("sdpa_p0.1/...").
Case sdpa_case(const Shape& s, bool fused, double p = 0.0) {
  std::string name = fused ? "sdpa" : "sdpa_composed";
  if (p > 0.0) name += "_p" + std::to_string(p).substr(0, 3);
  return {name + "/" + shape_str(s), [s, fused, p] {
            const int64_t B = s[0], H = s[1], T = s[2], D = s[3];
            Tensor q = leaf({B, T, H, D}), k = leaf({B, T, H, D}), v = leaf({B, T, H, D});
            Tensor g = xgrad::randn({B, T, H, D});
            Tensor mask = xgrad::triu(xgrad::ones({T, T}), 1) > 0.5;
            return std::function<void()>([q, k, v, g, mask, fused, D, p]() mutable {
              for (Tensor* t : {&q, &k, &v}) t->set_grad(Tensor());
              Tensor qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
              Tensor ctx;
              if (fused) {
                ctx = xgrad::scaled_dot_product_attention(qh, kh, vh, p, true);
              } else {
                Tensor scores = xgrad::matmul(qh, kh.transpose(2, 3));
                scores.masked_fill_(mask, -INFINITY);
                Tensor w = xgrad::dropout(xgrad::softmax(scores / std::sqrt(double(D)), -1), p);
                ctx = xgrad::matmul(w, vh);
              }
              ctx.transpose(1, 2).contiguous().backward(g);  // (B, T, H, D)
            });
          }};
}

// ---- the GPT's element-wise and row ops: "<op>/<shape>" forward + backward, "<op>_fwd/<shape>"
// forward only (NoGradGuard)

// Runs one iteration of a case: forward only without grad, or forward then backward(g)
// (an undefined g: the output is a scalar loss).
template <class Forward>
void forward_backward(bool backward, const Tensor& g, Forward&& forward) {
  if (!backward) {
    xgrad::NoGradGuard no_grad;
    benchmark::DoNotOptimize(forward());
    return;
  }
  Tensor out = forward();
  if (g.defined()) out.backward(g);
  else out.backward();
}

std::string case_name(const std::string& op, bool backward, const Shape& s) {
  return op + (backward ? "" : "_fwd") + "/" + shape_str(s);
}

// gelu(x, approximate="tanh"), as the GPT's feed-forward runs it.
Case gelu_case(const Shape& s, bool backward) {
  return {case_name("gelu", backward, s), [s, backward] {
            Tensor x = leaf(s), g = xgrad::randn(s);
            return std::function<void()>([x, g, backward]() mutable {
              x.set_grad(Tensor());
              forward_backward(backward, g, [&] { return xgrad::gelu(x, "tanh"); });
            });
          }};
}

// layer_norm over the last dim (size d) with weight and bias (d), eps 1e-5.
Case layer_norm_case(const Shape& s, bool backward) {
  return {case_name("layer_norm", backward, s), [s, backward] {
            const int64_t d = s.back();
            Tensor x = leaf(s), w = leaf({d}), b = leaf({d}), g = xgrad::randn(s);
            return std::function<void()>([x, w, b, g, d, backward]() mutable {
              for (Tensor* t : {&x, &w, &b}) t->set_grad(Tensor());
              forward_backward(backward, g, [&] { return xgrad::layer_norm(x, {d}, w, b); });
            });
          }};
}

// cross_entropy of logits (N, C) against int64 targets (N), mean over N: the GPT's loss.
Case cross_entropy_case(const Shape& s, bool backward) {
  return {case_name("cross_entropy", backward, s), [s, backward] {
            Tensor logits = leaf(s), targets = xgrad::randint(0, s[1], {s[0]});
            return std::function<void()>([logits, targets, backward]() mutable {
              logits.set_grad(Tensor());
              forward_backward(backward, Tensor(), [&] { return xgrad::cross_entropy(logits, targets); });
            });
          }};
}

// dropout(x, p = 0.1), training: a fresh mask every iteration.
Case dropout_case(const Shape& s, bool backward) {
  return {case_name("dropout", backward, s), [s, backward] {
            Tensor x = leaf(s), g = xgrad::randn(s);
            return std::function<void()>([x, g, backward]() mutable {
              x.set_grad(Tensor());
              forward_backward(backward, g, [&] { return xgrad::dropout(x, 0.1, true); });
            });
          }};
}

// One AdamW step (lr 3e-4, weight decay 0.1, as gpt_bench) over the parameters of the
// `medium` GPT of gpt_bench.cpp (10.8M floats) with random gradients; the moments are
// allocated by a first step before timing.
Case adamw_case() {
  return {"adamw/gpt_medium", [] {
            const xgrad::nn::GPTConfig cfg{.vocab_size = 96,
                                           .context_length = 256,
                                           .emb_dim = 384,
                                           .n_heads = 6,
                                           .n_layers = 6,
                                           .drop_rate = 0.1,
                                           .qkv_bias = false};
            auto model = std::make_shared<xgrad::nn::GPTModel>(cfg);
            for (Tensor& p : model->parameters()) p.set_grad(xgrad::randn(p.shape()));
            auto opt = std::make_shared<xgrad::optim::AdamW>(
                model->parameters(), xgrad::optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1});
            opt->step();
            return std::function<void()>([model, opt] { opt->step(); });
          }};
}

// Per-op overhead: a 4-element add with grad mode off, recording a node (graph dropped),
// and forward + backward.
std::vector<Case> overhead_cases() {
  const Shape s{4};
  return {
      {"add_nograd/4",
       [s] {
         Tensor a = leaf(s), b = leaf(s);
         return std::function<void()>([a, b]() mutable {
           xgrad::NoGradGuard ng;
           benchmark::DoNotOptimize(xgrad::add(a, b));
         });
       }},
      {"add_record/4",
       [s] {
         Tensor a = leaf(s), b = leaf(s);
         return std::function<void()>([a, b]() mutable { benchmark::DoNotOptimize(xgrad::add(a, b)); });
       }},
      {"add_fwd_bwd/4",
       [s] {
         Tensor a = leaf(s), b = leaf(s), g = xgrad::randn(s);
         return std::function<void()>([a, b, g]() mutable {
           a.set_grad(Tensor());
           b.set_grad(Tensor());
           xgrad::add(a, b).backward(g);
         });
       }},
  };
}

// x (m, k) @ W (n, k)^T in `dtype` (float32 or bfloat16), forward only; s = (m, n, k).
Case matmul_fwd_case(const Shape& s, xgrad::DType dtype) {
  const std::string op = dtype == xgrad::kBFloat16 ? "matmul_bf16_fwd/" : "matmul_fwd/";
  return {op + shape_str(s),
          [s, dtype] {
            Tensor x = xgrad::randn({s[0], s[2]}).to(dtype), w = xgrad::randn({s[1], s[2]}).to(dtype);
            return std::function<void()>([x, w] {
              xgrad::NoGradGuard no_grad;
              benchmark::DoNotOptimize(xgrad::matmul(x, w.t()));
            });
          },
          2.0 * double(s[0]) * double(s[1]) * double(s[2])};
}

// The bfloat16 GEMM alone, C (m, n) = A (m, k) @ B (n, k)^T into a float32 C, on one path.
Case gemm_bf16_case(const Shape& s, xgrad::Bf16GemmPath path, const char* name) {
  return {std::string("gemm_bf16_") + name + "/" + shape_str(s),
          [s, path] {
            const int64_t m = s[0], n = s[1], k = s[2];
            auto bits = [](int64_t count) {
              auto v = std::make_shared<std::vector<uint16_t>>(static_cast<std::size_t>(count));
              uint32_t state = 12345;
              for (uint16_t& x : *v) {  // values in [1, 2) and (-2, -1]: sign and mantissa vary
                state = state * 1664525u + 1013904223u;
                x = static_cast<uint16_t>(0x3f80u | ((state >> 9) & 0x7fu) | ((state >> 31) << 15));
              }
              return v;
            };
            auto a = bits(m * k), b = bits(n * k);
            auto c = std::make_shared<std::vector<float>>(static_cast<std::size_t>(m * n));
            return std::function<void()>([a, b, c, m, n, k, path] {
              xgrad::gemm_bf16(false, true, m, n, k, 1.0f, a->data(), k, b->data(), k, 0.0f, c->data(), n,
                               nullptr, path);
              benchmark::DoNotOptimize(c->data());
            });
          },
          2.0 * double(s[0]) * double(s[1]) * double(s[2])};
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  // GPT-sized: batch 8, 4 heads, 128 tokens (head_dim 32 for the (B, H, T, D) tensors),
  // and tiny: batch 2, 4 heads, 8 tokens, head_dim 8.
  for (const Shape& scores : {Shape{8, 4, 128, 128}, Shape{2, 4, 8, 8}}) {
    cases.push_back(softmax_case(scores));
    cases.push_back(masked_fill_case(scores));
  }
  for (const Shape& bhtd : {Shape{8, 4, 128, 32}, Shape{2, 4, 8, 8}}) {
    cases.push_back(transpose_case(bhtd));
    cases.push_back(bmm_qk_case(bhtd));
    cases.push_back(bmm_av_case(bhtd));
  }
  // (B, T, in, out): the feed-forward up-projection of an emb-128 model, and a tiny one.
  for (const Shape& lin : {Shape{8, 128, 128, 512}, Shape{2, 8, 8, 32}}) {
    cases.push_back(linear_case(lin));
  }
  // the medium GPT's feed-forward up-projection (batch 8, T 256, d 384), float32 and bfloat16
  cases.push_back(linear_case({8, 256, 384, 1536}));
  cases.push_back(linear_case({8, 256, 384, 1536}, xgrad::kBFloat16));
  cases.push_back(mha_case({8, 256, 384, 6}));  // the `medium` GPT's attention
  cases.push_back(mha_case({2, 8, 16, 2}));
  // the attention core of the tiny, small and medium GPTs of bench/gpt_bench.cpp
  for (const Shape& bhtd : {Shape{32, 4, 64, 16}, Shape{16, 4, 128, 32}, Shape{8, 6, 256, 64}})
    for (bool fused : {true, false}) cases.push_back(sdpa_case(bhtd, fused));
  for (const Shape& bhtd : {Shape{32, 4, 64, 16}, Shape{16, 4, 128, 32}, Shape{8, 6, 256, 64}})
    cases.push_back(sdpa_case(bhtd, true, 0.1));
  // the small GPT of gpt_bench.cpp (batch 16, T 128, d 128, vocab 96): its feed-forward
  // hidden (B, T, 4d), its residual stream (B, T, d), its logits (B * T, vocab)
  for (bool backward : {true, false}) {
    cases.push_back(gelu_case({16, 128, 512}, backward));
    cases.push_back(layer_norm_case({16, 128, 128}, backward));
    cases.push_back(cross_entropy_case({2048, 96}, backward));
    cases.push_back(dropout_case({16, 128, 512}, backward));
  }
  // the tiny GPT (batch 32, T 64, d 64): tensors that fit in L2, where these ops are bound by
  // their arithmetic and per-op overhead rather than by memory
  for (bool backward : {true, false}) {
    cases.push_back(gelu_case({32, 64, 256}, backward));
    cases.push_back(layer_norm_case({32, 64, 64}, backward));
    cases.push_back(dropout_case({32, 64, 64}, backward));
  }
  cases.push_back(adamw_case());
  for (Case& c : overhead_cases()) cases.push_back(std::move(c));
  // the medium GPT's linear layers over 2048 tokens (B * T): fused qkv, out_proj, the
  // feed-forward up and down projections; float32 against bfloat16
  const bool dpbf16 = xgrad::bf16_gemm_has_path(xgrad::Bf16GemmPath::Dpbf16);
  const bool amx = xgrad::bf16_gemm_has_path(xgrad::Bf16GemmPath::Amx);
  for (const Shape& mnk :
       {Shape{2048, 1152, 384}, Shape{2048, 384, 384}, Shape{2048, 1536, 384}, Shape{2048, 384, 1536}}) {
    cases.push_back(matmul_fwd_case(mnk, xgrad::kFloat32));
    cases.push_back(matmul_fwd_case(mnk, xgrad::kBFloat16));
    if (dpbf16) cases.push_back(gemm_bf16_case(mnk, xgrad::Bf16GemmPath::Dpbf16, "dpbf16"));
    if (amx) cases.push_back(gemm_bf16_case(mnk, xgrad::Bf16GemmPath::Amx, "amx"));
    cases.push_back(gemm_bf16_case(mnk, xgrad::Bf16GemmPath::Widened, "widened"));
  }
  return cases;
}

}  // namespace

int main(int argc, char** argv) {
  // Our own flag, removed before Google Benchmark sees the arguments.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      xgrad::set_num_threads(std::atoi(argv[i] + 10));
      continue;
    }
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::AddCustomContext("simd_level", xgrad::simd_level());
  benchmark::AddCustomContext("gemm_backend", xgrad::gemm_backend());
  xgrad::manual_seed(0);
  for (const Case& c : all_cases()) {
    auto setup = c.setup;
    const double flops = c.flops;
    benchmark::RegisterBenchmark(c.name.c_str(),
                                 [setup, flops](benchmark::State& state) {
                                   std::function<void()> step = setup();
                                   for (auto _ : state) step();
                                   if (flops > 0.0)
                                     state.counters["GFLOPS"] = benchmark::Counter(
                                         flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
