#!/usr/bin/python3
"""bench/pytorch/report.py: turns the per-process results of scripts/bench.sh into its tables
and bench/results/latest.json. Needs no torch (plain Python 3).

    report.py train RESULTS_DIR OUT_JSON     the training-step table (one JSON line per process)
    report.py ops RESULTS_DIR OUT_JSON       the op micro-benchmark table
    report.py check-losses BASE VARIANT [LOG]   bench.sh's check of an OPENBLAS_CORETYPE
                                             variant of a torch mode (exit 0: losses agree)

RESULTS_DIR holds what bench.sh collected: train/*.json lines from gpt_bench(.py), fma/*.json
from fma_peak, sgemm/*.json from `gpt_bench --sgemm-peak`, coretype_checks.jsonl,
ops/xgrad_t<N>.json (Google Benchmark JSON) and ops/torch_t<N>*.json. OUT_JSON is rewritten
atomically (written to OUT_JSON.tmp, then renamed); the section the other mode wrote ("rows"
for train, "ops" for ops) is kept.

Rows are per (arch, config, dtype, threads): arch "gpt" (GPTModel) or "llama" (LlamaModel at
the same config's llama-<config> shape); records without "arch" are GPT rows. dtype "fp32", or
"bf16": xgrad's step under xgrad::autocast(kBFloat16) against torch at its best among float32
and torch.autocast (bench.sh's "row_dtype"; records without it are fp32 rows).

FLOP convention (training step, per step): 6 * N_nonemb * tokens  +  12 * L * T * d * tokens / 2
with N_nonemb = parameters without tok_emb and pos_emb (the Llama has no pos_emb), L layers, T context, d emb_dim and
tokens = batch * T: 6 N for the parameter matmuls (forward 2 N, backward 4 N), and the
attention score and context matmuls (12 L T d per token for forward + backward) halved for
the causal mask. MFU = achieved GFLOP/s / (threads x the machine's float32 FMA peak per
core), the peak measured by bench/fma_peak.cpp in the same run (one thread, the widest ISA
present, on-CPU time, the best of the start and end probes). A forward pass is a third of
the step's FLOPs (2 N + 4 L T d / 2 per token), so forward MFU uses flops / 3. The 1024^3
sgemm probe (xgrad's GEMM and OpenBLAS's own threads) is printed next to it for reference.
A bf16 row also has "mfu_bf16_peak", against the same probe's bfloat16 peak (vdpbf16ps
chains; null without AVX512_BF16), and "bf16_over_fp32", its tokens/s over xgrad's own fp32
row of the same arch, config and threads.

The targets table puts each row against the TARGETS below, and a Llama row also against the
GPT row of the same config and thread count from the same run (its goal: at least the GPT's
ratio and MFU). Tokens/s are proportional to MFU
(the FLOPs per token are the same for both), so a ratio target R needs xgrad at R times
torch's MFU: "needs" is that MFU, and above 100% no implementation can reach R on this
machine.
"""
import glob
import json
import os
import sys
import time

FLOP_FORMULA = ("6*N_nonemb*tokens + 12*L*T*d*tokens/2 per training step "
                "(N_nonemb = parameters excluding tok_emb/pos_emb; tokens = batch*T)")


# the project's performance targets, per config: the training tok/s ratio against torch's best mode, and the MFU
# (against the FMA peak) at 1 and at 2 threads; every row: the forward-only ratio and
# xgrad's peak RSS as a fraction of torch's
TARGETS = {"tiny": (5.0, {1: 0.50, 2: 0.40}),
           "small": (4.0, {1: 0.70, 2: 0.60}),
           "medium": (2.3, {1: 0.80, 2: 0.70})}
FORWARD_TARGET = 3.0
RSS_TARGET = 0.5

# an OPENBLAS_CORETYPE variant of a torch mode counts only if its losses match within this
LOSS_TOLERANCE = 1e-5


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
        if "impl" in rec:  # else the process failed: only bench.sh's metadata line
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


