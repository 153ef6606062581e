"""Compile, on every core, the fused kernels a tuned table's entries dispatch (each as its M bucket
routes it) with some FusedConfig fields replaced, into the cache dir (ESCHA_JIT_CACHE_DIR): what
benchmarks/bench_variants.py would otherwise compile one at a time. Entries whose replaced
configuration the kernel family refuses are skipped.

Usage: python scripts/prebuild_variant.py --set split_cluster=1 [--table tuning/sm_90.json] [--shapes 4096x4096,...]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from escha_jit import env  # noqa: E402
from escha_jit.autotune.table import TuningTable, parse_key  # noqa: E402
from escha_jit.kernels import fused  # noqa: E402
from escha_jit.offline import compile_all  # noqa: E402
from sass_stats import dispatched_specs  # noqa: E402  (benchmarks/: the table's kernels as dispatched)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", required=True, help="comma-separated FusedConfig fields, e.g. split_cluster=1")
    ap.add_argument("--table", default=os.path.join(ROOT, "tuning", "sm_90.json"))
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096,8192x28672")
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--jobs", type=int, default=None)
    args = ap.parse_args(argv)
    over = {k: int(v) for k, v in (kv.split("=") for kv in args.set.split(","))}
    shapes, ms, dts = set(args.shapes.split(",")), {int(m) for m in args.ms.split(",")}, set(args.dtypes.split(","))
    specs = {}
    for base, keys in dispatched_specs(TuningTable.load(args.table), args.arch, shapes).values():
        if not any(parse_key(k).M in ms and parse_key(k).dtype in dts for k in keys):
            continue
        cfg = dataclasses.replace(fused.FusedConfig(**base.params), **over)
        try:
            spec = fused.spec_for(args.arch, base.K, base.codebook, base.in_dtype, base.out_dtype, cfg)
        except ValueError:
            continue
        specs[str(spec)] = (spec, fused.render_extra(spec))
    t0 = time.time()
    res = compile_all(args.arch, cache_dir=env.cache_dir(), jobs=args.jobs, specs=list(specs.values()))
    bad = [r for r in res if not r.ok]
    print(f"{len(specs)} kernels with {args.set} for {args.arch} in {time.time() - t0:.0f} s ({len(bad)} failed)")
    for r in bad[:3]:
        print(f"  {r.spec}: {r.error}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
