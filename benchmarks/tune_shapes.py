"""Tune the PERF.md shapes (and the test checkpoints' shapes) on this GPU and write the table
that ships in tuning/<arch>.json, with a report of tuned vs heuristic per problem.

    python benchmarks/tune_shapes.py --out tuned.json [--buckets 1,4,16] [--budget 3]
    python benchmarks/tune_shapes.py --buckets 16 --onto tuning/sm_90.json --out tuned.json   # one bucket re-tuned
    python benchmarks/tune_shapes.py --buckets 16 --shapes 4096x14336 --onto tuning/sm_90.json   # one shape's
    python benchmarks/tune_shapes.py --buckets 1,4 --codebooks mcg --onto tuning/sm_90.json   # one codebook's
    python benchmarks/tune_shapes.py --buckets= --route-buckets all --onto tuning/sm_90.json   # routes only
    python benchmarks/tune_shapes.py --refine-only tuning/sm_90.json --steps split_cluster --out t.json   # one refine step
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.api import GRID_AXES, REFINE_STEPS, tune  # noqa: E402
from escha_jit.autotune.measure import Problem  # noqa: E402
from escha_jit.autotune.refine import refine  # noqa: E402
from escha_jit.autotune.shapes import LayerShape  # noqa: E402
from escha_jit.autotune.table import ROUTE_BUCKETS, TuningTable  # noqa: E402
from escha_jit.synth import DEFAULT_RATES, llama_config, projection_shapes  # noqa: E402

PERF_SHAPES = [(4096, 4096), (4096, 14336), (14336, 4096), (8192, 28672)]


def shapes(ks=(2.0, 3.0, 4.0), cbs=("mcg", "mul1")):
    out = [LayerShape(IC, OC, K, cb) for IC, OC in PERF_SHAPES for K in ks for cb in cbs]
    cfg = llama_config()                                   # the synth test checkpoints (tests, demo)
    for leaf, (_, fin, fout) in projection_shapes(cfg).items():
        K, cb = DEFAULT_RATES[leaf]
        s = LayerShape(-(-fin // 128) * 128, -(-fout // 128) * 128, K, cb)
        if s not in out:
            out.append(s)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tuned.json")
    ap.add_argument("--report", default="tune_report.json")
    ap.add_argument("--buckets", default="1,4,16")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--codebooks", default="", help="comma-separated codebooks, e.g. mcg: tune only these")
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--route-buckets", default="", help="route buckets to measure (which path serves M rows: "
                    "fused kernel, coded GEMM, dense weight), comma-separated or 'all' (default: none)")
    ap.add_argument("--shapes", default="", help="ICxOC list, e.g. 4096x14336,14336x4096: tune only these "
                    "(default: the PERF.md shapes and the test checkpoints')")
    ap.add_argument("--onto", default="", help="a table (e.g. the shipped tuning/sm_90.json) that --out is this "
                    "run's entries merged onto: re-tune some buckets, keep the rest")
    ap.add_argument("--refine-only", default="", metavar="TABLE",
                    help="search nothing: run tune()'s refine steps (escha_jit/autotune/refine.py) on TABLE's "
                         "entries of the selected problems, and write TABLE with the winners to --out")
    steps = [s[0] for s in REFINE_STEPS]
    ap.add_argument("--steps", default=",".join(steps), help=f"the refine steps --refine-only runs, in order "
                    f"(default: all, {','.join(steps)})")
    for axis in GRID_AXES:
        ap.add_argument(f"--{axis.replace('_', '-')}", default="",
                        help=f"comma-separated values of the search grid's {axis} axis (default: escha_jit's)")
    args = ap.parse_args(argv)
    grid = {a: [int(v) for v in getattr(args, a).split(",")] for a in GRID_AXES if getattr(args, a)}
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}
    todo = shapes()
    if args.shapes:
        wanted = {tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")}
        todo = [s for s in todo if (s.IC, s.OC) in wanted]
        if not todo:
            ap.error(f"--shapes {args.shapes}: none of these is among the tuned shapes "
                     f"{sorted({(s.IC, s.OC) for s in shapes()})}")
    if args.codebooks:
        todo = [s for s in todo if s.codebook in args.codebooks.split(",")]
        if not todo:
            ap.error(f"--codebooks {args.codebooks}: no tuned shape has these")
    t0 = time.perf_counter()
    if args.refine_only:
        unknown = set(args.steps.split(",")) - set(steps)
        if unknown:
            ap.error(f"--steps {args.steps}: unknown {sorted(unknown)}; the steps are {steps}")
        return refine_only(args, todo, [dt[d] for d in args.dtypes.split(",")], t0)
    rbs = ROUTE_BUCKETS if args.route_buckets == "all" else [int(b) for b in args.route_buckets.split(",") if b]
    rep = tune(None, shapes=todo, m_buckets=[int(b) for b in args.buckets.split(",") if b],
               dtypes=[dt[d] for d in args.dtypes.split(",")], budget_s=args.budget, save=True, progress=True,
               grid=grid, route_buckets=rbs)
    print(rep.summary())
    table = TuningTable.load(rep.table_path)
    if args.onto:
        table = TuningTable.load(args.onto).merged(table)
    table.save(args.out)
    with open(args.report, "w") as f:
        json.dump(dict(seconds=time.perf_counter() - t0, arch=rep.arch, gpu=torch.cuda.get_device_name(),
                       rows=[r.__dict__ for r in rep.rows]), f, indent=1)


def refine_only(args, todo, dtypes, t0) -> None:
    table = TuningTable.load(args.refine_only)
    problems = [Problem(s.IC, s.OC, s.K, s.codebook, int(b), d)
                for s in todo for d in dtypes for b in args.buckets.split(",")]
    rows = []
    for step, variants_of, margin in REFINE_STEPS:
        if step not in args.steps.split(","):
            continue
        step_rows = refine(table, problems, step, variants_of, margin)
        for r in step_rows:
            vs = "  ".join(f"{k} {v:7.2f}" for k, v in sorted(r.variant_us.items()))
            print(f"{r.key:<44} base {r.base_us:7.2f}  {vs}  -> {r.chosen or 'kept'}")
        print(f"{step}: {sum(bool(r.chosen) for r in step_rows)} of {len(step_rows)} entries changed")
        rows += step_rows
    table.save(args.out)
    with open(args.report, "w") as f:
        json.dump(dict(seconds=time.perf_counter() - t0, gpu=torch.cuda.get_device_name(),
                       rows=[r.__dict__ for r in rows]), f, indent=1)


if __name__ == "__main__":
    main()
