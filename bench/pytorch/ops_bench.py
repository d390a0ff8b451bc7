#!/usr/bin/python3
"""bench/pytorch/ops_bench.py: the PyTorch twin of bench/ops_bench.cpp.

Same cases, same names ("<op>/<shape>"), same computation: one iteration is forward, then
backward with a fixed upstream gradient, with the leaves' .grad reset to None first;
"<op>_fwd/<shape>" is the forward alone under torch.no_grad(); "adamw/gpt_medium" one
optimizer step.
Timing follows Google Benchmark's (as the C++ side is run by scripts/bench.sh): each
repetition runs the case for at least --min-time seconds of wall clock and gives a mean time
per iteration; the result is the median over --repetitions.

    /usr/bin/python3 bench/pytorch/ops_bench.py --threads 1 [--json out.json] [--filter softmax]

torch's intra-op threads come from --threads (torch.set_num_threads); OpenBLAS's (torch's
matmul on Debian) from OPENBLAS_NUM_THREADS, which scripts/bench.sh sets to the same number,
and OpenBLAS's kernels from OPENBLAS_CORETYPE if set: the JSON records OMP_WAIT_POLICY,
OPENBLAS_CORETYPE and the kernel set OpenBLAS runs. Run it with /usr/bin/python3: that is
the interpreter Debian's python3-torch installs into.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_bench import CONFIGS, GPTModel, MultiHeadAttention, openblas_core  # noqa: E402


def shape_str(s):
    return "x".join(str(d) for d in s)


def leaf(s):
    return torch.randn(*s, requires_grad=True)


def softmax_case(s):
    def setup():
        x, g = leaf(s), torch.randn(*s)

        def step():
            x.grad = None
            torch.softmax(x, -1).backward(g)
        return step
    return "softmax/" + shape_str(s), setup


def masked_fill_case(s):
    def setup():
        T = s[-1]
        x, g = leaf(s), torch.randn(*s)
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool()

        def step():
            x.grad = None
            x.masked_fill(mask, float("-inf")).backward(g)
        return step
    return "masked_fill/" + shape_str(s), setup


def transpose_case(s):
    def setup():
        x, g = leaf(s), torch.randn(s[0], s[2], s[1], s[3])

        def step():
            x.grad = None
            x.transpose(1, 2).contiguous().backward(g)
        return step
    return "transpose_contiguous/" + shape_str(s), setup


def bmm_qk_case(s):
    def setup():
        q, k, g = leaf(s), leaf(s), torch.randn(s[0], s[1], s[2], s[2])

        def step():
            q.grad = None
            k.grad = None
            torch.matmul(q, k.transpose(2, 3)).backward(g)
        return step
    return "bmm_qkT/" + shape_str(s), setup


def bmm_av_case(s):
    def setup():
        w, v, g = leaf((s[0], s[1], s[2], s[2])), leaf(s), torch.randn(*s)

        def step():
            w.grad = None
            v.grad = None
            torch.matmul(w, v).backward(g)
        return step
    return "bmm_av/" + shape_str(s), setup


def linear_case(s, dtype=torch.float32):
    def setup():
        def leaf_of(shape):
            return torch.randn(*shape).to(dtype).requires_grad_()
        x, w, b = leaf_of((s[0], s[1], s[2])), leaf_of((s[3], s[2])), leaf_of((s[3],))
        g = torch.randn(s[0], s[1], s[3]).to(dtype)

        def step():
            x.grad = None
            w.grad = None
            b.grad = None
            torch.nn.functional.linear(x, w, b).backward(g)
        return step
    op = "linear_bf16/" if dtype == torch.bfloat16 else "linear/"
    return op + shape_str(s), setup


def mha_case(s):
    """Raschka's MultiHeadAttention (bench/pytorch/gpt_bench.py), dropout 0; s = (B, T, d, heads)."""
    def setup():
        mha = MultiHeadAttention(s[2], s[2], s[1], 0.0, s[3])
        x, g = leaf((s[0], s[1], s[2])), torch.randn(s[0], s[1], s[2])

        def step():
            mha.zero_grad(set_to_none=True)
            x.grad = None
            mha(x).backward(g)
        return step
    return "mha/" + shape_str(s), setup


