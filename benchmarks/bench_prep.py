"""Time of the prep kernel alone (templates/prep.hip.j2: x -> the rotated fp16 A operand of the
fused kernel's xh = 1 calls), per call of a CUDA-graph chain of prep launches (PERF.md method), by
rows M and input features IC: how much of an xh = 1 decode call is the prep grid's own run. With
each launch plain and as a programmatic dependent (as in fused calls), per number of blocks a row is
split over (``--segments``: ``auto`` = kernels.prep.segments, 1 = one block per row), per kernel
(``--kernels``: ``lane`` = one 128-block per wave, the fused calls' and the coded GEMM's up to
MANY_ROWS rows; ``groups`` = 8 blocks per wave, the coded GEMM's above, M > MANY_ROWS only). Prints
a table, writes JSON; ``--dtype`` the activations'.

    python benchmarks/bench_prep.py --ms 1,4,16 --ics 4096,8192,14336 --segments 1,auto --out prep.json
    python benchmarks/bench_prep.py --ms 1024,4096 --ics 4096,14336 --segments 1 --kernels lane,groups
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.bench_linear import run_meta  # noqa: E402
from escha_jit.autotune.measure import Problem, random_weights, time_chain  # noqa: E402
from escha_jit.kernels import prep  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--ics", default="4096,8192,14336")
    ap.add_argument("--segments", default="1,auto", help="blocks per row: numbers or 'auto'")
    ap.add_argument("--kernels", default="lane", help="lane, groups (M > MANY_ROWS)")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16", "f32"])
    ap.add_argument("--calls", type=int, default=20, help="launches per graph")
    ap.add_argument("--out", default="bench_prep.json")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    kernels = {k: F.prep_kernel(dev, args.dtype, groups=k == "groups") for k in args.kernels.split(",")}
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    segs = [None if v == "auto" else int(v) for v in args.segments.split(",")]
    print(f"{'kernel':>7} {'M':>5} {'IC':>6} {'P':>4} {'us/call plain':>14} {'us/call pdl':>12} {'GB/s plain':>11}")
    for IC in (int(v) for v in args.ics.split(",")):
        w = random_weights(Problem(IC, 128, 2.0, "mcg", 1), 1, dev)[0]
        for M in (int(v) for v in args.ms.split(",")):
            x = torch.randn(M, IC, device=dev, dtype=tdt)
            xh, xh_exp = F.scratch.xh(dev, M, IC)
            for name, kernel in kernels.items():
                if name == "groups" and M <= prep.MANY_ROWS:
                    continue
                for seg in segs:
                    P = prep.segments(M, IC, sms, seg)[0]
                    us = {}
                    for pdl in (False, True):
                        # the stream is read per call: graph capture runs on a stream of its own
                        calls = [lambda p=pdl, s=seg, k=kernel: F.run_prep(k, x, w, xh, xh_exp,
                                                                           torch.cuda.current_stream(dev).cuda_stream,
                                                                           pdl=p, segments=s)] * args.calls
                        us["pdl" if pdl else "plain"] = time_chain(calls, 20) * 1e6
                    gbs = M * IC * (x.element_size() + 2) / us["plain"] / 1e3      # x read, xh written
                    print(f"{name:>7} {M:>5} {IC:>6} {P:>4} {us['plain']:>14.2f} {us['pdl']:>12.2f} {gbs:>11.0f}",
                          flush=True)
                    rows.append(dict(kernel=name, dtype=args.dtype, M=M, IC=IC, segments=P, auto=seg is None,
                                     us_plain=us["plain"], us_pdl=us["pdl"], gb_s_plain=gbs))
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
