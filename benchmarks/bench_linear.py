"""Decode and prefill benchmark of the coded linear against dense bf16 cuBLAS and the reference
runtime's figures (PERF.md). Prints a table and writes JSON.

Method (PERF.md): per case, one CUDA graph chains n calls over n DISTINCT weight copies (more
bytes than the 60 MB L2); median of 20 replays / n = microseconds per call. Dense bf16 is
measured the same way in the same process. Inputs are random, never zeros.

    python benchmarks/bench_linear.py --out results.json            # the PERF.md targets 1 and 2
    python benchmarks/bench_linear.py --quick                        # a few cases
    python benchmarks/bench_linear.py --act-quants none,int8         # + the opt-in int8 route (mul1)

Rows of the int8-activation route carry act="int8"; the summary keeps them apart (the PERF.md
targets are about fp16/bf16 activations).

The targets divide by dense bf16 as measured in the same run, which moves with the machine: the same
kernels read 1.455-1.516x across two H200s (benchmarks/RESULTS.md session 51). The summary's
``*_vs_perfmd_bf16`` figures divide by PERF.md's own bf16 column instead (baselines/h200_bf16_perfmd.json),
a fixed denominator that compares runs on different machines by our kernels' times alone.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.ops.linear import linear  # noqa: E402
from escha_jit.provenance import git_commit, source_digest  # noqa: E402
from escha_jit.reference import LinearWeights  # noqa: E402
from escha_jit.trellis import tile_words  # noqa: E402

SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672)]
L2_BYTES = 60 << 20
BASELINES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baselines")
BASELINE = os.path.join(BASELINES, "h200_exl3_graph.json")
BASELINE_BF16 = os.path.join(BASELINES, "h200_bf16_perfmd.json")


def perfmd_bf16() -> dict[tuple[int, int, int], float]:
    """PERF.md's dense bf16 cuBLAS times, (IC, OC, M) -> microseconds per call (its decode cells)."""
    with open(BASELINE_BF16) as f:
        return {(IC, OC, M): us for IC, OC, M, us in json.load(f)["rows"]}


def summarize(rows: list[dict], bf16_table: dict[tuple[int, int, int], float]) -> dict:
    """The run's figures from its rows: per bucket (decode M <= 16, prefill M >= 1024; the int8 route
    apart) the geometric mean and the minimum of the speedups over dense bf16 measured in the run and
    over the reference's figures; decode also over ``bf16_table`` (PERF.md's bf16 column), where it
    has every decode cell of the run."""
    gm = statistics.geometric_mean
    summary = {}
    dec = [r for r in rows if r.get("speedup_bf16") and r["M"] <= 16 and r["act"] == "none"]
    i8 = [r for r in rows if r.get("act") == "int8" and r["M"] <= 16]
    if i8:
        summary["int8_decode_geomean_vs_bf16"] = gm([r["speedup_bf16"] for r in i8])
        summary["int8_decode_min_vs_bf16"] = min(r["speedup_bf16"] for r in i8)
        refi = [r["speedup_ref"] for r in i8 if r["speedup_ref"]]
        summary["int8_decode_geomean_vs_ref"] = gm(refi) if refi else None
    if dec:
        summary["decode_geomean_vs_bf16"] = gm([r["speedup_bf16"] for r in dec])
        refd = [r["speedup_ref"] for r in dec if r["speedup_ref"]]
        summary["decode_geomean_vs_ref"] = gm(refd) if refd else None
        summary["decode_min_vs_bf16"] = min(r["speedup_bf16"] for r in dec)
        summary["decode_min_vs_ref"] = min(refd) if refd else None
        fixed = [bf16_table.get((r["IC"], r["OC"], r["M"])) for r in dec]
        if all(fixed):
            v = [b / r["us"] for b, r in zip(fixed, dec)]
            summary["decode_geomean_vs_perfmd_bf16"] = gm(v)
            summary["decode_min_vs_perfmd_bf16"] = min(v)
    pre = [r for r in rows if r.get("speedup_bf16") and r["M"] >= 1024 and r["act"] == "none"]
    if pre:
        summary["prefill_geomean_vs_bf16"] = gm([r["speedup_bf16"] for r in pre])
        summary["prefill_min_vs_bf16"] = min(r["speedup_bf16"] for r in pre)
    return summary


def run_meta() -> dict:
    """Where and on what a result was measured. ``source_digest`` identifies the tree (package,
    templates, tuning tables; escha_jit.provenance): a GPU machine's copy may carry stale git
    metadata, so ``commit`` can name the wrong tree there."""
    return dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), commit=git_commit(), source_digest=source_digest(),
                gpu=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)


def parse_shapes(text) -> list[tuple[int, int]]:
    """'4096x4096,8192x28672' -> [(IC, OC), ...]; empty or None: the four PERF.md shapes."""
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")] if text else list(SHAPES)


def n_copies(bytes_per_copy: int) -> int:
    return max(8, min(64, math.ceil(3 * L2_BYTES / bytes_per_copy)))


