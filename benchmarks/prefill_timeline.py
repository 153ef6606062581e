"""The GPU timeline of the dense-weight prefill path (ops.linear.linear_unfused), per kernel: how
long each of a call's kernels runs and how long the GPU sits between them.

For each shape, M and activation dtype `--calls` calls are captured into one CUDA graph (as
bench_linear.py times them; no CPU launch gaps), and one replay of it runs under torch.profiler. Per kernel of the call (in order: e.g. the fill of the max |W| slot, the
dense weight, the row scaling of x, the GEMM, the output pass) it prints the median duration and
the median gap before it, and the call's median span; the JSON holds the same.

    python benchmarks/prefill_timeline.py --out prefill_timeline.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from escha_jit.ops.linear import linear_unfused  # noqa: E402
from bench_linear import SHAPES, capture_graph, parse_shapes, random_layers, run_meta  # noqa: E402


def kernel_events(prof) -> list:
    """GPU kernel / memset / memcpy activities, in start order (name, start us, end us)."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            out.append((e.name, e.time_range.start, e.time_range.end))
    out.sort(key=lambda t: t[1])
    return out


def timeline(fn, calls: int) -> dict:
    g = capture_graph([fn] * calls)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        g.replay()
        torch.cuda.synchronize()
    ev = kernel_events(prof)
    if not ev or len(ev) % calls:
        return {"error": f"{len(ev)} GPU activities for {calls} calls"}
    per = len(ev) // calls
    parts = []
    for i in range(per):
        durs = [ev[c * per + i][2] - ev[c * per + i][1] for c in range(calls)]
        gaps = [ev[c * per + i][1] - ev[c * per + i - 1][2] for c in range(calls) if c * per + i > 0]
        parts.append(dict(name=ev[i][0][:90], us=statistics.median(durs), gap_before_us=statistics.median(gaps)))
    spans = [ev[c * per + per - 1][2] - ev[c * per][1] for c in range(calls)]
    return dict(parts=parts, call_span_us=statistics.median(spans))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="prefill_timeline.json")
    ap.add_argument("--shapes", type=parse_shapes, default=SHAPES)
    ap.add_argument("--ms", default="1024,4096")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--K", type=float, default=2.0)
    ap.add_argument("--codebook", default="mcg")
    ap.add_argument("--calls", type=int, default=10)
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    dts = {"f16": torch.float16, "bf16": torch.bfloat16}
    rows = []
    for IC, OC in args.shapes:
        w = random_layers(IC, OC, args.K, args.codebook, 1, dev)[0]
        for M in [int(m) for m in args.ms.split(",") if m]:
            for dn in args.dtypes.split(","):
                x = torch.randn(M, IC, device=dev).to(dts[dn])
                y = torch.empty(M, OC, device=dev, dtype=dts[dn])
                r = timeline(lambda: linear_unfused(x, w, out=y), args.calls)
                rows.append(dict(IC=IC, OC=OC, M=M, dtype=dn, K=args.K, codebook=args.codebook, **r))
                if "error" in r:
                    print(f"{IC}x{OC} M={M} {dn}: {r['error']}", flush=True)
                    continue
                print(f"{IC:>5}x{OC:<5} M={M:<5} {dn:4} span {r['call_span_us']:8.1f} us: " + " | ".join(
                    f"+{p['gap_before_us']:.1f} {p['name'][:28]} {p['us']:.1f}" for p in r["parts"]), flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(meta=run_meta(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
