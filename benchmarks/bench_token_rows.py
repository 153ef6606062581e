"""Does a decode call's time depend on what its token rows hold? (NVIDIA; issue 4's M = 4 gap.)

The tuned M = 4 entries of the large shapes run the same kernel as M = 1 (same config, same main
loop: the swapped route computes 8 token columns either way) yet take 5-15 % longer. This times,
per problem, the M = 4 plan's kernel with four different x (random rows; row 0 random and rows 1-3
zero; row 0 copied into all four rows; all rows zero) and the M = 1 plan with one random row, each
as a CUDA graph over distinct weights (PERF.md method), interleaved for ``--rounds`` rounds. If the
zero rows run at M = 1's speed and the copied rows do not, the difference is the data the matrix
unit multiplies (power and clocks), not instructions.

    python benchmarks/bench_token_rows.py --problems 8192x28672:3:mul1,4096x14336:3:mul1 --out rows.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.measure import Problem, copies_for, random_weights, time_chain  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.trellis import tile_words  # noqa: E402

VARIANTS = ("M4 random", "M4 rows 1-3 zero", "M4 row 0 copied", "M4 zeros", "M1 random")


def inputs(M4: int, IC: int, dev) -> dict:
    g = torch.Generator(device=dev).manual_seed(1)
    r = torch.randn(M4, IC, device=dev, dtype=torch.float16, generator=g)
    zero_rest = r.clone()
    zero_rest[1:] = 0
    return {"M4 random": r, "M4 rows 1-3 zero": zero_rest, "M4 row 0 copied": r[:1].expand(M4, IC).contiguous(),
            "M4 zeros": torch.zeros_like(r), "M1 random": r[:1].contiguous()}


def run_problem(spec: str, dev, rounds: int, repeats: int) -> dict:
    shape, K, cb = spec.split(":")
    IC, OC = (int(s) for s in shape.split("x"))
    K = float(K)
    ws = random_weights(Problem(IC, OC, K, cb, 4), copies_for(IC * OC // 256 * tile_words(K) * 2), dev)
    xs = inputs(4, IC, dev)
    plans = {v: F.plan_for(dev, K, cb, IC, OC, "f16", "f16", xs[v].shape[0]) for v in VARIANTS}
    outs = {v: torch.empty(xs[v].shape[0], OC, device=dev, dtype=torch.float16) for v in VARIANTS}
    times = {v: [] for v in VARIANTS}
    spans = {v: [] for v in VARIANTS}          # wall-clock (unix s) of each timing: to match a clock log
    for _ in range(rounds):
        for v in VARIANTS:
            p, x, o = plans[v], xs[v], outs[v]
            calls = [lambda w=w: F.fused_linear(x, w, out=o, cfg=p.cfg, launch=p.launch) for w in ws]
            t0 = time.time()
            times[v].append(time_chain(calls, repeats) * 1e6)
            spans[v].append((t0, time.time()))
    res = {"problem": spec, "plans": {v: f"{plans[v].cfg} S={plans[v].launch.splits}" for v in VARIANTS},
           "us": {v: statistics.median(t) for v, t in times.items()}, "rounds": times, "spans": spans}
    base = res["us"]["M1 random"]
    print(f"== {spec}  (M = 4 plan: {res['plans']['M4 random']}; M = 1 plan: {res['plans']['M1 random']})", flush=True)
    for v in VARIANTS:
        print(f"   {v:<18} {res['us'][v]:8.2f} us   x{res['us'][v] / base:.3f} of M1 random", flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", default="8192x28672:3:mul1,8192x28672:2:mcg,4096x14336:3:mul1,4096x4096:2:mul1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default="token_rows.json")
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    out = {"gpu": torch.cuda.get_device_name(dev), "results": [run_problem(s, dev, a.rounds, a.repeats)
                                                               for s in a.problems.split(",")]}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