def capture_graph(fn_list) -> torch.cuda.CUDAGraph:
    """One CUDA graph chaining every fn in fn_list (the first two run once before, outside capture)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for fn in fn_list[:2]:
            fn()                                       # warm-up outside capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in fn_list:
            fn()
    return g


def replay_us(g: torch.cuda.CUDAGraph, n_calls: int, replays: int = 20) -> float:
    """Median over `replays` event-timed replays of g, in microseconds per call of its n_calls."""
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / n_calls)
    return statistics.median(times)


def time_graph(fn_list, replays: int = 20) -> float:
    """Median microseconds per call of a graph chaining every fn in fn_list."""
    g = capture_graph(fn_list)
    for _ in range(3):
        g.replay()
    return replay_us(g, len(fn_list), replays)


def random_layers(IC, OC, K, cb, n, dev):
    out = []
    for i in range(n):
        code = torch.randint(-32768, 32768, (IC // 16, OC // 16, tile_words(K)), dtype=torch.int16, device=dev)
        rin = ((torch.randint(0, 2, (IC,), device=dev) * 2 - 1) * (torch.rand(IC, device=dev) + 0.5) / math.sqrt(IC)).half()
        rout = ((torch.randint(0, 2, (OC,), device=dev) * 2 - 1) * (torch.rand(OC, device=dev) + 0.5)).half()
        out.append(LinearWeights(code, float(K), cb, rin, rout))
    return out


def bench_dense(IC, OC, M, dev, n):
    ws = [torch.randn(IC, OC, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    x = torch.randn(M, IC, device=dev, dtype=torch.bfloat16)
    ys = [torch.empty(M, OC, device=dev, dtype=torch.bfloat16) for _ in range(n)]
    us = time_graph([lambda w=w, y=y: torch.matmul(x, w, out=y) for w, y in zip(ws, ys)])
    del ws, ys
    return us


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_linear.json")
    ap.add_argument("--quick", action="store_true", help="two shapes, K=2/4, mcg/mul1, fp16")
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--prefill-ms", default="1024,4096")
    ap.add_argument("--ks", default="2,3,4")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x4096,8192x28672")
    ap.add_argument("--act-quants", default="none", help="none,int8 (int8: mul1 layers, M <= 64)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    torch.manual_seed(0)
    shapes = parse_shapes(args.shapes)
    ks = [float(k) for k in args.ks.split(",")]
    cbs = args.codebooks.split(",")
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    dtypes = args.dtypes.split(",")
    ms = [int(m) for m in args.ms.split(",") if m]
    acts = [None if a == "none" else a for a in args.act_quants.split(",")]
    pms = [int(m) for m in args.prefill_ms.split(",") if m]
    if args.quick:
        shapes, ks, dtypes, pms = shapes[:1] + shapes[-1:], [2.0, 4.0], ["f16"], [1024]
    base = {}
    if os.path.exists(BASELINE):
        for IC, OC, cb, K, M, us, gbs in json.load(open(BASELINE)):
            base[(IC, OC, cb, float(K), M)] = us
    rows = []
    hdr = f"{'shape':>11} {'K':>3} {'cb':>4} {'M':>5} {'dt':>4} {'us':>8} {'bf16 us':>8} {'x bf16':>7} {'ref us':>7} {'x ref':>6} {'Tw/s':>6} {'GB/s':>7}"
    print(hdr, flush=True)
    # decode first over every shape, then prefill: the prefill GEMMs heat the GPU and its clocks
    # drop for seconds afterwards, which would slow the decode cases timed next (~10-15 %)
    for phase_ms in ([m for m in (ms, pms) if m]):
      for IC, OC in shapes:
        nd = n_copies(2 * IC * OC)
        dense = {M: bench_dense(IC, OC, M, dev, nd) for M in phase_ms}
        for M in phase_ms:
            rows.append(dict(IC=IC, OC=OC, K=16, codebook="bf16", M=M, dtype="bf16", us=dense[M]))
        for K in ks:
            for cb in cbs:
                n = n_copies(IC * OC * K // 8)
                layers = random_layers(IC, OC, K, cb, n, dev)
                for dt, M, act in [(dt, M, act) for act in acts for dt in dtypes for M in phase_ms]:
                    if act == "int8" and (cb != "mul1" or M > F.I8_MAX_M):
                        continue
                    if True:
                        x = torch.randn(M, IC, device=dev).to(dts[dt])
                        ys = [torch.empty(M, OC, device=dev, dtype=dts[dt]) for _ in layers]
                        if act:
                            fn = lambda x, w, out, act=act: linear(x, w, out=out, act_quant=act)  # noqa: E731
                        else:
                            fn = linear
                        try:
                            us = time_graph([lambda w=w, y=y: fn(x, w, out=y) for w, y in zip(layers, ys)],
                                            replays=20 if M <= F.MAX_M else 5)
                        except Exception as e:  # noqa: BLE001 - report and go on
                            print(f"FAILED {IC}x{OC} K{K} {cb} M{M} {dt} {act}: {type(e).__name__}: {e}", flush=True)
                            continue
                        ref = base.get((IC, OC, cb, K, M))
                        wps = IC * OC / (us * 1e-6)
                        row = dict(IC=IC, OC=OC, K=K, codebook=cb, M=M, dtype=dt, act=act or "none", us=us,
                                   bf16_us=dense[M],
                                   speedup_bf16=dense[M] / us, ref_us=ref, speedup_ref=(ref / us) if ref else None,
                                   weights_per_s=wps, weight_gb_s=IC * OC * K / 8 / (us * 1e-6) / 1e9)
                        rows.append(row)
                        dlabel = dt + ("+i8" if act == "int8" else "")
                        print(f"{IC:>5}x{OC:<5} {K:>3g} {cb:>4} {M:>5} {dlabel:>4} {us:>8.2f} {dense[M]:>8.2f} "
                              f"{dense[M] / us:>7.2f} {ref if ref else float('nan'):>7.1f} "
                              f"{(ref / us) if ref else float('nan'):>6.2f} {wps / 1e12:>6.2f} {row['weight_gb_s']:>7.0f}",
                              flush=True)
                del layers
                torch.cuda.empty_cache()
    summary = summarize(rows, perfmd_bf16())
    print(json.dumps(summary, indent=1))
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), summary=summary, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
