"""Sweep the fused kernel's tile configurations and launch parameters on representative problems
(successive halving, graph-replay timing over distinct weight copies). Prints the best few per
problem next to the default heuristic and writes JSON.

    python benchmarks/sweep_fused.py --out sweep.json [--problems 4096x4096:2:mcg:1,...]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.offline import compile_all  # noqa: E402
from escha_jit.ops.common import arch_of  # noqa: E402
from escha_jit.autotune.api import heuristic_candidate  # noqa: E402
from escha_jit.autotune.candidates import Candidate, fused_candidates  # noqa: E402
from escha_jit.autotune.measure import FusedTimer, Problem  # noqa: E402
from escha_jit.autotune.search import successive_halving  # noqa: E402

DEFAULT = ("4096x4096:2:mcg:1,4096x4096:4:mul1:16,14336x4096:3:mcg:4,4096x14336:3:mul1:1,"
           "8192x28672:2:mcg:1,8192x28672:4:mul1:16")


def parse(spec: str) -> Problem:
    shape, K, cb, M = spec.split(":")
    IC, OC = (int(v) for v in shape.split("x"))
    return Problem(IC, OC, float(K), cb, int(M))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="sweep.json")
    ap.add_argument("--problems", default=DEFAULT)
    ap.add_argument("--budget", type=float, default=25.0, help="seconds per problem")
    ap.add_argument("--diag", action="store_true", help="also time the best config with one stage left out")
    ap.add_argument("--rows", default="", help="rows_per_stage values to sweep (default: the tuner's)")
    ap.add_argument("--stages", default="", help="pipeline depths to sweep (default: the tuner's)")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    arch = arch_of(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    probs = [parse(s) for s in args.problems.split(",")]
    plan = []
    all_specs = {}
    for p in probs:
        space = {k: tuple(int(v) for v in getattr(args, k).split(",")) for k in ("rows", "stages") if getattr(args, k)}
        cands = fused_candidates(arch, p.K, p.IC, p.OC, p.M, sms, **space)
        timer = FusedTimer(p, dev)
        all_specs.update(dict(timer.specs(cands)))
        plan.append((p, cands, timer))
    t0 = time.perf_counter()
    rows = compile_all(arch, specs=list(all_specs.items()), jobs=os.cpu_count())
    print(f"compiled {len(rows)} candidate specs in {time.perf_counter() - t0:.1f} s "
          f"({sum(1 for r in rows if not r.ok)} not ok)", flush=True)
    results = []
    for p, cands, timer in plan:
        d = heuristic_candidate(p, sms, arch)
        t_def = timer(d, 15)
        rep = successive_halving(cands, timer, budget_s=args.budget, describe=Candidate.key)
        w = p.IC * p.OC
        print(f"== {p}: {len(cands)} candidates, {rep.measured} timings, {len(rep.failed)} failed, "
              f"{rep.elapsed_s:.1f} s; default {d.key()} {t_def * 1e6:.2f} us ({w / t_def / 1e12:.2f} Tw/s)", flush=True)
        for r in rep.ranked[:6]:
            print(f"   {r.candidate.key():<40} {r.seconds * 1e6:8.2f} us  {w / r.seconds / 1e12:5.2f} Tw/s  "
                  f"(round {r.rounds})", flush=True)
        diag = {}
        if args.diag and rep.best is not None:                # leave one stage out of the winner
            best = rep.best.candidate
            for dg, name in ((1, "no decode"), (2, "no mma"), (3, "no x prologue")):
                c = Candidate(dataclasses.replace(best.cfg, diag=dg), best.launch)
                compile_all(arch, specs=timer.specs([c]), jobs=1)
                diag[name] = timer(c, 15) * 1e6
            print("   leave-one-out: " + ", ".join(f"{k} {v:.2f} us" for k, v in diag.items()), flush=True)
        results.append(dict(problem=str(p), default=d.key(), default_us=t_def * 1e6, leave_one_out_us=diag,
                            ranked=[dict(c=r.candidate.key(), us=r.seconds * 1e6, rounds=r.rounds) for r in rep.ranked[:20]],
                            failed=[(c.key(), e[:300]) for c, e in rep.failed[:10]]))
        del timer
        torch.cuda.empty_cache()
    with open(args.out, "w") as f:
        json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), gpu=torch.cuda.get_device_name(), results=results), f,
                  indent=1)


if __name__ == "__main__":
    main()
