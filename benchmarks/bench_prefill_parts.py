"""Where the prefill path's time goes, per shape (one CUDA graph of 8 calls, median of 10 replays:
GPU time without Python launch overhead): the dense-weight kernel alone (`dense`, weights/s); the
prep kernel (`prep_*`: x rotated to fp16, as the coded GEMM and the fused kernel's XH mode take
it) and the row-scaling kernels (`rowscale_in_bf16`: bf16 x to fp16 under the weight's bound;
`rowscale_out_f16_bf16`: the fp16 GEMM output back to bf16), the dense weight with max |W|
(`dense_amax`); the GEMMs alone - fp16 and bf16 with the
weight [IC, OC] row-major (`nn`, what the prefill path and the bf16 baseline run) and [OC, IC]
row-major used transposed (`nt`, nn.Linear's layout), fp16 with an fp32 output (`f32out`); and
the whole linear (fp16 and bf16 activations). Large GEMMs run at the board's power limit, so
their times move by several percent between runs (benchmarks/bench_gemm_entropy.py).

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
from escha_jit.kernels import rowscale  # noqa: E402
from escha_jit.ops.common import arch_of, kernel_for  # noqa: E402
from escha_jit.ops.dense import dense_weight  # noqa: E402
from escha_jit.ops.fused import prep_kernel, run_prep  # noqa: E402
from escha_jit.ops.linear import _mm_f32, linear_unfused  # noqa: E402
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
    pk16, pkb = prep_kernel(dev, "f16"), prep_kernel(dev, "bf16")
    rs_spec = rowscale.spec_in(arch_of(dev), "bf16")
    rs = kernel_for(rs_spec, dev, rowscale.ARGS_IN, rowscale.render_extra(rs_spec))
    ro_spec = rowscale.spec_out(arch_of(dev), "bf16", "f16")
    ro = kernel_for(ro_spec, dev, rowscale.ARGS_OUT, rowscale.render_extra(ro_spec))

    def stream() -> int:                          # the capturing stream, at capture time
        return torch.cuda.current_stream(dev).cuda_stream
    for IC, OC in SHAPES:
        w = random_layers(IC, OC, args.K, args.codebook, 1, dev)[0]
        W = torch.empty(IC, OC, dtype=torch.float16, device=dev)
        us_d = timed(lambda: dense_weight(w, torch.float16, out=W))
        amax = torch.zeros(1, dtype=torch.int32, device=dev)
        us_da = timed(lambda: dense_weight(w, torch.float16, out=W, amax=amax))
        Wt = W.t().contiguous()
        Wb, Wbt = W.bfloat16(), Wt.bfloat16()
        for M in [int(m) for m in args.ms.split(",")]:
            x = torch.randn(M, IC, device=dev).half()
            xb = x.bfloat16()
            y = torch.empty(M, OC, device=dev, dtype=torch.float16)
            yb = torch.empty(M, OC, device=dev, dtype=torch.bfloat16)
            xh = torch.empty(M, IC, device=dev, dtype=torch.float16)
            ex = torch.empty(M, device=dev, dtype=torch.int32)
            t = dict(
                dense_us=us_d,
                dense_amax_us=us_da,
                prep_f16_us=timed(lambda: run_prep(pk16, x, w, xh, ex, stream())),
                prep_bf16_us=timed(lambda: run_prep(pkb, xb, w, xh, ex, stream())),
                rowscale_in_bf16_us=timed(lambda: rs.launch((M,), (rowscale.THREADS,),
                                                            (xb, xb.stride(0), xh, xh.stride(0), ex, IC, amax),
                                                            stream=stream())),
                rowscale_out_f16_bf16_us=timed(lambda: ro.launch((M,), (rowscale.THREADS,),
                                                                 (y, y.stride(0), yb, yb.stride(0), ex, None, OC),
                                                                 stream=stream())),
                gemm_f16_nn_us=timed(lambda: torch.mm(x, W, out=y)),
                gemm_f16_nt_us=timed(lambda: torch.mm(x, Wt.t(), out=y)),
                gemm_bf16_nn_us=timed(lambda: torch.mm(xb, Wb, out=yb)),
                gemm_bf16_nt_us=timed(lambda: torch.mm(xb, Wbt.t(), out=yb)),
                gemm_f16_f32out_us=timed(lambda: _mm_f32(x, W)),
                linear_f16_us=timed(lambda: linear_unfused(x, w, out=y)),
                linear_bf16_us=timed(lambda: linear_unfused(xb, w, out=yb)))
            row = dict(IC=IC, OC=OC, K=args.K, codebook=args.codebook, M=M, **t,
                       dense_weights_per_s=IC * OC / us_d * 1e6)
            rows.append(row)
            print(f"{IC:>5}x{OC:<5} M={M:<5} " + " ".join(f"{k[:-3]}={v:.1f}" for k, v in t.items()), flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
