"""Compare interleaved runs of bench_linear.py (or bench_gemm_parts.py, bench_dense_weight.py) over
N trees: files go A, B, ..., A, B, ... (rounds).

Prints, per decode cell (shape, K, codebook, M, dtype), each tree's median time over the rounds and
its ratio to tree A's (< 1: faster than A), then geometric means of each ratio by M and overall.
Times are microseconds per call (CUDA-graph replay, as bench_linear.py measures them).
Usage: ab_compare.py [--trees N] A1.json B1.json [A2.json B2.json ...]   (N defaults to 2)
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def cells(path: str) -> dict:
    """Cell -> us per call: bench_linear.py's coded cells, bench_gemm_parts.py's whole coded GEMM
    calls (prep + GEMM, fp16 activations and outputs), or bench_dense_weight.py's weight builds
    (M shown as 0, the dtype the weight's)."""
    rows = json.load(open(path))["rows"]
    if rows and "M" not in rows[0]:
        return {(r["IC"], r["OC"], r["K"], r["codebook"], 0, r["dtype"], "build"): r["us"] for r in rows}
    if rows and "gemm_us" in rows[0]:
        return {(r["IC"], r["OC"], r["K"], r["codebook"], r["M"], "f16", "gemm"): r["gemm_us"] for r in rows}
    return {(r["IC"], r["OC"], r["K"], r["codebook"], r["M"], r["dtype"], r.get("act", "none")): r["us"]
            for r in rows if r["codebook"] != "bf16"}


def main(argv: list[str]) -> None:
    n = 2
    if argv[:1] == ["--trees"]:
        n, argv = int(argv[1]), argv[2:]
    if n < 2 or len(argv) < n or len(argv) % n:
        sys.exit("usage: ab_compare.py [--trees N] A1.json B1.json ... (a multiple of N files)")
    side = [defaultdict(list) for _ in range(n)]
    for i, p in enumerate(argv):
        for k, us in cells(p).items():
            side[i % n][k].append(us)
    keys = sorted(set.intersection(*(set(s) for s in side)))
    names = "ABCDEFGH"[:n]
    gm = statistics.geometric_mean
    by_m = [defaultdict(list) for _ in range(n)]
    print(f"{'shape':>11} {'K':>3} {'cb':>4} {'M':>3} {'dt':>4} {'A us':>8}"
          + "".join(f" {t + ' us':>8} {t + '/A':>6}" for t in names[1:]))
    for k in keys:
        med = [statistics.median(s[k]) for s in side]
        line = f"{k[0]:>5}x{k[1]:<5} {k[2]:>3g} {k[3]:>4} {k[4]:>3} {k[5]:>4} {med[0]:>8.2f}"
        for j in range(1, n):
            by_m[j][k[4]].append(med[j] / med[0])
            line += f" {med[j]:>8.2f} {med[j] / med[0]:>6.3f}"
        print(line)
    for j in range(1, n):
        for m, v in sorted(by_m[j].items()):
            print(f"{names[j]}/A M = {m}: geomean {gm(v):.4f} (min {min(v):.3f}, max {max(v):.3f}, {len(v)} cells)")
        allv = [x for v in by_m[j].values() for x in v]
        print(f"{names[j]}/A all: geomean {gm(allv):.4f} over {len(allv)} cells")


if __name__ == "__main__":
    main(sys.argv[1:])
