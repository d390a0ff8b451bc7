#!/usr/bin/python3
"""bench/pytorch/gpt_bench.py: the PyTorch twin of bench/gpt_bench.cpp (training-step benchmark).

The model is Raschka's GPTModel ("Build a Large Language Model (From Scratch)", ch04 gpt.py),
the same structure as xgrad::nn::GPTModel, with PyTorch at its best: nn.LayerNorm,
nn.GELU(approximate="tanh"), F.cross_entropy, AdamW(lr=3e-4, weight_decay=0.1),
zero_grad(set_to_none=True). One training step = forward, cross-entropy over all positions,
backward, optimizer step, zero_grad. Random token batches; --warmup steps untimed, then the
median of --steps timed steps. --mode forward times model(ids) under torch.no_grad() in
eval mode instead. Prints one JSON line (the same keys as gpt_bench.cpp) with the peak RSS
of this process (VmHWM).

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch/gpt_bench.py --config tiny --threads 1

--threads sets torch.set_num_threads; OpenBLAS's threads (torch's matmul on Debian) come
from OPENBLAS_NUM_THREADS, set by scripts/bench.sh, and so do its kernels: OPENBLAS_CORETYPE
(e.g. SkylakeX) overrides the CPU detection. The JSON line says both: "openblas_coretype" (the
variable, "" when unset) and "openblas_core" (the kernel set OpenBLAS runs in this process).
"""
import ctypes
import argparse
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
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["train", "forward"], default="train")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=123)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = dict(CONFIGS[args.config], qkv_bias=False)
    B, T, V = cfg["batch"], cfg["context_length"], cfg["vocab_size"]
    model = GPTModel(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    n_emb = model.tok_emb.weight.numel() + model.pos_emb.weight.numel()

    # a few random batches, made before timing and cycled
    batches = [(torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))) for _ in range(4)]

    times = []
    first_loss = last_loss = None
    if args.mode == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        for i in range(args.warmup + args.steps):
            x, y = batches[i % len(batches)]
            t0 = time.perf_counter()
            logits = model(x)                                         # (B, T, V)
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
                logits = model(x)
                t1 = time.perf_counter()
                if i >= args.warmup:
                    times.append(t1 - t0)

    step_s = statistics.median(times)
    print(json.dumps({
        "impl": "torch", "torch": torch.__version__, "config": args.config,
        "mode": args.mode, "threads": args.threads,
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
