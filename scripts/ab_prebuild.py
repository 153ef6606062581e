"""Compile, on every core, the kernels bench_linear.py's decode cells dispatch to, into the cache
dir (ESCHA_JIT_CACHE_DIR), with the package of one tree (scripts/ab_trees.sh calls it per tree).

Why: the benchmark compiles each kernel on first use, one at a time. On a fresh H200 machine
(2026-12-02) an A/B of three trees compiling on first use ran past 600 s before its third run; with
this prebuild (204 kernels per tree on 16 cores) the whole A/B, 6 runs, took 347 s. The cells' kernels are the
tuned table's entries for (shape, K, codebook, dtype, M bucket), each with its swapped twin, the
fused defaults where the table has no entry, and the prep kernel of each dtype. With --prefill also
the prefill routes' kernels (every shipped non-fused specialization of the chosen K and codebooks:
the dense-weight path's and the coded GEMM's, each cluster size).

Usage: python scripts/ab_prebuild.py TREE [--arch sm_90] [--jobs N] [bench_linear's --shapes/--ks/
--codebooks/--dtypes/--ms values]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

SHAPES = "4096x4096,4096x14336,14336x4096,8192x28672"     # bench_linear.SHAPES


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", help="a folder holding an escha_jit package with its templates/ and tuning/")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--ks", default="2,3,4")
    ap.add_argument("--codebooks", default="mcg,mul1")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--ms", default="1,4,16")
    ap.add_argument("--prefill", action="store_true", help="also the dense-weight path's and the coded GEMM's kernels")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.realpath(args.tree))
    from escha_jit import env
    from escha_jit.autotune.table import Tables, entry_key
    from escha_jit.kernels import fused, prep
    from escha_jit.kernels.registry import fused_default_configs, fused_fits, shipped_specs, with_swap
    from escha_jit.offline import compile_all
    from escha_jit.spec import vendor_of

    table = Tables().table(args.arch)
    specs: dict = {}
    for dt in args.dtypes.split(","):
        # (trees before session 27 have one prep kernel per dtype)
        for s in (prep.specs_for(args.arch, dt) if hasattr(prep, "specs_for") else [prep.spec_for(args.arch, dt)]):
            specs.setdefault(s, prep.render_extra(s))
        for shape in args.shapes.split(","):
            IC, OC = (int(v) for v in shape.split("x"))
            for K in (float(k) for k in args.ks.split(",")):
                for cb in args.codebooks.split(","):
                    for M in (int(m) for m in args.ms.split(",") if m):     # --ms= : prefill runs, no fused cells
                        e = table.entries.get(entry_key("fused", K, cb, IC, OC, dt, M))
                        cfgs = [e.cfg] if e is not None else fused_default_configs(vendor_of(args.arch), cb, K)
                        for cfg in cfgs:
                            if not fused_fits(args.arch, cfg, K):
                                continue
                            for c in with_swap(cfg, args.arch, cb):
                                s = fused.spec_for(args.arch, K, cb, dt, dt, c)
                                specs.setdefault(s, fused.render_extra(s))
    if args.prefill:
        ks, cbs = {float(k) for k in args.ks.split(",")}, set(args.codebooks.split(","))
        for s, extra in shipped_specs(args.arch):
            if not s.op.startswith("fused") and (s.K is None or (s.K in ks and s.codebook in cbs)):
                specs.setdefault(s, extra)
    t0 = time.time()
    rows = compile_all(args.arch, cache_dir=env.cache_dir(), jobs=args.jobs, specs=list(specs.items()))
    bad = [r for r in rows if not r.ok]
    print(f"{args.tree}: {len(rows)} kernels for {args.arch} in {time.time() - t0:.0f} s "
          f"({sum(r.cached for r in rows)} cached, {len(bad)} failed)")
    for r in bad:
        print(f"  {r.spec}: {r.error or '; '.join(r.problems)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
