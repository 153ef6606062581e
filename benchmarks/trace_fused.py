"""Where one fused call spends its time, per phase, from in-kernel timestamps (NVIDIA).

Builds the dispatched configuration of each problem with ``diag=4`` (include/escha/fused.h: every
block records %globaltimer at its start, after the grid-dependency wait, when its A operand is
ready, after its main loop, after its partial / output write, after the split-K counter, and - the
last block of a column group - after the output), replays a CUDA graph of calls over distinct
weights (PERF.md method) and reads the last call's timestamps back, with each block's SM (%smid).
Prints, per problem, the phase durations over blocks (median and max, us), the kernel's span, and
how the main loops line up: their durations by how many blocks shared the SM while they ran, and
when the last one ended (after the dependency wait: the rest of the call waits for it); writes
JSON with every block's timestamps.

    python benchmarks/trace_fused.py --problems 4096x4096:2:mcg:1,4096x4096:2:mcg:16 --out trace.json

A problem may end in FusedConfig fields that replace the tuned plan's (``4096x14336:3:mul1:4:xh=0``;
``splits=N`` replaces the launch's split count).
"""
from __future__ import annotations

import argparse
import collections
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
    return [v[b * 8:b * 8 + 8] for b in range(blocks)]


def main_loop_lineup(tr: list[list[int]]) -> dict:
    """Main-loop durations (us) of blocks by how many blocks of the call shared their SM during it
    (overlapping A-ready .. main-done intervals, itself included), the main loops' end times after
    the earliest dependency-wait release (median, p90, last), and how many SMs ran how many blocks.
    ``tr``: per block the 8 trace slots (7 timestamps in ns, then the SM)."""
    loops = [(t[7], t[2], t[3]) for t in tr if t[3] > t[2] > 0]
    by_share: dict[int, list[float]] = {}
    for sm, a, b in loops:
        share = sum(1 for sm2, a2, b2 in loops if sm2 == sm and a2 < b and b2 > a)
        by_share.setdefault(share, []).append((b - a) / 1e3)
    t1 = min(t[1] for t in tr if t[1] > 0)
    ends = sorted((b - t1) / 1e3 for _, _, b in loops)
    per_sm = collections.Counter(sm for sm, _, _ in loops)
    return {"duration_us_by_sharing": {k: {"blocks": len(v), "median": statistics.median(v), "max": max(v)}
                                       for k, v in sorted(by_share.items())},
            "end_after_wait_us": {"median": statistics.median(ends), "p90": ends[int(0.9 * (len(ends) - 1))],
                                  "last": ends[-1]},
            "sms_used": len(per_sm), "blocks_per_sm": dict(sorted(collections.Counter(per_sm.values()).items()))}


def critical_path(tr: list[list[int]]) -> dict[str, float]:
    """When the call's last block reached each point, in us after the earliest dependency-wait release
    (the chain's critical path: the next call's wait releases once the last block has exited).
    Timestamps from before this call's first block started (a slot an earlier call left, e.g. the
    finishing point of a block that was not last this time) do not count."""
    t0 = min(t[0] for t in tr)
    t1 = min(t[1] for t in tr if t[1] >= t0)
    out = {}
    for i, name in enumerate(POINTS[1:], start=1):
        v = [t[i] for t in tr if t[i] >= t0]
        if v:
            out[name] = (max(v) - t1) / 1e3
    return out


def trace_problem(spec: str, dev: torch.device, repeats: int) -> dict:
    shape, K, cb, M, *fields = spec.split(":")
    # optional FusedConfig fields after the problem (e.g. 4096x14336:3:mul1:4:xh=0): the tuned
    # plan with those replaced; splits=N replaces the launch's split count
    fields = {k: int(v) for k, v in (f.split("=") for f in fields)}
    IC, OC = (int(s) for s in shape.split("x"))
    K, M = float(K), int(M)
    p = Problem(IC, OC, K, cb, M)
    ws = random_weights(p, copies_for(IC * OC // 256 * tile_words(K) * 2), dev)
    x = torch.randn(M, IC, device=dev, dtype=torch.float16)
    out = torch.empty(M, OC, device=dev, dtype=torch.float16)
    plan = F.plan_for(dev, K, cb, IC, OC, "f16", "f16", M)
    if fields:
        launch = dataclasses.replace(plan.launch, splits=fields.pop("splits", plan.launch.splits))
        plan = F.plan_for(dev, K, cb, IC, OC, "f16", "f16", M, dataclasses.replace(plan.cfg, **fields), launch)
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
    res["main_loops"] = lu = main_loop_lineup(tr)
    res["blocks_trace"] = tr
    share = ", ".join(f"{k} on the SM: {v['blocks']} blocks, median {v['median']:.2f} / max {v['max']:.2f} us"
                      for k, v in lu["duration_us_by_sharing"].items())
    e = lu["end_after_wait_us"]
    print(f"   main loops by blocks sharing the SM - {share}; they end {e['median']:.2f} (median) / "
          f"{e['p90']:.2f} (p90) / {e['last']:.2f} (last) us after the first wait release; "
          f"{lu['sms_used']} SMs, blocks per SM {lu['blocks_per_sm']}", flush=True)
    res["critical_path_us"] = cp = critical_path(tr)
    print("   last block at each point, us after the first wait release: "
          + ", ".join(f"{k} {v:.2f}" for k, v in cp.items()), flush=True)
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
                  separators=(",", ":"))         # compact: every block's timestamps


if __name__ == "__main__":
    main()
