"""Where the fused kernel (ops.fused, M <= 256) and the dense-weight path (ops.linear.linear_unfused:
the weight built once per call, then the vendor GEMM) cross over, per shape, K and activation dtype:
microseconds per call of each at M rows, their ratio, and dense bf16 at the same M (``--gemm``:
also the coded wgmma GEMM of ops.gemm, sm_90). ops.linear routes M <= kernels.fused.ROUTE_MAX_M
(fused_handles) to the fused kernel; this says where that bound belongs.
One CUDA graph of calls over distinct layers per case, as bench_linear.py times.

    python benchmarks/bench_crossover.py --ms 32,64,128,192,256 --out crossover.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.ops.fused import MAX_M, fused_linear  # noqa: E402
from escha_jit.ops.linear import linear_unfused  # noqa: E402
from bench_linear import bench_dense, n_copies, parse_shapes, random_layers, run_meta, time_graph  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="crossover.json")
    ap.add_argument("--shapes", default=None, help="e.g. 4096x4096,8192x28672 (default: bench_linear's four)")
    ap.add_argument("--ms", default="32,64,128,192,256")
    ap.add_argument("--ks", default="2,4")
    ap.add_argument("--codebooks", default="mcg")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--gemm", action="store_true", help="also time the coded GEMM (ops.gemm, sm_90)")
    args = ap.parse_args(argv)
    if args.gemm:
        from escha_jit.ops.gemm import coded_gemm
    dev = torch.device("cuda")
    shapes = parse_shapes(args.shapes)
    ms = [int(m) for m in args.ms.split(",")]
    rows = []
    print(f"{'shape':>12} {'K':>3} {'cb':>4} {'dt':>4} {'M':>4} {'fused us':>9} {'dense us':>9} "
          f"{'fused/dense':>11} {'bf16 us':>8}" + (f" {'gemm us':>8} {'gemm/dense':>10}" if args.gemm else ""))
    for IC, OC in shapes:
        bf16 = {M: bench_dense(IC, OC, M, dev, n_copies(2 * IC * OC)) for M in ms}
        for K in (float(k) for k in args.ks.split(",")):
            for cb in args.codebooks.split(","):
                layers = random_layers(IC, OC, K, cb, n_copies(IC * OC * K // 8), dev)
                for dt in args.dtypes.split(","):
                    for M in ms:
                        x = torch.randn(M, IC, device=dev).to(DTYPES[dt])
                        ys = [torch.empty(M, OC, device=dev, dtype=DTYPES[dt]) for _ in layers]
                        t_f = (time_graph([lambda w=w, y=y: fused_linear(x, w, out=y) for w, y in zip(layers, ys)])
                               if M <= MAX_M else float("nan"))              # the fused kernel's bound
                        t_d = time_graph([lambda w=w, y=y: linear_unfused(x, w, out=y) for w, y in zip(layers, ys)],
                                         replays=10)
                        row = dict(IC=IC, OC=OC, K=K, codebook=cb, dtype=dt, M=M, fused_us=t_f, dense_us=t_d,
                                   bf16_us=bf16[M])
                        extra = ""
                        if args.gemm:
                            row["gemm_us"] = t_g = time_graph(
                                [lambda w=w, y=y: coded_gemm(x, w, out=y) for w, y in zip(layers, ys)], replays=10)
                            extra = f" {t_g:>8.1f} {t_g / t_d:>10.3f}"
                        rows.append(row)
                        print(f"{IC:>5}x{OC:<6} {K:>3g} {cb:>4} {dt:>4} {M:>4} {t_f:>9.1f} {t_d:>9.1f} "
                              f"{t_f / t_d:>11.3f} {bf16[M]:>8.1f}" + extra, flush=True)
                del layers
                torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