def sdpa_case(s, fused, p=0.0):
    """Causal attention of (B, H, T, D) transpose(1, 2) views of (B, T, H, D) leaves, dropout p
    (the GPTs train with 0.1; a nonzero p is named in the case, "sdpa_p0.1/...").
    torch 1.13 has no F.scaled_dot_product_attention: both names run the composed chain."""
    def setup():
        B, H, T, D = s
        q, k, v = leaf((B, T, H, D)), leaf((B, T, H, D)), leaf((B, T, H, D))
        g = torch.randn(B, T, H, D)
        mask = torch.triu(torch.ones(T, T), diagonal=1).bool()
        sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)

        def step():
            q.grad = k.grad = v.grad = None
            qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            if fused and sdpa is not None:
                ctx = sdpa(qh, kh, vh, dropout_p=p, is_causal=True)
            else:
                scores = qh @ kh.transpose(2, 3)
                scores.masked_fill_(mask, -torch.inf)
                w = torch.nn.functional.dropout(torch.softmax(scores / D ** 0.5, dim=-1), p)
                ctx = w @ vh
            ctx.transpose(1, 2).contiguous().backward(g)
        return step
    name = ("sdpa" if fused else "sdpa_composed") + (f"_p{p:g}" if p > 0 else "")
    return name + "/" + shape_str(s), setup


# ---- the GPT's element-wise and row ops: "<op>/<shape>" forward + backward, "<op>_fwd/<shape>"
# forward only (no grad)
def forward_backward(backward, g, forward):
    """One iteration: forward only without grad, or forward then backward(g) (g None: the
    output is a scalar loss)."""
    if not backward:
        with torch.no_grad():
            forward()
        return
    forward().backward(g)


def case_name(op, backward, s):
    return op + ("" if backward else "_fwd") + "/" + shape_str(s)


def gelu_case(s, backward):
    def setup():
        x, g = leaf(s), torch.randn(*s)

        def step():
            x.grad = None
            forward_backward(backward, g, lambda: F.gelu(x, approximate="tanh"))
        return step
    return case_name("gelu", backward, s), setup


def layer_norm_case(s, backward):
    def setup():
        d = s[-1]
        x, w, b, g = leaf(s), leaf((d,)), leaf((d,)), torch.randn(*s)

        def step():
            x.grad = w.grad = b.grad = None
            forward_backward(backward, g, lambda: F.layer_norm(x, (d,), w, b))
        return step
    return case_name("layer_norm", backward, s), setup


def cross_entropy_case(s, backward):
    def setup():
        logits, targets = leaf(s), torch.randint(0, s[1], (s[0],))

        def step():
            logits.grad = None
            forward_backward(backward, None, lambda: F.cross_entropy(logits, targets))
        return step
    return case_name("cross_entropy", backward, s), setup


def dropout_case(s, backward):
    def setup():
        x, g = leaf(s), torch.randn(*s)

        def step():
            x.grad = None
            forward_backward(backward, g, lambda: F.dropout(x, 0.1, training=True))
        return step
    return case_name("dropout", backward, s), setup


def adamw_case():
    """One AdamW step (lr 3e-4, weight decay 0.1, as gpt_bench.py: torch's default, the
    for-loop implementation, which is the faster one on CPU here) over the medium GPT's
    parameters with random gradients; a first step allocates the moments."""
    def setup():
        model = GPTModel(dict(CONFIGS["medium"], qkv_bias=False))
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        opt.step()
        return opt.step
    return "adamw/gpt_medium", setup


def overhead_cases():
    s = (4,)

    def nograd():
        a, b = leaf(s), leaf(s)

        def step():
            with torch.no_grad():
                torch.add(a, b)
        return step

    def record():
        a, b = leaf(s), leaf(s)

        def step():
            torch.add(a, b)
        return step

    def fwd_bwd():
        a, b, g = leaf(s), leaf(s), torch.randn(*s)

        def step():
            a.grad = None
            b.grad = None
            torch.add(a, b).backward(g)
        return step

    return [("add_nograd/4", nograd), ("add_record/4", record), ("add_fwd_bwd/4", fwd_bwd)]


