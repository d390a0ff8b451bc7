#!/usr/bin/python3
"""bench/pytorch/report.py: turns the per-process results of scripts/bench.sh into its tables
and bench/results/latest.json. Needs no torch (plain Python 3).

    report.py train RESULTS_DIR OUT_JSON     the training-step table (one JSON line per process)
    report.py ops RESULTS_DIR OUT_JSON       the op micro-benchmark table

RESULTS_DIR holds what bench.sh collected: train/*.json lines from gpt_bench(.py), sgemm/*.json
from `gpt_bench --sgemm-peak`, ops/xgrad_t<N>.json (Google Benchmark JSON) and
ops/torch_t<N>.json. OUT_JSON is rewritten atomically (written to OUT_JSON.tmp, then renamed);
the section the other mode wrote ("rows" for train, "ops" for ops) is kept.

FLOP convention (training step, per step): 6 * N_nonemb * tokens  +  12 * L * T * d * tokens / 2
with N_nonemb = parameters without tok_emb and pos_emb, L layers, T context, d emb_dim and
tokens = batch * T: 6 N for the parameter matmuls (forward 2 N, backward 4 N), and the
attention score and context matmuls (12 L T d per token for forward + backward) halved for
the causal mask. MFU = achieved GFLOP/s / the 1024^3 sgemm peak at the same thread count,
measured in the same run (the higher of xgrad's split GEMM and OpenBLAS's own threads).
A forward pass is a third of that (2 N + 4 L T d / 2 per token), so forward MFU uses flops / 3.

The targets table puts each row against issue #6's targets. Tokens/s are proportional to MFU
(the FLOPs per token are the same for both), so a ratio target R needs xgrad at R times
torch's MFU: "needs" is that MFU, and above 100% no implementation can reach R on this
machine's sgemm peak.
"""
import glob
import json
import os
import sys
import time

FLOP_FORMULA = ("6*N_nonemb*tokens + 12*L*T*d*tokens/2 per training step "
                "(N_nonemb = parameters excluding tok_emb/pos_emb; tokens = batch*T)")


# issue #6: (training-step ratio, MFU) per config; forward-only ratio for all of them
TARGETS = {"tiny": (3.0, 0.50), "small": (2.0, 0.60), "medium": (1.4, 0.75)}
FORWARD_TARGET = 2.0


def read_records(pattern):
    """One record per file: the JSON objects on its lines merged (bench.sh writes a line of
    metadata, then the process's own result line)."""
    out = []
    for path in sorted(glob.glob(pattern)):
        rec = {}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rec.update(json.loads(line))
        if "tokens_per_s" in rec or "gflops_best" in rec:
            rec["_file"] = os.path.basename(path)
            out.append(rec)
    return out


