"""Does the vendor GEMM's speed depend on its operands' values at prefill sizes? (H200: large GEMMs
run at the board's power limit, and operands whose low mantissa bits are zero toggle fewer bits.)
Times torch.mm on the same shapes with fp16 operands at full fp16 precision, fp16 operands holding
bf16-representable values (7-bit mantissas, as bf16 activations cast to fp16), and bf16 operands;
samples the SM clock and board power (nvidia-smi) while each runs. One CUDA graph of 8 calls,
median of 10 replays; the cases run interleaved, twice.

    python benchmarks/bench_gemm_entropy.py --out gemm_entropy.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_linear import run_meta, time_graph  # noqa: E402


def sampled(fn) -> tuple[float, float, float]:
    """(us per call, median SM MHz, median W) with nvidia-smi sampling every 50 ms during the run."""
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                          "-lms", "50"], stdout=subprocess.PIPE, text=True)
    try:
        us = time_graph([fn] * 8, replays=10)
    finally:
        p.terminate()
        out = p.communicate()[0]
    vals = [tuple(float(v) for v in line.split(",")) for line in out.strip().splitlines() if "," in line]
    if not vals:
        return us, float("nan"), float("nan")
    mhz = sorted(v[0] for v in vals)[len(vals) // 2]
    w = sorted(v[1] for v in vals)[len(vals) // 2]
    return us, mhz, w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="gemm_entropy.json")
    ap.add_argument("--cases", default="4096x8192x28672,1024x8192x28672,4096x4096x4096,4096x14336x4096",
                    help="M x IC x OC")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    rows = []
    for case in args.cases.split(","):
        M, IC, OC = (int(v) for v in case.split("x"))
        x32, w32 = torch.randn(M, IC, device=dev), torch.randn(IC, OC, device=dev) / IC ** 0.5
        ops = {"f16_full": (x32.half(), w32.half()),
               "f16_bf16vals": (x32.bfloat16().half(), w32.bfloat16().half()),
               "f16_x_bf16vals": (x32.bfloat16().half(), w32.half()),
               "bf16": (x32.bfloat16(), w32.bfloat16())}
        outs = {k: torch.empty(M, OC, device=dev, dtype=a.dtype) for k, (a, _) in ops.items()}
        for rnd in range(2):
            for k, (a, b) in ops.items():
                us, mhz, watts = sampled(lambda a=a, b=b, y=outs[k]: torch.mm(a, b, out=y))
                rows.append(dict(M=M, IC=IC, OC=OC, operands=k, round=rnd, us=us, sm_mhz=mhz, watts=watts))
                print(f"{M}x{IC}x{OC} {k:>15} round {rnd}: {us:8.1f} us  {mhz:6.0f} MHz  {watts:5.0f} W", flush=True)
        del ops, outs
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
