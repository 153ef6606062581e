"""Why the tuner's figure and the benchmark's differ for a problem: times the same configurations
the tuner's way (autotune.measure.FusedTimer: its weight copies, its graph, its repeats) and the
benchmark's way (bench_linear.time_graph over bench_linear.random_layers), plus the dispatched
call (ops.linear.linear, the table's choice), interleaved over rounds so that clock drift hits
all alike. Prints a table (us per call) and writes JSON.

    python benchmarks/tune_vs_bench.py --problem 4096x14336:3:mcg:16:f16 \\
        --configs w8_r16_s2_x1_S2,w8_r16_s3_x1_S2 --out tune_vs_bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.autotune.measure import FusedTimer, Problem  # noqa: E402
from escha_jit.autotune.candidates import Candidate  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.ops.linear import linear  # noqa: E402
from bench_linear import n_copies, random_layers, run_meta, time_graph  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def parse_config(text: str, M: int) -> Candidate:
    """'w8_r16_s2_x1_S2' (warps, rows per stage, stages, xh, splits; optional _b<min_blocks>)."""
    f = dict(re.findall(r"([a-zA-Z]+)(\d+)", text))
    mt = 1
    while 16 * mt < M:
        mt *= 2
    cfg = F.FusedConfig(warps=int(f["w"]), m_tiles=mt, rows_per_stage=int(f["r"]), stages=int(f["s"]),
                        min_blocks=int(f.get("b", 2)), xh=int(f["x"]))
    return Candidate(cfg, F.FusedLaunch(int(f["S"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="4096x14336:3:mcg:16:f16", help="IC x OC : K : codebook : M : dtype")
    ap.add_argument("--configs", default="w8_r16_s2_x1_S2,w8_r16_s3_x1_S2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="tune_vs_bench.json")
    args = ap.parse_args(argv)
    shape, K, cb, M, dt = args.problem.split(":")
    IC, OC = (int(v) for v in shape.split("x"))
    K, M = float(K), int(M)
    dev = torch.device("cuda")
    p = Problem(IC, OC, K, cb, M, DTYPES[dt])
    cands = [parse_config(c, M) for c in args.configs.split(",")]
    tuner = FusedTimer(p, dev)
    layers = random_layers(IC, OC, K, cb, n_copies(int(IC * OC * K // 8)), dev)
    x = torch.randn(M, IC, device=dev).to(DTYPES[dt])
    ys = [torch.empty(M, OC, device=dev, dtype=DTYPES[dt]) for _ in layers]
    ways = {}
    for name, c in zip(args.configs.split(","), cands):
        ways[f"{name} tuner"] = lambda c=c: tuner(c, 25) * 1e6
        ways[f"{name} bench"] = lambda c=c: time_graph(
            [lambda w=w, y=y: F.fused_linear(x, w, out=y, cfg=c.cfg, launch=c.launch) for w, y in zip(layers, ys)])
    ways["dispatched bench"] = lambda: time_graph([lambda w=w, y=y: linear(x, w, out=y) for w, y in zip(layers, ys)])
    times = {k: [] for k in ways}
    for r in range(args.rounds):
        for k, fn in ways.items():
            times[k].append(fn())
    plan = F.plan_for(dev, K, cb, IC, OC, dt, dt, M)
    print(f"{args.problem}: tuner {len(tuner.layers)} weight copies, bench {len(layers)}; dispatched plan "
          f"{plan.cfg} {plan.launch} ({plan.source})")
    print(f"{'way':>28} " + " ".join(f"{'round ' + str(i + 1):>9}" for i in range(args.rounds)) + f" {'median':>9}")
    for k, v in times.items():
        print(f"{k:>28} " + " ".join(f"{t:>9.2f}" for t in v) + f" {statistics.median(v):>9.2f}")
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), problem=args.problem, plan=f"{plan.cfg} {plan.launch}",
                       times_us=times), f, indent=1)


if __name__ == "__main__":
    main()
