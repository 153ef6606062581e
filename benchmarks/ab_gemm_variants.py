"""Interleaved A/B of the coded GEMM's tile variants (kernels.gemm.spec_for parameters, e.g. share=2)
in one process: per cell, ROUNDS rounds of every variant (order reversed every other round), each the
median us per call of one CUDA graph of 8 calls over 4 distinct layers (prep + GEMM); prints each
variant's median against the first's and the geomeans, writes JSON.

    python benchmarks/ab_gemm_variants.py --variants ";share=2;share=4" --out ab_gemm.json
    python benchmarks/ab_gemm_variants.py --variants ";diag=1;share=2;share=2,diag=1"   # diag 1: no decode, 2: no wgmma
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gemm_parts import launcher, tile_args  # noqa: E402
from bench_linear import random_layers, run_meta, time_graph  # noqa: E402


geomean = statistics.geometric_mean


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=";share=2;share=4", help="';'-separated tile variants, the first the baseline ('' = shipped)")
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096,8192x28672")
    ap.add_argument("--Ks", default="2,4")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--ms", default="1024,4096")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="ab_gemm_variants.json")
    args = ap.parse_args(argv)
    variants = args.variants.split(";")
    ms = [int(m) for m in args.ms.split(",")]
    dev = torch.device("cuda")
    rows = []
    for shape in args.shapes.split(","):
        IC, OC = (int(v) for v in shape.split("x"))
        for K in (float(k) for k in args.Ks.split(",")):
            for cb in args.codebooks.split(","):
                layers = random_layers(IC, OC, K, cb, 4, dev)
                for M in ms:
                    x = torch.randn(M, IC, device=dev).half()
                    y = torch.empty(M, OC, device=dev, dtype=torch.float16)
                    t = {v: [] for v in variants}
                    for r in range(args.rounds):
                        for v in (variants if r % 2 == 0 else variants[::-1]):
                            tile = tile_args(v)        # diag=1 / 2: without the decode / the wgmma
                            t[v].append(time_graph([launcher(x, w, y, tile.pop("diag", 0), False, **tile)
                                                    for w in layers] * 2, replays=5))
                    med = {v: statistics.median(ts) for v, ts in t.items()}
                    base = med[variants[0]]
                    rows.append(dict(IC=IC, OC=OC, K=K, codebook=cb, M=M, us=t, median=med))
                    print(f"{IC}x{OC} K{K:g} {cb:>5} M={M:<5} [{variants[0] or 'shipped'}] {base:8.1f}  " +
                          "  ".join(f"[{v}] {med[v]:8.1f} ({med[v] / base:.3f})" for v in variants[1:]), flush=True)
    summary = {}
    for v in variants[1:]:
        for M in ms + [None]:
            rs = [r["median"][v] / r["median"][variants[0]] for r in rows if M is None or r["M"] == M]
            summary[f"{v} M={M or 'all'}"] = dict(geomean=geomean(rs), min=min(rs), max=max(rs), cells=len(rs))
            print(f"[{v}] M={M or 'all'}: geomean {geomean(rs):.4f} over {len(rs)} cells, min {min(rs):.3f} max {max(rs):.3f}")
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), variants=variants, rounds=args.rounds, rows=rows, summary=summary), f, indent=1)


if __name__ == "__main__":
    main()
