"""Where the prefill path's time goes: the dense-weight kernel alone (weights/s, GB/s written), the
fp16 GEMM alone, and the whole linear, per shape (one CUDA graph of 8 calls, median of 10 replays:
GPU time without Python launch overhead).

    python benchmarks/bench_prefill_parts.py --out prefill_parts.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.ops.dense import dense_weight  # noqa: E402
from escha_jit.ops.linear import linear_unfused  # noqa: E402
from bench_linear import SHAPES, random_layers, run_meta, time_graph  # noqa: E402


def timed(fn, calls: int = 8) -> float:
    return time_graph([fn] * calls, replays=10)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="prefill_parts.json")
    ap.add_argument("--ms", default="1024,4096")
    ap.add_argument("--K", type=float, default=2.0)
    ap.add_argument("--codebook", default="mcg")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    rows = []
    print(f"{'shape':>11} {'dense us':>9} {'Gw/s':>6} {'GB/s':>6} | {'M':>5} {'gemm us':>8} {'bf16 us':>8} {'linear us':>9}")
    for IC, OC in SHAPES:
        w = random_layers(IC, OC, args.K, args.codebook, 1, dev)[0]
        W = torch.empty(IC, OC, dtype=torch.float16, device=dev)
        us_d = timed(lambda: dense_weight(w, torch.float16, out=W))
        for M in [int(m) for m in args.ms.split(",")]:
            x = torch.randn(M, IC, device=dev).half()
            xb = x.bfloat16()
            Wb = W.bfloat16()
            y = torch.empty(M, OC, device=dev, dtype=torch.float16)
            us_g = timed(lambda: torch.mm(x, W, out=y))
            us_b = timed(lambda: torch.mm(xb, Wb))
            us_l = timed(lambda: linear_unfused(x, w, out=y))
            row = dict(IC=IC, OC=OC, K=args.K, codebook=args.codebook, M=M, dense_us=us_d, gemm_f16_us=us_g,
                       bf16_us=us_b, linear_us=us_l, dense_weights_per_s=IC * OC / us_d * 1e6,
                       dense_write_gb_s=2 * IC * OC / us_d / 1e3)
            rows.append(row)
            print(f"{IC:>5}x{OC:<5} {us_d:>9.1f} {row['dense_weights_per_s'] / 1e9:>6.0f} {row['dense_write_gb_s']:>6.0f} | "
                  f"{M:>5} {us_g:>8.1f} {us_b:>8.1f} {us_l:>9.1f}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