def matmul_fwd_case(s, dtype):
    """x (m, k) @ W (n, k)^T in float32 or bfloat16, forward only; s = (m, n, k)."""
    def setup():
        x, w = torch.randn(s[0], s[2]).to(dtype), torch.randn(s[1], s[2]).to(dtype)

        def step():
            with torch.no_grad():
                torch.matmul(x, w.t())
        return step
    op = "matmul_bf16_fwd/" if dtype == torch.bfloat16 else "matmul_fwd/"
    return op + shape_str(s), setup


def all_cases():
    cases = []
    for scores in [(8, 4, 128, 128), (2, 4, 8, 8)]:
        cases += [softmax_case(scores), masked_fill_case(scores)]
    for bhtd in [(8, 4, 128, 32), (2, 4, 8, 8)]:
        cases += [transpose_case(bhtd), bmm_qk_case(bhtd), bmm_av_case(bhtd)]
    for lin in [(8, 128, 128, 512), (2, 8, 8, 32)]:
        cases.append(linear_case(lin))
    # the medium GPT's feed-forward up-projection, float32 and bfloat16
    cases += [linear_case((8, 256, 384, 1536)), linear_case((8, 256, 384, 1536), torch.bfloat16)]
    cases += [mha_case((8, 256, 384, 6)), mha_case((2, 8, 16, 2))]
    for bhtd in [(32, 4, 64, 16), (16, 4, 128, 32), (8, 6, 256, 64)]:
        cases += [sdpa_case(bhtd, True), sdpa_case(bhtd, False)]
    for bhtd in [(32, 4, 64, 16), (16, 4, 128, 32), (8, 6, 256, 64)]:
        cases.append(sdpa_case(bhtd, True, 0.1))
    # the small GPT of gpt_bench.py: feed-forward hidden (B, T, 4d), residual stream (B, T, d),
    # logits (B * T, vocab)
    for backward in (True, False):
        cases += [gelu_case((16, 128, 512), backward), layer_norm_case((16, 128, 128), backward),
                  cross_entropy_case((2048, 96), backward), dropout_case((16, 128, 512), backward)]
    for backward in (True, False):  # the tiny GPT's sizes (fit in L2)
        cases += [gelu_case((32, 64, 256), backward), layer_norm_case((32, 64, 64), backward),
                  dropout_case((32, 64, 64), backward)]
    cases.append(adamw_case())
    # the medium GPT's linear layers over 2048 tokens, float32 and bfloat16 (ops_bench.cpp's
    # gemm_bf16_* rows have no twin)
    for mnk in [(2048, 1152, 384), (2048, 384, 384), (2048, 1536, 384), (2048, 384, 1536)]:
        cases += [matmul_fwd_case(mnk, torch.float32), matmul_fwd_case(mnk, torch.bfloat16)]
    return cases + overhead_cases()


def measure(step, min_time, repetitions):
    """Median over repetitions of the mean seconds per iteration (Google Benchmark's way)."""
    for _ in range(3):
        step()
    # iterations per repetition: grow until one batch takes min_time, like Google Benchmark
    iters = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        took = time.perf_counter() - t0
        if took >= min_time:
            break
        iters = max(iters * 2, int(iters * min_time * 1.4 / max(took, 1e-9)))
    means = [took / iters]
    for _ in range(repetitions - 1):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        means.append((time.perf_counter() - t0) / iters)
    return statistics.median(means)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds per repetition")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--filter", default="", help="run only cases whose name contains this")
    ap.add_argument("--json", help="write [{name, us}] here")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for name, setup in all_cases():
        if args.filter and args.filter not in name:
            continue
        us = measure(setup(), args.min_time, args.repetitions) * 1e6
        rows.append({"name": name, "us": us})
        print(f"{name:40s} {us:12.2f} us", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "torch": torch.__version__,
                       "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
                       "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
                       "openblas_core": openblas_core(), "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