def arch_of(r):
    """A record's model: "gpt" or "llama" (records from before the Llama rows are GPT's)."""
    return r.get("arch", "gpt")


def train_flops(r):
    tokens = r["batch"] * r["context"]
    return (6.0 * r["n_params_nonemb"] * tokens
            + 12.0 * r["n_layers"] * r["context"] * r["emb_dim"] * tokens / 2.0)


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def pct(v):
    return f"{100 * v:.1f}%" if v is not None else "-"


def read_jsonl(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


def fma_peaks(records):
    """The FMA probe per thread count, the best of the start and end probes: {"avx512": on-CPU
    GFLOP/s of all threads together, "avx512_wall": wall-clock, the same for "avx2" and for
    "bf16" (vdpbf16ps), "isa": the widest the CPU has}."""
    peaks = {}
    for r in records:
        cur = peaks.setdefault(r["threads"], {"isa": r["isa"]})
        for isa in ("avx512", "avx2", "bf16"):
            for key, field in ((isa, f"{isa}_gflops"), (f"{isa}_wall", f"{isa}_gflops_wall")):
                if r.get(field) is not None:
                    cur[key] = max(cur.get(key, 0.0), r[field])
    return peaks


def row_dtype(r):
    """The row a record belongs to: "fp32" or "bf16" (bench.sh's row_dtype)."""
    return r.get("row_dtype", "fp32")


def fma_per_core(peaks):
    """MFU's reference: the 1-thread FMA peak of the widest ISA (None if not measured)."""
    one = peaks.get(1, {})
    return one.get(one.get("isa"))


def sgemm_probes(records):
    """The 1024^3 sgemm probe's best GFLOP/s per thread count: {"xgrad": through xgrad's
    GEMM, "openblas": one cblas_sgemm with OpenBLAS's own threads}."""
    out = {}
    for r in records:
        cur = out.setdefault(r["threads"], {"xgrad": 0.0, "openblas": 0.0})
        cur["xgrad"] = max(cur["xgrad"], r["gflops_best"])
        cur["openblas"] = max(cur["openblas"], r.get("openblas_gflops_best", 0.0))
    return out


def build_info(runs):
    """What xgrad's numbers ran on: its simd_level() and gemm_backend() (one value each, or
    all the values seen, joined, should the processes disagree)."""
    info = {}
    for key in ("simd_level", "gemm_backend"):
        seen = sorted({r[key] for r in runs if r.get(key)})
        info[key] = " | ".join(seen) if seen else None
    return info


def report_train(results_dir, out_json):
    runs = read_records(os.path.join(results_dir, "train", "*.json"))
    fma = fma_peaks(read_records(os.path.join(results_dir, "fma", "*.json")))
    sgemm = sgemm_probes(read_records(os.path.join(results_dir, "sgemm", "*.json")))
    per_core = fma_per_core(fma)  # MFU's reference: threads x this
    bf16_per_core = fma.get(1, {}).get("bf16")  # a bf16 row's second MFU reference

    def pick(impl, arch, config, dtype, threads, mode, torch_mode=None):
        c = [r for r in runs if r["impl"] == impl and arch_of(r) == arch and r["config"] == config
             and row_dtype(r) == dtype and r["threads_requested"] == threads and r["mode"] == mode
             and (torch_mode is None or r.get("torch_mode") == torch_mode)
             and not r.get("probe")]
        return max(c, key=lambda r: r["tokens_per_s"]) if c else None

    order = {"tiny": 0, "small": 1, "medium": 2}
    arch_order = {"gpt": 0, "llama": 1}
    keys = sorted({(arch_of(r), r["config"], row_dtype(r), r["threads_requested"]) for r in runs},
                  key=lambda k: (order.get(k[1], 9), k[3], arch_order.get(k[0], 9), k[2]))
    rows = []
    for arch, config, dtype, threads in keys:
        xt = pick("xgrad", arch, config, dtype, threads, "train")
        tt = pick("torch", arch, config, dtype, threads, "train")
        xf = pick("xgrad", arch, config, dtype, threads, "forward")
        tf = pick("torch", arch, config, dtype, threads, "forward", tt.get("torch_mode") if tt else None)
        if not xt or not tt:
            continue
        flops = train_flops(xt)
        peak = threads * per_core if per_core else None
        bf16_peak = threads * bf16_per_core if bf16_per_core and dtype == "bf16" else None

        def gflops(r, share=1.0):  # share: the part of a step's FLOPs that r runs
            return share * flops * r["tokens_per_s"] / (r["batch"] * r["context"]) / 1e9

        def mfu(r, share=1.0):
            return round(gflops(r, share) / peak, 4) if r and peak else None

        xfp32 = pick("xgrad", arch, config, "fp32", threads, "train") if dtype == "bf16" else None
        row = {
            "arch": arch, "config": config, "dtype": dtype, "threads": threads,
            "xgrad_tokens_per_s": round(xt["tokens_per_s"], 1),
            "torch_tokens_per_s": round(tt["tokens_per_s"], 1),
            "ratio": round(xt["tokens_per_s"] / tt["tokens_per_s"], 3),
            "gflops": round(gflops(xt), 2),
            "mfu": mfu(xt),
            "xgrad_peak_rss_mb": round(xt["peak_rss_mb"], 1),
            "torch_peak_rss_mb": round(tt["peak_rss_mb"], 1),
            "forward_ratio": (round(xf["tokens_per_s"] / tf["tokens_per_s"], 3)
                              if xf and tf else None),
            "torch_mode": tt.get("torch_mode"),
            "gemm_path": xt.get("gemm_path") or xt.get("gemm_backend"),
            "mfu_bf16_peak": round(gflops(xt) / bf16_peak, 4) if bf16_peak else None,
            "bf16_over_fp32": (round(xt["tokens_per_s"] / xfp32["tokens_per_s"], 3)
                               if xfp32 else None),
            # extras
            "torch_gflops": round(gflops(tt), 2),
            "torch_mfu": mfu(tt),
            # forward: a third of the step's FLOPs per token
            "xgrad_forward_mfu": mfu(xf, 1 / 3),
            "torch_forward_mfu": mfu(tf, 1 / 3),
            "fma_peak_gflops": round(peak, 2) if peak else None,
            "xgrad_step_ms": round(xt["step_ms_median"], 3),
            "torch_step_ms": round(tt["step_ms_median"], 3),
            "xgrad_forward_tokens_per_s": round(xf["tokens_per_s"], 1) if xf else None,
            "torch_forward_tokens_per_s": round(tf["tokens_per_s"], 1) if tf else None,
            "steps": xt["steps"], "flop_per_step": flops,
            "n_params": xt["n_params"], "n_params_nonemb": xt["n_params_nonemb"],
            "xgrad_first_loss": xt.get("first_loss"), "torch_first_loss": tt.get("first_loss"),
            "torch_openblas_core": tt.get("openblas_core"),
        }
        rows.append(row)

    # the torch mode probes and the OPENBLAS_CORETYPE checks, for the record
    probes = [{k: r.get(k) for k in ("arch", "config", "row_dtype", "threads_requested", "torch_mode",
                                     "tokens_per_s", "steps", "first_loss", "last_loss",
                                     "openblas_core")}
              for r in runs if r.get("probe")]
    checks = read_jsonl(os.path.join(results_dir, "coretype_checks.jsonl"))

    build = build_info([r for r in runs if r["impl"] == "xgrad"])
    threads_run = sorted({r["threads"] for r in rows})
    torch_version = next((r.get("torch") for r in runs if r["impl"] == "torch"), None)
    print(f"xgrad: SIMD {build['simd_level']}, GEMM {build['gemm_backend']}; threads "
          f"{','.join(map(str, threads_run))}; torch {torch_version}")
    print("FMA peak per core (MFU's reference: threads x this): "
          + (f"{per_core:.1f} GF/s ({fma[1]['isa']}, on-CPU time)" if per_core
             else "not measured (MFU left out)"))
    for t, p in sorted(fma.items()):
        print(f"  FMA probe, {t} thread(s) at once: " + ", ".join(
            f"{isa} {p[isa]:.1f} GF/s on-CPU, {p.get(isa + '_wall', 0):.1f} wall-clock"
            for isa in ("avx512", "avx2", "bf16") if p.get(isa)))
    print("bf16 peak per core (a bf16 row's 'MFU bf16'): "
          + (f"{bf16_per_core:.1f} GF/s (vdpbf16ps, on-CPU time)" if bf16_per_core
             else "not measured (no AVX512_BF16)"))
    print()
    hdr = (f"{'arch':<5} {'config':<7} {'dtype':<5} {'thr':>3} {'xgrad tok/s':>12} {'torch tok/s':>12} "
           f"{'ratio':>6} {'fwd ratio':>9} {'xgrad GF/s':>10} {'MFU':>6} {'MFU bf16':>8} {'bf16/fp32':>9} "
           f"{'torch GF/s':>10} {'MFU':>6} {'fwd MFU x/t':>13} {'RSS MB x/t':>12}  torch mode")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        rss = f"{r['xgrad_peak_rss_mb']:.0f}/{r['torch_peak_rss_mb']:.0f}"
        fwd = f"{pct(r['xgrad_forward_mfu'])}/{pct(r['torch_forward_mfu'])}"
        print(f"{r['arch']:<5} {r['config']:<7} {r['dtype']:<5} {r['threads']:>3} {r['xgrad_tokens_per_s']:>12.0f} "
              f"{r['torch_tokens_per_s']:>12.0f} {r['ratio']:>6.2f} "
              f"{fmt(r['forward_ratio'], '>9.2f'):>9} {r['gflops']:>10.1f} {pct(r['mfu']):>6} "
              f"{pct(r['mfu_bf16_peak']):>8} {fmt(r['bf16_over_fp32'], '>9.2f'):>9} "
              f"{r['torch_gflops']:>10.1f} {pct(r['torch_mfu']):>6} {fwd:>13} {rss:>12}  "
              f"{r['torch_mode']}")
    backends = sorted({r["gemm_path"] for r in rows if r["gemm_path"]})
    print("GEMM path(s): " + ("; ".join(backends) if backends else "-"))
    print()
    print("ratio = xgrad tokens/s / torch tokens/s (training step: forward, cross-entropy, "
          "backward, AdamW, zero_grad; torch in its best mode); fwd ratio = the same for "
          "forward only (no grad, eval)")
    print("GF/s by " + FLOP_FORMULA)
    print("MFU = GF/s / (threads x the FMA peak per core); fwd MFU: forward only, a third of "
          "the step's FLOPs")
    def of_peak(t, g):
        return f" ({pct(g / (t * per_core))} of peak)" if per_core else ""
    print("sgemm probe (1024^3, best of 15; for reference, not MFU's): " + "; ".join(
        f"{t} thr xgrad GEMM {g['xgrad']:.1f}{of_peak(t, g['xgrad'])}, "
        f"OpenBLAS {g['openblas']:.1f}{of_peak(t, g['openblas'])} GF/s"
        for t, g in sorted(sgemm.items())))
    for c in checks:
        print(c["line"])

    targets = report_targets(rows)

    data = load_existing(out_json)
    data.pop("sgemm_peak_gflops", None)  # not an MFU reference: the probe is "sgemm_probe_gflops"
    data.update({
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(results_dir),
        "simd_level": build["simd_level"],
        "gemm_backend": build["gemm_backend"],
        "threads": threads_run,
        "torch": torch_version,
        "flop_formula": FLOP_FORMULA,
        "fma_peak_gflops_per_core": per_core,
        "bf16_peak_gflops_per_core": bf16_per_core,
        "fma_probe_gflops": {str(t): g for t, g in sorted(fma.items())},
        "sgemm_probe_gflops": {str(t): g for t, g in sorted(sgemm.items())},
        "torch_mode_probes": probes,
        "openblas_coretype_checks": [{k: v for k, v in c.items() if k != "line"}
                                     for c in checks],
        "rows": rows,
        "targets": targets,
    })
    if out_json:
        write_atomic(out_json, data)
    return 0 if rows else 1


def report_targets(rows):
    """Prints each row against TARGETS, a Llama row also against the same run's GPT row of its
    config and thread count, and returns them as JSON rows."""
    def verdict(have, target, needs=None):
        if have is None or target is None:
            return "-"
        if have >= target:
            return "met"
        return "short, above peak" if needs is not None and needs > 1.0 else "short"

    gpt_rows = {(r["config"], r["dtype"], r["threads"]): r for r in rows if r["arch"] == "gpt"}
    out = []
    for r in rows:
        if r["config"] not in TARGETS:
            continue
        gpt = gpt_rows.get((r["config"], r["dtype"], r["threads"])) if r["arch"] != "gpt" else None
        ratio_t, mfu_ts = TARGETS[r["config"]]
        mfu_t = mfu_ts.get(r["threads"])
        needs = r["torch_mfu"] * ratio_t if r["torch_mfu"] is not None else None
        fneeds = (r["torch_forward_mfu"] * FORWARD_TARGET
                  if r["torch_forward_mfu"] is not None else None)
        rss = r["xgrad_peak_rss_mb"] / r["torch_peak_rss_mb"] if r["torch_peak_rss_mb"] else None
        out.append({
            "arch": r["arch"], "config": r["config"], "dtype": r["dtype"], "threads": r["threads"],
            "bf16_over_fp32": r["bf16_over_fp32"],
            "ratio_target": ratio_t, "ratio": r["ratio"],
            "ratio_needs_mfu": round(needs, 4) if needs is not None else None,
            "ratio_verdict": verdict(r["ratio"], ratio_t, needs),
            "mfu_target": mfu_t, "mfu": r["mfu"], "mfu_verdict": verdict(r["mfu"], mfu_t),
            "forward_ratio_target": FORWARD_TARGET, "forward_ratio": r["forward_ratio"],
            "forward_mfu": r["xgrad_forward_mfu"],
            "forward_ratio_needs_mfu": round(fneeds, 4) if fneeds is not None else None,
            "forward_verdict": verdict(r["forward_ratio"], FORWARD_TARGET, fneeds),
            # RSS: have = xgrad / torch, met when at most RSS_TARGET
            "rss_target": RSS_TARGET, "rss_fraction": round(rss, 3) if rss is not None else None,
            "rss_verdict": ("-" if rss is None else "met" if rss <= RSS_TARGET else "short"),
            # a Llama row against the GPT row of its size: at least its ratio and its MFU
            "gpt_ratio": gpt["ratio"] if gpt else None,
            "gpt_mfu": gpt["mfu"] if gpt else None,
            # the GPT's ratio at torch's measured Llama MFU: what xgrad's Llama MFU must be
            "gpt_ratio_needs_mfu": (round(r["torch_mfu"] * gpt["ratio"], 4)
                                    if gpt and r["torch_mfu"] is not None else None),
            "vs_gpt_verdict": (("met" if r["ratio"] >= gpt["ratio"] and r["mfu"] is not None
                                and gpt["mfu"] is not None and r["mfu"] >= gpt["mfu"] else "short")
                               if gpt else "-"),
        })
    hdr = (f"{'arch':<5} {'config':<7} {'dtype':<5} {'thr':>3} {'ratio / goal':>12} {'needs MFU':>9} {'':<17} "
           f"{'MFU / goal':>15} {'':<5} {'fwd / goal':>11} {'fwd MFU':>7} {'needs':>7} "
           f"{'':<17} {'RSS x/t / goal':>14}  vs GPT (ratio, MFU)")
    print()
    print("targets; 'needs MFU' = the MFU xgrad needs for the ratio goal at torch's "
          "measured MFU (fwd: forward only); MFU against the FMA peak; a Llama row's "
          "'vs GPT': the GPT row of its config and threads, met at its ratio and MFU or above "
          "(needs MFU: the MFU the Llama needs for the GPT's ratio at torch's Llama MFU)")
    print(hdr)
    print("-" * (len(hdr) + 6))
    for t in out:
        vs_gpt = (f"{t['gpt_ratio']:.2f} (needs MFU {pct(t['gpt_ratio_needs_mfu'])}), "
                  f"{pct(t['gpt_mfu'])}: {t['vs_gpt_verdict']}"
                  if t["gpt_ratio"] is not None else "")
        print(f"{t['arch']:<5} {t['config']:<7} {t['dtype']:<5} {t['threads']:>3} "
              f"{t['ratio']:>6.2f} / {t['ratio_target']:>3.1f} {pct(t['ratio_needs_mfu']):>9} "
              f"{t['ratio_verdict']:<17} {pct(t['mfu']):>6} / {pct(t['mfu_target']):>6} "
              f"{t['mfu_verdict']:<5} {fmt(t['forward_ratio'], '>5.2f'):>5} / {FORWARD_TARGET:>3.1f} "
              f"{pct(t['forward_mfu']):>7} {pct(t['forward_ratio_needs_mfu']):>7} "
              f"{t['forward_verdict']:<17} {fmt(t['rss_fraction'], '>5.2f'):>5} / "
              f"{RSS_TARGET:>4.2f} {t['rss_verdict']:<5}  {vs_gpt}")
    return out


def check_losses(base_path, variant_path, log_path=None):
    """bench.sh's gate for an OPENBLAS_CORETYPE variant of a torch mode: the same mode, seed
    and steps with the other kernels must give the same first and last losses within
    LOSS_TOLERANCE. Prints the check (and appends it to log_path as a JSON line); returns
    the exit code, 0 when they agree."""
    base = next(iter(read_records(base_path)), {})
    var = next(iter(read_records(variant_path)), {})
    keys = ("first_loss", "last_loss")
    have = all(isinstance(r.get(k), float) for r in (base, var) for k in keys)
    diff = max(abs(base[k] - var[k]) for k in keys) if have else None
    ok = diff is not None and diff <= LOSS_TOLERANCE
    mode = var.get("torch_mode") or os.path.basename(variant_path)
    losses = lambda r: " ".join(f"{r[k]:.6f}" for k in keys) if have else "-"
    threads = var.get("threads_requested", var.get("threads", "?"))
    line = (f"loss check {arch_of(var)} {var.get('config', '?')} {threads} thr, {mode}: "
            f"first/last {losses(var)} (OpenBLAS {var.get('openblas_core')}) vs {losses(base)} "
            f"(OpenBLAS {base.get('openblas_core')}): max |diff| "
            + (f"{diff:.1e} {'<=' if ok else '>'} {LOSS_TOLERANCE:.0e}" if have else "n/a")
            + (": ok, a candidate" if ok else ": DIFFERENT or missing, left out"))
    print(line)
    if log_path:
        with open(log_path, "a") as f:
            f.write(json.dumps({"arch": arch_of(var), "config": var.get("config"), "threads": threads,
                                "torch_mode": mode, "base_core": base.get("openblas_core"),
                                "variant_core": var.get("openblas_core"), "max_abs_diff": diff,
                                "ok": ok, "line": line}) + "\n")
    return 0 if ok else 1


def torch_ops_mode(run):
    """How a torch ops run ran, from its JSON: "default", "PASSIVE", "SkylakeX", ..."""
    how = [v for v in (run.get("omp_wait_policy"), run.get("openblas_coretype")) if v]
    return ", ".join(how) or "default"


def report_ops(results_dir, out_json):
    rows = []
    build = {}
    for xpath in sorted(glob.glob(os.path.join(results_dir, "ops", "xgrad_t*.json"))):
        threads = int(os.path.basename(xpath)[len("xgrad_t"):-len(".json")])
        with open(xpath) as f:
            gb = json.load(f)
        for key in ("simd_level", "gemm_backend"):
            build.setdefault(key, gb.get("context", {}).get(key))
        xgrad_us = {}
        for b in gb.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
            name = b.get("run_name", b["name"])
            name = name[:-len("/real_time")] if name.endswith("/real_time") else name
            xgrad_us[name] = b["real_time"] * scale
        # torch: the fastest of its runs (default, OMP_WAIT_POLICY=PASSIVE, OPENBLAS_CORETYPE)
        # per case
        torch_us, torch_how = {}, {}
        for tpath in sorted(glob.glob(os.path.join(results_dir, "ops", f"torch_t{threads}.*json"))):
            with open(tpath) as f:
                run = json.load(f)
            for r in run["results"]:
                if r["name"] not in torch_us or r["us"] < torch_us[r["name"]]:
                    torch_us[r["name"]], torch_how[r["name"]] = r["us"], torch_ops_mode(run)
        for name, xus in xgrad_us.items():
            op, _, shape = name.partition("/")
            tus = torch_us.get(name)
            rows.append({"op": op, "shape": shape.replace("x", ","), "threads": threads,
                         "xgrad_us": round(xus, 3),
                         "torch_us": round(tus, 3) if tus is not None else None,
                         "speedup": round(tus / xus, 3) if tus else None,
                         "torch_mode": torch_how.get(name)})

    print(f"xgrad: SIMD {build.get('simd_level')}, GEMM {build.get('gemm_backend')}; threads "
          f"{','.join(str(t) for t in sorted({r['threads'] for r in rows}))}")
    print()
    hdr = (f"{'op':<22} {'shape':<16} {'thr':>3} {'xgrad us':>11} {'torch us':>11} "
           f"{'ratio':>7}  torch mode")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['op']:<22} {'(' + r['shape'] + ')':<16} {r['threads']:>3} "
              f"{r['xgrad_us']:>11.2f} {fmt(r['torch_us'], '>11.2f'):>11} "
              f"{fmt(r['speedup'], '>7.2f'):>7}  {r['torch_mode'] or '-'}")
    print()
    print("each: forward + backward (upstream gradient given, leaf grads reset), median over "
          "repetitions of the mean time per iteration; <op>_fwd: forward only, no grad; "
          "ratio = torch us / xgrad us (> 1: xgrad faster)")
    print("shapes: softmax/masked_fill (B,H,T,T); transpose_contiguous/bmm (B,H,T,D), "
          "bmm_qkT = q @ k^T, bmm_av = (B,H,T,T) @ v; linear (B,T,in,out); gelu (tanh), "
          "dropout (p 0.1), layer_norm (over the last dim) (B,T,C); cross_entropy (N,C); "
          "adamw: one step over the medium GPT's 10.8M parameters; add: 4 elements "
          "(nograd: no record, record: forward recording a node, fwd_bwd: + backward)")
    print("threads: xgrad --threads=N (its own pool and GEMM kernel); torch set_num_threads(N)"
          " + OPENBLAS_NUM_THREADS=N, the fastest per case of OpenMP's default wait policy and "
          "(at N > 1) PASSIVE, each also with OPENBLAS_CORETYPE=SkylakeX where bench.sh ran it")

    data = load_existing(out_json)
    data.update({"ops_generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "ops_machine": machine_info(results_dir),
                 "ops_simd_level": build.get("simd_level"),
                 "ops_gemm_backend": build.get("gemm_backend"), "ops": rows})
    if out_json:
        write_atomic(out_json, data)
    return 0 if rows else 1


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "check-losses":
        return check_losses(*argv[2:])
    if len(argv) != 4 or argv[1] not in ("train", "ops"):
        print(__doc__, file=sys.stderr)
        return 2
    fn = report_train if argv[1] == "train" else report_ops
    return fn(argv[2], argv[3])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
