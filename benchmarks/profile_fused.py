"""One dispatched fused call per problem, bracketed for a profiler (NVIDIA, Nsight Compute).

Builds the tuned plan of each problem (the configuration ``escha_jit`` dispatches), warms it up,
then runs ONE call between cudaProfilerStart / cudaProfilerStop, so

    ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats ... \\
        python benchmarks/profile_fused.py --problems 8192x28672:2:mcg:1,4096x4096:2:mcg:16

profiles exactly the kernels of that call (the prep kernel too, where the plan uses it). Problems
with M above the fused kernel's range run the coded GEMM (ops/gemm.py; ``--gemm-variant`` picks a
block-shape variant, e.g. ``tokens=128``; ``diag=1`` / ``diag=2``: without the decode / the wgmma). Prints
each problem's plan and the number of decoded weights, so the profiler's instruction counts turn
into instructions per weight (scripts/ncu_fused.sh does the whole run and writes CSV).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.autotune.measure import Problem, random_weights  # noqa: E402
from escha_jit.kernels import gemm  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from bench_gemm_parts import launcher, tile_args  # noqa: E402

DEFAULT = ("8192x28672:2:mcg:1,8192x28672:2:mcg:16,8192x28672:2:mul1:1,8192x28672:4:mul1:16,"
           "4096x4096:2:mcg:1,4096x4096:2:mcg:16")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default=DEFAULT, help="IC x OC : K : codebook : M, comma separated")
    ap.add_argument("--out", default="", help="JSON with each problem's plan and weight count")
    ap.add_argument("--gemm-variant", default="", help="coded GEMM tile parameters for M > 256, e.g. tokens=128 or diag=1")
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []
    for spec in args.problems.split(","):
        shape, K, cb, M = spec.split(":")
        IC, OC = (int(s) for s in shape.split("x"))
        M = int(M)
        p = Problem(IC, OC, float(K), cb, min(M, F.MAX_M))
        w = random_weights(p, 1, dev)[0]
        x = torch.randn(M, IC, device=dev, dtype=torch.float16)
        out = torch.empty(M, OC, device=dev, dtype=torch.float16)
        if M > F.MAX_M:                                     # prefill: the coded GEMM (and its prep kernel)
            tile = tile_args(args.gemm_variant)
            diag = tile.pop("diag", 0)                      # diag=1 / 2: without the decode / the wgmma
            call = launcher(x, w, out, diag, **tile)
            gs = gemm.variant(gemm.spec_for("sm_90", p.K, cb, "f16"), diag=diag, **tile)
            row = {"problem": spec, "config": str(gs.params), "weights": IC * OC, "kernel": gs.kernel_name()}
        else:
            plan = F.plan_for(dev, p.K, cb, IC, OC, "f16", "f16", M)

            def call():
                F.fused_linear(x, w, out=out)
            row = {"problem": spec, "config": str(plan.cfg), "splits": plan.launch.splits, "weights": IC * OC,
                   "kernel": plan.kernel.name, "prep": plan.prep.name if plan.prep is not None else None,
                   "source": plan.source}
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
