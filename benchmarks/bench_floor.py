"""The fixed cost of one call in a CUDA-graph chain (PERF.md method), the floor under every decode
cell: a graph-chained tiny torch kernel (launch + drain of a dependent kernel), the fused kernel on
problems too small to take any time (its prologue, epilogue and split-K latency chain), and dense
bf16 on the same tiny shapes. Prints a table and writes JSON.

    python benchmarks/bench_floor.py --out floor.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.measure import Problem, random_weights, time_chain  # noqa: E402
from escha_jit.ops.fused import fused_linear, plan_for  # noqa: E402
from escha_jit.ops.common import DTYPE_NAMES  # noqa: E402

SHAPES = ((128, 128), (1024, 1024), (4096, 4096))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="floor.json")
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    ms = [int(m) for m in args.ms.split(",")]
    rows = []

    a = torch.zeros(16, device=dev)
    b = torch.zeros(16, device=dev)
    us = time_chain([lambda: torch.add(a, 1.0, out=b)] * 32, args.repeats) * 1e6
    rows.append(dict(what="torch.add on 16 floats", us=us))
    print(f"{'graph-chained torch.add (16 floats)':<46} {us:7.2f} us", flush=True)

    for IC, OC in SHAPES:
        for M in ms:
            x = torch.randn(M, IC, device=dev, dtype=torch.float16)
            wd = torch.randn(IC, OC, device=dev, dtype=torch.bfloat16)
            xb = x.to(torch.bfloat16)
            us = time_chain([lambda: torch.matmul(xb, wd)] * 32, args.repeats) * 1e6
            rows.append(dict(what="dense bf16", IC=IC, OC=OC, M=M, us=us))
            print(f"{f'dense bf16 {IC}x{OC} M={M}':<46} {us:7.2f} us", flush=True)
            for cb in ("mcg", "mul1"):
                p = Problem(IC, OC, 2.0, cb, M)
                ws = random_weights(p, 8, dev)
                out = torch.empty(M, OC, device=dev, dtype=torch.float16)
                us = time_chain([lambda w=w: fused_linear(x, w, out=out) for w in ws] * 4, args.repeats) * 1e6
                plan = plan_for(dev, 2.0, cb, IC, OC, DTYPE_NAMES[x.dtype], "f16", M)
                rows.append(dict(what="fused K2", codebook=cb, IC=IC, OC=OC, M=M, us=us,
                                 config=str(plan.cfg), splits=plan.launch.splits, source=plan.source))
                print(f"{f'fused K2 {cb} {IC}x{OC} M={M}':<46} {us:7.2f} us  S={plan.launch.splits} "
                      f"xh={plan.cfg.xh} swap={plan.cfg.swap} ({plan.source})", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), gpu=torch.cuda.get_device_name(), rows=rows), f,
                  indent=1)


if __name__ == "__main__":
    main()
