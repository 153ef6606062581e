"""Parallel NVRTC compiles: a process pool (what escha_jit.offline.compile_all uses) against a thread
pool of the same width, each over its own cold specs. A decision aid: tune() forks its compile
processes from a multithreaded CUDA process (Python 3.12 warns that fork() may deadlock there; 3.14
defaults to forkserver, which re-imports __main__), and NVRTC releases the GIL, so threads would do
if they scale to the machine's cores. Prints one line per pool and writes JSON.

    python benchmarks/compile_pool.py --specs 64 --jobs 16 --out compile_pool.json

Session 25, this 2-core CPU, 8 specs per pool at 16 workers: processes 7.4 / 6.3 s, threads 5.6 s
(different specs per pool; wall time is the figure, the summed per-spec seconds show contention).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.kernels.registry import shipped_specs  # noqa: E402
from escha_jit.offline import _compile_one  # noqa: E402
from escha_jit.toolchain.nvrtc import NVRTCToolchain  # noqa: E402

POOLS = {"processes": cf.ProcessPoolExecutor, "threads": cf.ThreadPoolExecutor}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specs", type=int, default=64, help="cold fused specs compiled per pool")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--out", default="compile_pool.json")
    args = ap.parse_args(argv)
    NVRTCToolchain().fingerprint()
    fused = [s for s in shipped_specs("sm_90", True) if s[0].op == "fused"]
    n = args.specs
    # processes first and last (a warm-up effect shows as a difference between the two), threads
    # in between; each pool gets specs of its own, so nothing is a cache hit
    plan = [("processes", fused[:n]), ("threads", fused[n:2 * n]), ("processes", fused[2 * n:3 * n])]
    rows = []
    for kind, part in plan:
        with tempfile.TemporaryDirectory(prefix="escha-pool-") as d:
            work = [(s, e, d, "nvrtc") for s, e in part]
            t = time.perf_counter()
            with POOLS[kind](args.jobs) as pool:
                done = list(pool.map(_compile_one, work))
            wall = time.perf_counter() - t
        row = dict(pool=kind, specs=len(done), jobs=args.jobs, wall_s=round(wall, 2),
                   summed_s=round(sum(r.seconds for r in done), 2), failed=sum(1 for r in done if not r.ok))
        rows.append(row)
        print(f"{kind:9s} {row['specs']} specs on {args.jobs}: {row['wall_s']:.1f} s wall, "
              f"{row['summed_s']:.1f} s summed, {row['failed']} failed", flush=True)
    with open(args.out, "w") as f:
        json.dump(dict(cpus=os.cpu_count(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
