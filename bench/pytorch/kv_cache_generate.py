#!/usr/bin/python3
"""bench/pytorch/kv_cache_generate.py: the PyTorch twin of bench/generate_bench.cpp.

The model is the book's KV-cache GPT (rasbt/LLMs-from-scratch, ch04/03_kv-cache,
gpt_with_kv_cache.py): MultiHeadAttention keeps cache_k/cache_v and grows them with torch.cat,
GPTModel keeps current_pos for the position embeddings, and generate_text_simple_cached()
feeds the prompt once, then one token per step. With use_cache=False it recomputes the whole
sequence for every token, as the book's generate_text_simple. Here nn.LayerNorm and
nn.GELU("tanh") stand in for the book's hand-written classes (the same math, as in
tests/fixtures/gen_gpt.py). Greedy, batch 1, a 4-token prompt, context_length - 4 new tokens,
vocab 96; time is this thread's CPU time (time.thread_time(), torch.set_num_threads(1)), best
of --repeat. One JSON line per config and mode.

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/pytorch/kv_cache_generate.py --config all
"""
import argparse
import json
import time

import torch
import torch.nn as nn

CONFIGS = {  # keep in sync with bench/generate_bench.cpp
    "tiny": dict(context_length=64, emb_dim=64, n_heads=4, n_layers=2),
    "small": dict(context_length=128, emb_dim=128, n_heads=4, n_layers=4),
    "medium": dict(context_length=256, emb_dim=384, n_heads=6, n_layers=6),
}


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1),
                             persistent=False)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape
        keys_new = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values_new = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new
        attn_scores = queries @ keys.transpose(2, 3)
        num_tokens_Q = queries.shape[-2]
        num_tokens_K = keys.shape[-2]
        if use_cache:
            mask_bool = self.mask.bool()[self.ptr_current_pos:self.ptr_current_pos + num_tokens_Q, :num_tokens_K]
            self.ptr_current_pos += num_tokens_Q
        else:
            mask_bool = self.mask.bool()[:num_tokens_Q, :num_tokens_K]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(cfg["emb_dim"], cfg["emb_dim"], cfg["context_length"],
                                      cfg["drop_rate"], cfg["n_heads"], cfg["qkv_bias"])
        self.ff = nn.Sequential(nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
                                nn.GELU(approximate="tanh"),
                                nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]))
        self.norm1 = nn.LayerNorm(cfg["emb_dim"])
        self.norm2 = nn.LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x, use_cache=False):
        shortcut = x
        x = self.drop_shortcut(self.att(self.norm1(x), use_cache=use_cache))
        x = x + shortcut
        shortcut = x
        x = self.drop_shortcut(self.ff(self.norm2(x)))
        return x + shortcut


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.ModuleList([TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.current_pos = 0
        self.final_norm = nn.LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx, use_cache=False):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        if use_cache:
            pos_ids = torch.arange(self.current_pos, self.current_pos + seq_len)
            self.current_pos += seq_len
        else:
            pos_ids = torch.arange(0, seq_len)
        x = self.drop_emb(tok_embeds + self.pos_emb(pos_ids).unsqueeze(0))
        for blk in self.trf_blocks:
            x = blk(x, use_cache=use_cache)
        return self.out_head(self.final_norm(x))

    def reset_kv_cache(self):
        for blk in self.trf_blocks:
            blk.att.reset_cache()
        self.current_pos = 0


def generate_text_simple_cached(model, idx, max_new_tokens, context_size=None, use_cache=True):
    model.eval()
    ctx_len = context_size or model.pos_emb.num_embeddings
    with torch.no_grad():
        if use_cache:
            model.reset_kv_cache()
            logits = model(idx[:, -ctx_len:], use_cache=True)
            for _ in range(max_new_tokens):
                next_idx = logits[:, -1].argmax(dim=-1, keepdim=True)
                idx = torch.cat([idx, next_idx], dim=1)
                logits = model(next_idx, use_cache=True)
        else:
            for _ in range(max_new_tokens):
                logits = model(idx[:, -ctx_len:], use_cache=False)
                next_idx = logits[:, -1].argmax(dim=-1, keepdim=True)
                idx = torch.cat([idx, next_idx], dim=1)
    return idx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="all")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, c in CONFIGS.items():
        if args.config not in ("all", name):
            continue
        torch.manual_seed(123)
        cfg = dict(c, vocab_size=96, drop_rate=0.1, qkv_bias=False)
        model = GPTModel(cfg)
        prompt = torch.tensor([[5, 17, 42, 3]])
        new_tokens = cfg["context_length"] - 4
        for cache in (True, False):
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.thread_time()
                out = generate_text_simple_cached(model, prompt, new_tokens, use_cache=cache)
                best = min(best, time.thread_time() - t0)
            print(json.dumps({"framework": "pytorch", "config": name, "kv_cache": cache,
                              "new_tokens": new_tokens, "cpu_s": round(best, 4),
                              "tokens_per_s": round(new_tokens / best, 1),
                              "last_id": int(out[0, -1])}), flush=True)


if __name__ == "__main__":
    main()
