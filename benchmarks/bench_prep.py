"""Time of the prep kernel alone (templates/prep.hip.j2: x -> the rotated fp16 A operand of the
fused kernel's xh = 1 calls), per call of a CUDA-graph chain of prep launches (PERF.md method), by
rows M and input features IC: how much of an xh = 1 decode call is the prep grid's own run. With
each launch plain and as a programmatic dependent (as in fused calls), per number of blocks a row is
split over (``--segments``: ``auto`` = kernels.prep.segments, 1 = one block per row). Prints a
table, writes JSON.

    python benchmarks/bench_prep.py --ms 1,4,16 --ics 4096,8192,14336 --segments 1,auto --out prep.json
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
    ap.add_argument("--calls", type=int, default=20, help="launches per graph")
    ap.add_argument("--out", default="bench_prep.json")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    kernel = F.prep_kernel(dev, "f16")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    segs = [None if v == "auto" else int(v) for v in args.segments.split(",")]
    print(f"{'M':>4} {'IC':>6} {'P':>4} {'us/call plain':>14} {'us/call pdl':>12}")
    for IC in (int(v) for v in args.ics.split(",")):
        w = random_weights(Problem(IC, 128, 2.0, "mcg", 1), 1, dev)[0]
        for M in (int(v) for v in args.ms.split(",")):
            x = torch.randn(M, IC, device=dev, dtype=torch.float16)
            xh, xh_exp = F.scratch.xh(dev, M, IC)
            for seg in segs:
                P = prep.segments(M, IC, sms, seg)[0]
                us = {}
                for pdl in (False, True):
                    # the stream is read per call: graph capture runs on a stream of its own
                    calls = [lambda p=pdl, s=seg: F.run_prep(kernel, x, w, xh, xh_exp,
                                                             torch.cuda.current_stream(dev).cuda_stream,
                                                             pdl=p, segments=s)] * args.calls
                    us["pdl" if pdl else "plain"] = time_chain(calls, 20) * 1e6
                print(f"{M:>4} {IC:>6} {P:>4} {us['plain']:>14.2f} {us['pdl']:>12.2f}", flush=True)
                rows.append(dict(M=M, IC=IC, segments=P, auto=seg is None, us_plain=us["plain"], us_pdl=us["pdl"]))
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
