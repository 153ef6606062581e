"""Where one fused call spends its time, per phase, from in-kernel timestamps (NVIDIA).

Builds the dispatched configuration of each problem with ``diag=4`` (include/escha/fused.h: every
block records %globaltimer at its start, after the grid-dependency wait, when its A operand is
ready, after its main loop, after its partial / output write, after the split-K counter, and - the
last block of a column group - after the output), replays a CUDA graph of calls over distinct
weights (PERF.md method) and reads the last call's timestamps back. Prints, per problem, the
phase durations over blocks (median and max, us) and the kernel's span; writes JSON.

    python benchmarks/trace_fused.py --problems 4096x4096:2:mcg:1,4096x4096:2:mcg:16 --out trace.json
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.measure import Problem, copies_for, random_weights, time_chain  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.ops.common import DTYPE_NAMES  # noqa: E402
from escha_jit.trellis import tile_words  # noqa: E402

POINTS = ("start", "dep_wait", "a_ready", "main_done", "written", "counter", "last_done")
PHASES = (("wait for previous kernel", 0, 1), ("A operand (prologue / xh copy)", 1, 2), ("main loop", 2, 3),
          ("epilogue: stage + write", 3, 4), ("fence + counter", 4, 5), ("last block: reduce + y", 5, 6))


def read_trace(kernel, blocks: int) -> list[list[int]]:
    from cuda.bindings import driver as d
    err, mod = d.cuFuncGetModule(kernel.handle)
    assert int(err) == 0, err
    err, ptr, size = d.cuModuleGetGlobal(mod, b"escha_trace")
    assert int(err) == 0, err
    buf = torch.zeros(size // 8, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    err, = d.cuMemcpyDtoD(buf.data_ptr(), ptr, size)
    assert int(err) == 0, err
    v = buf.cpu().tolist()
    return [v[b * 8:b * 8 + 7] for b in range(blocks)]


def trace_problem(spec: str, dev: torch.device, repeats: int) -> dict:
    shape, K, cb, M = spec.split(":")
    IC, OC = (int(s) for s in shape.split("x"))
    K, M = float(K), int(M)
    p = Problem(IC, OC, K, cb, M)
    ws = random_weights(p, copies_for(IC * OC // 256 * tile_words(K) * 2), dev)
    x = torch.randn(M, IC, device=dev, dtype=torch.float16)
    out = torch.empty(M, OC, device=dev, dtype=torch.float16)
    plan = F.plan_for(dev, K, cb, IC, OC, "f16", "f16", M)
    cfg = dataclasses.replace(plan.cfg, diag=4)
    us = time_chain([lambda w=w: F.fused_linear(x, w, out=out, cfg=cfg, launch=plan.launch) for w in ws], repeats) * 1e6
    traced = F.plan_for(dev, K, cb, IC, OC, DTYPE_NAMES[x.dtype], "f16", M, cfg, plan.launch)
    blocks = (OC // 128) * plan.launch.splits
    tr = read_trace(traced.kernel, blocks)
    t0 = min(b[0] for b in tr)
    res = {"problem": spec, "config": str(plan.cfg), "splits": plan.launch.splits, "blocks": blocks,
           "us_per_call": us, "phases": {}}
    ends = [b[6] if b[6] > b[5] > 0 else b[4] for b in tr]
    res["span_us"] = (max(ends) - t0) / 1e3
    res["start_spread_us"] = (max(b[0] for b in tr) - t0) / 1e3
    print(f"== {spec}: {plan.cfg} S={plan.launch.splits}, {blocks} blocks, {us:.2f} us/call in the chain; "
          f"last call's span {res['span_us']:.2f} us, block starts spread {res['start_spread_us']:.2f} us", flush=True)
    for name, a, b in PHASES:
        d = [(t[b] - t[a]) / 1e3 for t in tr if t[b] > 0 and t[a] > 0 and t[b] >= t[a]]
        if not d:
            continue
        res["phases"][name] = {"median_us": statistics.median(d), "max_us": max(d), "blocks": len(d)}
        print(f"   {name:<32} median {statistics.median(d):7.2f} us   max {max(d):7.2f} us   ({len(d)} blocks)",
              flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="4096x4096:2:mcg:1,4096x4096:2:mcg:16,14336x4096:2:mul1:16")
    ap.add_argument("--out", default="trace.json")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    rows = [trace_problem(s, dev, args.repeats) for s in args.problems.split(",")]
    with open(args.out, "w") as f:
        json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), gpu=torch.cuda.get_device_name(), rows=rows), f,
                  indent=1)


if __name__ == "__main__":
    main()
