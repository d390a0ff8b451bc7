#!/usr/bin/python3
"""Twin of bench/distributed/ddp_bench.cpp: training tokens/s of the GPT presets with
torch DistributedDataParallel (gloo backend), the global batch split over the ranks.

    /usr/bin/python3 bench/pytorch/ddp_bench.py --config small --ranks 2 --threads 1

Same models (bench/pytorch/gpt_bench.py's GPTModel and CONFIGS; batch = the global batch), same
step: forward on this rank's rows, F.cross_entropy, backward (DDP's bucketed all-reduce,
overlapped with the backward as torch does), AdamW(lr 3e-4, weight_decay 0.1),
zero_grad(set_to_none=True). --warmup untimed steps, then --steps timed; a step's time is the
slowest rank's. Prints one JSON line (rank 0).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_bench import CONFIGS, GPTModel  # noqa: E402


def run(rank, args):
    torch.set_num_threads(args.threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    cfg = dict(CONFIGS[args.config], qkv_bias=False)
    B, T, V = cfg.pop("batch"), cfg["context_length"], cfg["vocab_size"]
    torch.manual_seed(0)
    model = GPTModel(cfg)
    model.train()
    DDP = torch.nn.parallel.DistributedDataParallel
    # gloo cannot broadcast bool buffers (the attention masks, equal on every rank anyway)
    DDP._set_params_and_buffers_to_ignore_for_model(
        model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
    ddp = DDP(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    per = B // args.ranks
    batches = []
    for _ in range(4):
        x = torch.randint(0, V, (B, T))
        y = torch.randint(0, V, (B, T))
        batches.append((x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]))
    times = []
    for i in range(args.warmup + args.steps):
        x, y = batches[i % len(batches)]
        dist.barrier()
        t0 = time.perf_counter()
        loss = F.cross_entropy(ddp(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if i >= args.warmup:
            times.append(t.item())
    if rank == 0:
        step = statistics.median(times)
        print(json.dumps({"impl": "torch", "config": args.config, "ranks": args.ranks,
                          "threads": args.threads, "global_batch": B, "step_ms": round(step * 1e3, 3),
                          "tokens_per_s": round(B * T / step, 1), "torch": torch.__version__,
                          "backend": "gloo"}), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    mp.spawn(run, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
