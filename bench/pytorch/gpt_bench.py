#!/usr/bin/python3
"""bench/pytorch/gpt_bench.py: the PyTorch twin of bench/gpt_bench.cpp (training-step benchmark).

The model is Raschka's GPTModel ("Build a Large Language Model (From Scratch)", ch04 gpt.py),
the same structure as xgrad::nn::GPTModel, or with --arch llama his Llama 3 (ch05/07_gpt_to_llama,
standalone-llama32: RMSNorm, RoPE, the SwiGLU feed-forward, grouped-query attention with
repeat_interleave, as torch 1.13 has no enable_gqa), the same structure as xgrad::nn::LlamaModel
and tests/fixtures/gen_llama_model.py's reference, at train_lm's llama-<config> shapes
(hidden_dim = 3 * emb_dim, n_kv_groups = n_heads / 2, rope_base 10000 without frequency
scaling, no dropout, no biases, untied head). Both in float32, with PyTorch at its best:
nn.LayerNorm, nn.GELU(approximate="tanh"), F.cross_entropy, AdamW(lr=3e-4, weight_decay=0.1),
zero_grad(set_to_none=True). One training step = forward, cross-entropy over all positions,
backward, optimizer step, zero_grad. Random token batches; --warmup steps untimed, then the
median of --steps timed steps. --mode forward times model(ids) under torch.no_grad() in
eval mode instead. Prints one JSON line (the same keys as gpt_bench.cpp) with the peak RSS
of this process (VmHWM).

--dtype bf16 runs the forward pass and the loss (all of --mode forward) under
torch.autocast("cpu", dtype=torch.bfloat16), as gpt_bench.cpp --dtype bf16 runs xgrad::autocast;
backward and AdamW run outside it on float32 weights. The JSON line says "dtype".

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch/gpt_bench.py --config tiny --threads 1

--threads sets torch.set_num_threads; OpenBLAS's threads (torch's matmul on Debian) come
from OPENBLAS_NUM_THREADS, set by scripts/bench.sh, and so do its kernels: OPENBLAS_CORETYPE
(e.g. SkylakeX) overrides the CPU detection. The JSON line says both: "openblas_coretype" (the
variable, "" when unset) and "openblas_core" (the kernel set OpenBLAS runs in this process).
"""
import ctypes
import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# (vocab, context, emb_dim, heads, layers, batch, dropout): keep in sync with gpt_bench.cpp
CONFIGS = {
    "tiny": dict(vocab_size=96, context_length=64, emb_dim=64, n_heads=4, n_layers=2,
                 batch=32, drop_rate=0.1),
    "small": dict(vocab_size=96, context_length=128, emb_dim=128, n_heads=4, n_layers=4,
                  batch=16, drop_rate=0.1),
    "medium": dict(vocab_size=96, context_length=256, emb_dim=384, n_heads=6, n_layers=6,
                   batch=8, drop_rate=0.1),
}


# ---------------------------------------------------------------- the model (Raschka ch03/ch04)
class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length),
                                                diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)                                    # (b, T, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)            # (b, H, T, T)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)   # (b, T, H, D)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
            nn.GELU(approximate="tanh"),
            nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]),
        )

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"],
                                      context_length=cfg["context_length"],
                                      num_heads=cfg["n_heads"], dropout=cfg["drop_rate"],
                                      qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = nn.LayerNorm(cfg["emb_dim"])
        self.norm2 = nn.LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x)
        x = self.drop_shortcut(x)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        return x + shortcut


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = nn.LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = tok_embeds + pos_embeds
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        return self.out_head(x)


# ---------------------------------------------------------------- the Llama (Raschka ch05/07)
def llama_config(cfg):
    """train_lm's llama-<config> shape of a GPT config (gpt_bench.cpp's llama_config_of)."""
    n_heads = cfg["n_heads"]
    return dict(vocab_size=cfg["vocab_size"], context_length=cfg["context_length"],
                emb_dim=cfg["emb_dim"], n_heads=n_heads, n_layers=cfg["n_layers"],
                hidden_dim=3 * cfg["emb_dim"],
                n_kv_groups=n_heads if n_heads % 2 else n_heads // 2,
                rope_base=10_000.0, rope_freq=None, dtype=torch.float32, batch=cfg["batch"])


class RMSNorm(nn.Module):
    """The book's RMSNorm (torch 1.13 has no nn.RMSNorm)."""
    def __init__(self, emb_dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.emb_dim = emb_dim
        self.weight = nn.Parameter(torch.ones(emb_dim))

    def forward(self, x):
        means = x.pow(2).mean(dim=-1, keepdim=True)
        x_normed = x * torch.rsqrt(means + self.eps)
        return (x_normed * self.weight).to(dtype=x.dtype)


class LlamaFeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.fc1 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], dtype=cfg["dtype"], bias=False)
        self.fc2 = nn.Linear(cfg["emb_dim"], cfg["hidden_dim"], dtype=cfg["dtype"], bias=False)
        self.fc3 = nn.Linear(cfg["hidden_dim"], cfg["emb_dim"], dtype=cfg["dtype"], bias=False)

    def forward(self, x):
        x = F.silu(self.fc1(x)) * self.fc2(x)                   # SwiGLU
        return self.fc3(x)