def load_existing(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def machine_info(results_dir):
    info = {"nproc": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for name in ("loadavg_start", "loadavg_end"):
        p = os.path.join(results_dir, name)
        if os.path.exists(p):
            with open(p) as f:
                info[name] = f.read().strip()
    return info


def train_flops(r):
    tokens = r["batch"] * r["context"]
    return (6.0 * r["n_params_nonemb"] * tokens
            + 12.0 * r["n_layers"] * r["context"] * r["emb_dim"] * tokens / 2.0)


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def report_train(results_dir, out_json):
    runs = read_records(os.path.join(results_dir, "train", "*.json"))
    sgemm = {}
    for r in read_records(os.path.join(results_dir, "sgemm", "*.json")):
        t = r["threads"]
        # the higher of xgrad's split GEMM and OpenBLAS's own threads: the stricter MFU
        sgemm[t] = max(sgemm.get(t, 0.0), r["gflops_best"], r.get("openblas_gflops_best", 0.0))

    def pick(impl, config, threads, mode, torch_mode=None):
        c = [r for r in runs if r["impl"] == impl and r["config"] == config
             and r["threads_requested"] == threads and r["mode"] == mode
             and (torch_mode is None or r.get("torch_mode") == torch_mode)
             and not r.get("probe")]
        return max(c, key=lambda r: r["tokens_per_s"]) if c else None

    order = {"tiny": 0, "small": 1, "medium": 2}
    keys = sorted({(r["config"], r["threads_requested"]) for r in runs},
                  key=lambda k: (order.get(k[0], 9), k[1]))
    rows = []
    for config, threads in keys:
        xt = pick("xgrad", config, threads, "train")
        tt = pick("torch", config, threads, "train")
        xf = pick("xgrad", config, threads, "forward")
        tf = pick("torch", config, threads, "forward", tt.get("torch_mode") if tt else None)
        if not xt or not tt:
            continue
        flops = train_flops(xt)
        peak = sgemm.get(threads)
        gflops = flops * xt["tokens_per_s"] / (xt["batch"] * xt["context"]) / 1e9
        tgflops = flops * tt["tokens_per_s"] / (tt["batch"] * tt["context"]) / 1e9
        row = {
            "config": config, "threads": threads,
            "xgrad_tokens_per_s": round(xt["tokens_per_s"], 1),
            "torch_tokens_per_s": round(tt["tokens_per_s"], 1),
            "ratio": round(xt["tokens_per_s"] / tt["tokens_per_s"], 3),
            "gflops": round(gflops, 2),
            "mfu": round(gflops / peak, 4) if peak else None,
            "xgrad_peak_rss_mb": round(xt["peak_rss_mb"], 1),
            "torch_peak_rss_mb": round(tt["peak_rss_mb"], 1),
            "forward_ratio": (round(xf["tokens_per_s"] / tf["tokens_per_s"], 3)
                              if xf and tf else None),
            "torch_mode": tt.get("torch_mode"),
            # extras
            "torch_gflops": round(tgflops, 2),
            "torch_mfu": round(tgflops / peak, 4) if peak else None,
            "xgrad_step_ms": round(xt["step_ms_median"], 3),
            "torch_step_ms": round(tt["step_ms_median"], 3),
            "xgrad_forward_tokens_per_s": round(xf["tokens_per_s"], 1) if xf else None,
            "torch_forward_tokens_per_s": round(tf["tokens_per_s"], 1) if tf else None,
            "steps": xt["steps"], "flop_per_step": flops,
            "n_params": xt["n_params"], "n_params_nonemb": xt["n_params_nonemb"],
            "xgrad_first_loss": xt.get("first_loss"), "torch_first_loss": tt.get("first_loss"),
        }
        if peak:
            # forward: a third of the step's FLOPs per token
            fwd_mfu = (lambda r: flops / 3 * r["tokens_per_s"] / (r["batch"] * r["context"])
                       / 1e9 / peak)
            row["xgrad_forward_mfu"] = round(fwd_mfu(xf), 4) if xf else None
            row["torch_forward_mfu"] = round(fwd_mfu(tf), 4) if tf else None
        rows.append(row)

    # the torch thread-mode probes, for the record
    probes = [{k: r.get(k) for k in ("config", "threads_requested", "torch_mode",
                                     "tokens_per_s", "steps")}
              for r in runs if r.get("probe")]

    hdr = (f"{'config':<7} {'thr':>3} {'xgrad tok/s':>12} {'torch tok/s':>12} {'ratio':>6} "
           f"{'fwd ratio':>9} {'xgrad GF/s':>10} {'MFU':>6} {'torch GF/s':>10} {'MFU':>6} "
           f"{'RSS MB x/t':>12}  torch mode")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        rss = f"{r['xgrad_peak_rss_mb']:.0f}/{r['torch_peak_rss_mb']:.0f}"
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
        tmfu = f"{100 * r['torch_mfu']:.1f}%" if r["torch_mfu"] is not None else "-"
        print(f"{r['config']:<7} {r['threads']:>3} {r['xgrad_tokens_per_s']:>12.0f} "
              f"{r['torch_tokens_per_s']:>12.0f} {r['ratio']:>6.2f} "
              f"{fmt(r['forward_ratio'], '>9.2f'):>9} {r['gflops']:>10.1f} {mfu:>6} "
              f"{r['torch_gflops']:>10.1f} {tmfu:>6} {rss:>12}  {r['torch_mode']}")
    print()
    print("ratio = xgrad tokens/s / torch tokens/s (training step: forward, cross-entropy, "
          "backward, AdamW, zero_grad); fwd ratio = the same for forward only (no grad, eval)")
    print("GF/s by " + FLOP_FORMULA)
    print("MFU = GF/s / sgemm peak (1024^3 sgemm, best of 15, the higher of xgrad's split "
          "GEMM and OpenBLAS's own threads): " +
          ", ".join(f"{t} thr {g:.1f} GF/s" for t, g in sorted(sgemm.items())))

    targets = report_targets(rows)

    data = load_existing(out_json)
    data.update({
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(results_dir),
        "torch": next((r.get("torch") for r in runs if r["impl"] == "torch"), None),
        "flop_formula": FLOP_FORMULA,
        "sgemm_peak_gflops": {str(t): g for t, g in sorted(sgemm.items())},
        "torch_mode_probes": probes,
        "rows": rows,
        "targets": targets,
    })
    if out_json:
        write_atomic(out_json, data)
    return 0 if rows else 1


def report_targets(rows):
    """Prints each row against issue #6's targets and returns them as JSON rows."""
    def verdict(have, target, needs):
        if have is None or target is None:
            return "-"
        if have >= target:
            return "met"
        return "short, above peak" if needs is not None and needs > 1.0 else "short"

    out = []
    for r in rows:
        if r["config"] not in TARGETS or r["mfu"] is None:
            continue
        ratio_t, mfu_t = TARGETS[r["config"]]
        needs = r["torch_mfu"] * ratio_t
        fneeds = (r["torch_forward_mfu"] * FORWARD_TARGET
                  if r.get("torch_forward_mfu") is not None else None)
        out.append({
            "config": r["config"], "threads": r["threads"],
            "ratio_target": ratio_t, "ratio": r["ratio"], "ratio_needs_mfu": round(needs, 4),
            "ratio_verdict": verdict(r["ratio"], ratio_t, needs),
            "mfu_target": mfu_t, "mfu": r["mfu"], "mfu_verdict": verdict(r["mfu"], mfu_t, None),
            "forward_ratio_target": FORWARD_TARGET, "forward_ratio": r["forward_ratio"],
            "forward_mfu": r.get("xgrad_forward_mfu"),
            "forward_ratio_needs_mfu": round(fneeds, 4) if fneeds is not None else None,
            "forward_verdict": verdict(r["forward_ratio"], FORWARD_TARGET, fneeds),
        })
    pct = lambda v: f"{100 * v:.1f}%" if v is not None else "-"
    hdr = (f"{'config':<7} {'thr':>3} {'ratio / goal':>12} {'needs MFU':>9} {'':<17} "
           f"{'MFU / goal':>15} {'':<5} {'fwd / goal':>11} {'fwd MFU':>7} {'needs':>7}")
    print()
    print("targets (issue #6); 'needs MFU' = the MFU xgrad needs for the ratio goal at torch's "
          "measured MFU (fwd: forward only)")
    print(hdr)
    print("-" * (len(hdr) + 18))
    for t in out:
        print(f"{t['config']:<7} {t['threads']:>3} "
              f"{t['ratio']:>6.2f} / {t['ratio_target']:>3.1f} {pct(t['ratio_needs_mfu']):>9} "
              f"{t['ratio_verdict']:<17} {pct(t['mfu']):>6} / {pct(t['mfu_target']):>6} "
              f"{t['mfu_verdict']:<5} {fmt(t['forward_ratio'], '>5.2f'):>5} / {FORWARD_TARGET:>3.1f} "
              f"{pct(t['forward_mfu']):>7} {pct(t['forward_ratio_needs_mfu']):>7} "
              f"{t['forward_verdict']}")
    return out


def report_ops(results_dir, out_json):
    rows = []
    for xpath in sorted(glob.glob(os.path.join(results_dir, "ops", "xgrad_t*.json"))):
        threads = int(os.path.basename(xpath)[len("xgrad_t"):-len(".json")])
        with open(xpath) as f:
            gb = json.load(f)
        xgrad_us = {}
        for b in gb.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
            name = b.get("run_name", b["name"])
            name = name[:-len("/real_time")] if name.endswith("/real_time") else name
            xgrad_us[name] = b["real_time"] * scale
        # torch: the faster of the default run and the OMP_WAIT_POLICY=PASSIVE one, per case
        torch_us, torch_how = {}, {}
        for suffix, how in ((".json", "default"), (".passive.json", "OMP_WAIT_POLICY=PASSIVE")):
            tpath = os.path.join(results_dir, "ops", f"torch_t{threads}{suffix}")
            if not os.path.exists(tpath):
                continue
            with open(tpath) as f:
                for r in json.load(f)["results"]:
                    if r["name"] not in torch_us or r["us"] < torch_us[r["name"]]:
                        torch_us[r["name"]], torch_how[r["name"]] = r["us"], how
        for name, xus in xgrad_us.items():
            op, _, shape = name.partition("/")
            tus = torch_us.get(name)
            rows.append({"op": op, "shape": shape.replace("x", ","), "threads": threads,
                         "xgrad_us": round(xus, 3),
                         "torch_us": round(tus, 3) if tus is not None else None,
                         "speedup": round(tus / xus, 3) if tus else None,
                         "torch_omp": torch_how.get(name)})

    hdr = (f"{'op':<22} {'shape':<16} {'thr':>3} {'xgrad us':>11} {'torch us':>11} "
           f"{'ratio':>7}  torch OpenMP")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['op']:<22} {'(' + r['shape'] + ')':<16} {r['threads']:>3} "
              f"{r['xgrad_us']:>11.2f} {fmt(r['torch_us'], '>11.2f'):>11} "
              f"{fmt(r['speedup'], '>7.2f'):>7}  {r['torch_omp'] or '-'}")
    print()
    print("each: forward + backward (upstream gradient given, leaf grads reset), median over "
          "repetitions of the mean time per iteration; ratio = torch us / xgrad us (> 1: xgrad faster)")
    print("shapes: softmax/masked_fill (B,H,T,T); transpose_contiguous/bmm (B,H,T,D), "
          "bmm_qkT = q @ k^T, bmm_av = (B,H,T,T) @ v; linear (B,T,in,out); add: 4 elements "
          "(nograd: no record, record: forward recording a node, fwd_bwd: + backward)")
    print("threads: xgrad --threads=N (its own pool, OpenBLAS pinned to 1); torch set_num_threads(N)"
          " + OPENBLAS_NUM_THREADS=N"
          ", at N > 1 the faster of OpenMP's default wait policy and PASSIVE per case")

    data = load_existing(out_json)
    data.update({"ops_generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "ops_machine": machine_info(results_dir), "ops": rows})
    if out_json:
        write_atomic(out_json, data)
    return 0 if rows else 1


def main(argv):
    if len(argv) != 4 or argv[1] not in ("train", "ops"):
        print(__doc__, file=sys.stderr)
        return 2
    fn = report_train if argv[1] == "train" else report_ops
    return fn(argv[2], argv[3])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
