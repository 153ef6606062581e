"""Where the coded GEMM's time goes (ops/gemm.py, templates/gemm.hip.j2): the whole call (prep +
GEMM), the prep kernel alone, the GEMM without its trellis decode (diag=1: A = raw words) and
without its wgmma (diag=2), against dense bf16 cuBLAS and the dense-weight path (one CUDA graph of
8 calls over distinct layers, median of replays).

    python benchmarks/bench_gemm_parts.py --out gemm_parts.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.kernels import gemm, prep  # noqa: E402
from escha_jit.ops.common import DTYPE_NAMES, arch_of, kernel_for  # noqa: E402
from escha_jit.ops.fused import prep_kernel, run_prep, scratch  # noqa: E402
from escha_jit.ops.gemm import run_gemm  # noqa: E402
from escha_jit.ops.linear import linear_unfused  # noqa: E402
from bench_linear import random_layers, run_meta, time_graph  # noqa: E402


def tile_args(variant: str) -> dict:
    """A variant's tile parameters, "share=2,stages=3" -> {"share": 2, "stages": 3} ("" -> {})."""
    return {k: int(v) for k, v in (kv.split("=") for kv in variant.split(",") if kv)}


def launcher(x, w, y, diag: int, prep_only: bool = False, **tile):
    dev = x.device
    arch = arch_of(dev)
    try:                    # as ops.gemm.coded_gemm: the groups prep kernel over many rows
        pk = prep_kernel(dev, DTYPE_NAMES[x.dtype], groups=x.shape[0] > prep.MANY_ROWS)
    except TypeError:       # an A/B tree from before session 59 (scripts/ab_trees.sh): one prep kernel
        pk = prep_kernel(dev, DTYPE_NAMES[x.dtype])
    gs = gemm.variant(gemm.spec_for(arch, w.K, w.codebook, DTYPE_NAMES[y.dtype]), diag=diag, **tile)
    gk = kernel_for(gs, dev, gemm.ARGS, gemm.render_extra(gs))
    xh, xe = scratch.xh(dev, gemm.padded_rows(gs, x.shape[0]), w.IC)

    def call():
        s = torch.cuda.current_stream().cuda_stream
        run_prep(pk, x, w, xh, xe, s)
        if not prep_only:
            run_gemm(gk, gs, xh, xe, w, y, None, s)
    return call


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="gemm_parts.json")
    ap.add_argument("--shapes", default="4096x4096,8192x28672")
    ap.add_argument("--ms", default="1024,4096")
    ap.add_argument("--K", type=float, default=2.0)
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--variants", default="", help="extra GEMM tile variants, e.g. tokens=128,inflight=1;stages=4")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    rows = []
    cols = ["gemm", "prep", "no_decode", "no_wgmma", "dense_path", "bf16"]
    print(f"{'shape':>11} {'cb':>4} {'M':>5} " + " ".join(f"{c:>10}" for c in cols) + "  TFLOP/s")
    for shape in args.shapes.split(","):
        IC, OC = (int(v) for v in shape.split("x"))
        for cb in args.codebooks.split(","):
            layers = random_layers(IC, OC, args.K, cb, 4, dev)
            for M in [int(m) for m in args.ms.split(",")]:
                x = torch.randn(M, IC, device=dev).half()
                y = torch.empty(M, OC, device=dev, dtype=torch.float16)
                Wb = torch.randn(IC, OC, device=dev, dtype=torch.bfloat16)
                xb = x.bfloat16()
                t = {}
                for name, d, po in (("gemm", 0, False), ("prep", 0, True), ("no_decode", 1, False), ("no_wgmma", 2, False)):
                    t[name] = time_graph([launcher(x, w, y, d, po) for w in layers] * 2, replays=5)
                for v in [v for v in args.variants.split(";") if v]:
                    tile = tile_args(v)
                    d = tile.pop("diag", 0)
                    t[v] = time_graph([launcher(x, w, y, d, False, **tile) for w in layers] * 2, replays=5)
                t["dense_path"] = time_graph([lambda w=w: linear_unfused(x, w, out=y) for w in layers] * 2, replays=5)
                t["bf16"] = time_graph([lambda: torch.mm(xb, Wb)] * 8, replays=5)
                row = dict(IC=IC, OC=OC, K=args.K, codebook=cb, M=M, **{f"{k}_us": v for k, v in t.items()},
                           gemm_tflops=2 * M * IC * OC / t["gemm"] / 1e6)
                rows.append(row)
                print(f"{IC:>5}x{OC:<5} {cb:>4} {M:>5} " + " ".join(f"{t[c]:>10.1f}" for c in cols)
                      + f"  {row['gemm_tflops']:>7.0f}  " + " ".join(f"[{k}] {v:.1f}" for k, v in t.items() if k not in cols),
                      flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