def compute_rope_params(head_dim, theta_base=10_000, context_length=4096, dtype=torch.float32):
    assert head_dim % 2 == 0
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2, dtype=dtype)[: (head_dim // 2)].float()
                                     / head_dim))
    positions = torch.arange(context_length, dtype=dtype)
    angles = positions[:, None] * inv_freq[None, :]             # (context_length, head_dim // 2)
    angles = torch.cat([angles, angles], dim=1)                 # (context_length, head_dim)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    batch_size, num_heads, seq_len, head_dim = x.shape
    x1 = x[..., : head_dim // 2]
    x2 = x[..., head_dim // 2:]
    cos = cos[:seq_len, :].unsqueeze(0).unsqueeze(0)
    sin = sin[:seq_len, :].unsqueeze(0).unsqueeze(0)
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, num_kv_groups, dtype=None):
        super().__init__()
        assert d_out % num_heads == 0
        assert num_heads % num_kv_groups == 0
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False, dtype=dtype)
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.W_query = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)

    def forward(self, x, mask, cos, sin):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        queries = apply_rope(queries, cos, sin)
        keys = apply_rope(keys, cos, sin)
        keys = keys.repeat_interleave(self.group_size, dim=1)   # (b, H, T, D)
        values = values.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)            # (b, H, T, T)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        context_vec = (attn_weights @ values).transpose(1, 2)   # (b, T, H, D)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


class LlamaTransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = GroupedQueryAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], num_heads=cfg["n_heads"],
                                         num_kv_groups=cfg["n_kv_groups"], dtype=cfg["dtype"])
        self.ff = LlamaFeedForward(cfg)
        self.norm1 = RMSNorm(cfg["emb_dim"], eps=1e-5)
        self.norm2 = RMSNorm(cfg["emb_dim"], eps=1e-5)

    def forward(self, x, mask, cos, sin):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x, mask, cos, sin)
        x = x + shortcut
        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        return x + shortcut


class Llama3Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"], dtype=cfg["dtype"])
        self.trf_blocks = nn.ModuleList([LlamaTransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = RMSNorm(cfg["emb_dim"], eps=1e-5)
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False, dtype=cfg["dtype"])
        cos, sin = compute_rope_params(head_dim=cfg["emb_dim"] // cfg["n_heads"], theta_base=cfg["rope_base"],
                                       context_length=cfg["context_length"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.cfg = cfg

    def forward(self, in_idx):
        x = self.tok_emb(in_idx)
        num_tokens = x.shape[1]
        mask = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)
        mask = mask[None, None, :, :]
        for block in self.trf_blocks:
            x = block(x, mask, self.cos, self.sin)
        x = self.final_norm(x)
        return self.out_head(x.to(self.cfg["dtype"]))


# ---------------------------------------------------------------- measurement
def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def openblas_core():
    """The kernel set of the OpenBLAS torch loaded (openblas_get_corename), or None."""
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "blas" in line and ".so" in line})
    for path in libs:
        try:
            corename = ctypes.CDLL(path).openblas_get_corename
        except (OSError, AttributeError):
            continue
        corename.restype = ctypes.c_char_p
        return corename().decode()
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=["gpt", "llama"], default="gpt")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["train", "forward"], default="train")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=123)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.arch == "llama":
        cfg = llama_config(CONFIGS[args.config])
        model = Llama3Model(cfg)
        n_emb = model.tok_emb.weight.numel()
    else:
        cfg = dict(CONFIGS[args.config], qkv_bias=False)
        model = GPTModel(cfg)
        n_emb = model.tok_emb.weight.numel() + model.pos_emb.weight.numel()
    B, T, V = cfg["batch"], cfg["context_length"], cfg["vocab_size"]
    n_params = sum(p.numel() for p in model.parameters())

    # a few random batches, made before timing and cycled
    batches = [(torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))) for _ in range(4)]

    times = []
    first_loss = last_loss = None

    def autocast():
        if args.dtype == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()
    if args.mode == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        for i in range(args.warmup + args.steps):
            x, y = batches[i % len(batches)]
            t0 = time.perf_counter()
            with autocast():
                logits = model(x)                                     # (B, T, V)
                loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            t1 = time.perf_counter()
            if i >= args.warmup:
                times.append(t1 - t0)
            last_loss = loss.item()
            if first_loss is None:
                first_loss = last_loss
    else:
        model.eval()
        with torch.no_grad():
            for i in range(args.warmup + args.steps):
                x, _ = batches[i % len(batches)]
                t0 = time.perf_counter()
                with autocast():
                    logits = model(x)
                t1 = time.perf_counter()
                if i >= args.warmup:
                    times.append(t1 - t0)

    step_s = statistics.median(times)
    print(json.dumps({
        "impl": "torch", "torch": torch.__version__, "arch": args.arch, "config": args.config,
        "mode": args.mode, "threads": args.threads, "dtype": args.dtype,
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", ""),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "openblas_core": openblas_core(),
        "batch": B, "context": T, "emb_dim": cfg["emb_dim"], "n_layers": cfg["n_layers"],
        "n_params": n_params, "n_params_nonemb": n_params - n_emb,
        "steps": len(times), "step_ms_median": step_s * 1e3,
        "step_ms_min": min(times) * 1e3, "step_ms_max": max(times) * 1e3,
        "tokens_per_s": B * T / step_s, "first_loss": first_loss, "last_loss": last_loss,
        "peak_rss_mb": peak_rss_mb(),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
