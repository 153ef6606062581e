"""The kernels tune() compiles only so that the untuned choice can ask the driver about clusters
(kernels.fused.driver_probe_configs: the M = 9..16 cluster configurations, the M <= 8 split-cluster
twin), for a set of layer shapes: how many distinct ones, and what compiling them one at a time
costs on this machine (no GPU: the toolchain of --arch). tune() compiles them in its pool since
session 49; before, they compiled one by one ahead of it. Prints a table, writes JSON.

    python benchmarks/probe_compiles.py --shapes 4096x6144,4096x4096,4096x28672,14336x4096 --out probes.json
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.api import DEFAULT_BUCKETS  # noqa: E402
from escha_jit.kernels import fused  # noqa: E402
from escha_jit.offline import compile_all  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--shapes", default="4096x6144,4096x4096,4096x28672,14336x4096",
                    help="ICxOC list (default: Llama-3-8B's qkv, o, gate+up, down)")
    ap.add_argument("--ks", default="2,3,4")
    ap.add_argument("--codebooks", default="mcg")
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--compile", type=int, default=8, help="how many of them to compile, one at a time (0: none)")
    ap.add_argument("--out", default="probe_compiles.json")
    a = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    specs, asks = {}, 0
    for (IC, OC), K, cb, dt, M in itertools.product(shapes, [float(k) for k in a.ks.split(",")], a.codebooks.split(","),
                                                    a.dtypes.split(","), DEFAULT_BUCKETS):
        for cfg in fused.driver_probe_configs(K, cb, IC, OC, M, a.sms, a.arch):
            s = fused.spec_for(a.arch, K, cb, dt, dt, cfg)
            specs[str(s)] = s
            asks += 1
    picked = sorted(specs)[:a.compile]
    t0 = time.perf_counter()
    rows = compile_all(a.arch, specs=[(specs[k], fused.render_extra(specs[k])) for k in picked],
                       cache_dir=tempfile.mkdtemp(prefix="escha-probes-"), jobs=1) if picked else []
    wall = time.perf_counter() - t0
    print(f"{len(specs)} distinct probe kernels ({asks} asks) over {len(shapes)} shapes")
    for r in rows:
        print(f"  {r.spec:<100} {r.seconds:6.2f} s {'ok' if r.ok else 'FAILED'}")
    if rows:
        per = sum(r.seconds for r in rows) / len(rows)
        print(f"{len(rows)} compiled one at a time in {wall:.1f} s ({per:.2f} s each): "
              f"~{per * len(specs):.0f} s for all {len(specs)} one at a time")
    with open(a.out, "w") as f:
        json.dump({"arch": a.arch, "shapes": a.shapes, "ks": a.ks, "codebooks": a.codebooks, "dtypes": a.dtypes,
                   "probe_kernels": len(specs), "asks": asks, "compiled": [
                       {"spec": r.spec, "seconds": round(r.seconds, 3), "ok": r.ok} for r in rows],
                   "wall_s": round(wall, 2)}, f, indent=1)


if __name__ == "__main__":
    main()
