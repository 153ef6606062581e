"""The dense-weight kernel alone (templates/dense.hip.j2: trellis -> W = diag(s_in*rin) Hb What Hb
diag(rout*s_out) in fp16 / bf16, what the prefill path builds once per call): microseconds per
build, weights/s, and the bytes it moves as GB/s (the codes read, W written), per shape, K,
codebook and output dtype. One CUDA graph of builds over distinct layers (more code than L2),
median of its replays, as bench_linear.py times.

    python benchmarks/bench_dense_weight.py --out dense_weight.json
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
from escha_jit.trellis import tile_words  # noqa: E402
from bench_linear import n_copies, parse_shapes, random_layers, run_meta, time_graph  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def bench_one(IC: int, OC: int, K: float, cb: str, dt: str, dev) -> dict:
    code_bytes = IC * OC // 256 * tile_words(K) * 2
    n = max(4, min(16, n_copies(code_bytes)))
    layers = random_layers(IC, OC, K, cb, n, dev)
    outs = [torch.empty(IC, OC, dtype=DTYPES[dt], device=dev)]       # one W, reused as the prefill path would
    us = time_graph([lambda w=w: dense_weight(w, DTYPES[dt], out=outs[0]) for w in layers])
    weights = IC * OC
    return dict(IC=IC, OC=OC, K=K, codebook=cb, dtype=dt, us=us, weights_per_s=weights / us * 1e6,
                gb_s=(code_bytes + 2 * weights) / us / 1e3)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="dense_weight.json")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x4096,8192x28672 (default: bench_linear's four)")
    ap.add_argument("--ks", default="2,3,4")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--dtypes", default="f16")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    shapes = parse_shapes(args.shapes)
    rows = []
    print(f"{'shape':>12} {'K':>4} {'cb':>5} {'dtype':>5} {'us':>9} {'Gweights/s':>11} {'GB/s':>7}")
    for IC, OC in shapes:
        for K in (float(k) for k in args.ks.split(",")):
            for cb in args.codebooks.split(","):
                for dt in args.dtypes.split(","):
                    r = bench_one(IC, OC, K, cb, dt, dev)
                    rows.append(r)
                    print(f"{IC}x{OC:<7} {K:>4g} {cb:>5} {dt:>5} {r['us']:>9.1f} "
                          f"{r['weights_per_s'] / 1e9:>11.1f} {r['gb_s']:>7.0f}", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
