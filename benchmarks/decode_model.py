"""Split each decode bucket's per-call time into a fixed part and a per-weight part.

For every series of cells that differ only in shape - a (codebook, K, M, activation dtype) of the
coded layers, or M of dense bf16 - fits the per-call times of a bench_linear.py JSON to

    t(us) = floor(us) + weights / rate      (weights = IC * OC; rate in T weights per second)

by least squares over the shapes (PERF.md's four: 16.8 M, 2 x 58.7 M and 235 M weights). The floor is
what a call costs however few weights it has (launches, the dependency wait, prologue and epilogue
latency chains, split-K publication), the rate is what each further weight costs once the GPU is
full. Their ratio to dense bf16's per M says which of the two stands between a bucket and a
speedup target: the speedup at W -> infinity is rate / bf16 rate, at small W it tends to the floors'
ratio. The largest relative residual says how well two numbers describe the bucket (14336x4096 and
4096x14336 have the same weight count but not the same time). Then, for a target geomean over
dense bf16 (--target), the cut of every coded floor, or the factor on every coded rate, that the
fitted lines need to reach it. Prints tables, writes JSON.

    python benchmarks/decode_model.py benchmarks/results/2026-12-02_h200_bench_decode_s19.json --out model.json
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict


def fit_line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y over x; needs two distinct x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if n < 2 or sxx == 0:
        raise ValueError(f"a line needs points at two distinct weight counts, got {sorted({x for x, _ in points})}")
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def fit_series(rows: list[dict]) -> list[dict]:
    """One model per series (codebook, K, M, dtype; dense bf16 as codebook 'bf16'): floor_us,
    rate_tw_s (T weights/s), max_rel_residual, shapes."""
    series = defaultdict(list)
    for r in rows:
        dtype = "bf16" if r["codebook"] == "bf16" else r["dtype"]
        series[(r["codebook"], float(r["K"]), r["M"], dtype)].append((r["IC"] * r["OC"], r["us"]))
    out = []
    for (cb, K, M, dtype), pts in sorted(series.items()):
        if len({w for w, _ in pts}) < 2:
            continue
        floor, slope = fit_line([(w, us) for w, us in pts])
        resid = max(abs(floor + slope * w - us) / us for w, us in pts)
        out.append(dict(codebook=cb, K=K, M=M, dtype=dtype, floor_us=floor,
                        rate_tw_s=1e6 / slope / 1e12 if slope > 0 else math.inf,
                        max_rel_residual=resid, shapes=len(pts)))
    return out


def by_bucket(models: list[dict]) -> list[dict]:
    """Per M: geometric means over the coded series of their floor and rate, dense bf16's floor and
    rate, and the coded / bf16 rate ratio (the speedup the fitted lines tend to at large W)."""
    dense = {m["M"]: m for m in models if m["codebook"] == "bf16"}
    gm = statistics.geometric_mean
    out = []
    for M in sorted({m["M"] for m in models if m["codebook"] != "bf16"}):
        coded = [m for m in models if m["codebook"] != "bf16" and m["M"] == M]
        row = dict(M=M, series=len(coded), floor_us=gm([m["floor_us"] for m in coded]),
                   rate_tw_s=gm([m["rate_tw_s"] for m in coded]))
        if M in dense:
            row.update(bf16_floor_us=dense[M]["floor_us"], bf16_rate_tw_s=dense[M]["rate_tw_s"],
                       rate_vs_bf16=row["rate_tw_s"] / dense[M]["rate_tw_s"])
        out.append(row)
    return out


def speedup_geomean(rows: list[dict], models: list[dict], floor_cut_us: float = 0.0, rate_gain: float = 1.0) -> float:
    """Geometric mean over the coded cells of measured dense bf16 time / the model's time with every
    coded floor lowered by floor_cut_us and every coded rate times rate_gain (0 and 1: the fitted
    lines as they are)."""
    dense = {(r["IC"], r["OC"], r["M"]): r["us"] for r in rows if r["codebook"] == "bf16"}
    model = {(m["codebook"], m["K"], m["M"], m["dtype"]): m for m in models}
    ratios = []
    for r in rows:
        m = model.get((r["codebook"], float(r["K"]), r["M"], r["dtype"]))
        if r["codebook"] == "bf16" or m is None or (r["IC"], r["OC"], r["M"]) not in dense:
            continue
        t = m["floor_us"] - floor_cut_us + r["IC"] * r["OC"] / (m["rate_tw_s"] * rate_gain * 1e6)
        ratios.append(dense[(r["IC"], r["OC"], r["M"])] / t)
    return statistics.geometric_mean(ratios)


def _bisect(short_of_target, lo: float, hi: float) -> float:
    """The smallest x in [lo, hi] (to 60 halvings) where short_of_target(x) turns false; it must be
    true at lo and false at hi, and monotonic between."""
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if short_of_target(mid) else (lo, mid)
    return hi


def floor_cut_for(rows: list[dict], models: list[dict], target: float) -> float:
    """The cut (us) of every coded series' floor at which speedup_geomean reaches target (bisection;
    inf where even floors of zero fall short)."""
    short = lambda cut: speedup_geomean(rows, models, floor_cut_us=cut) < target  # noqa: E731
    hi = min(m["floor_us"] for m in models if m["codebook"] != "bf16")
    if not short(0.0):
        return 0.0
    return math.inf if short(hi) else _bisect(short, 0.0, hi)


def rate_gain_for(rows: list[dict], models: list[dict], target: float) -> float:
    """The factor on every coded series' rate (floors as fitted) at which speedup_geomean reaches
    target (bisection; inf where no finite factor does)."""
    short = lambda gain: speedup_geomean(rows, models, rate_gain=gain) < target  # noqa: E731
    if not short(1.0):
        return 1.0
    hi = 2.0
    while short(hi):
        if hi > 1e6:
            return math.inf
        hi *= 2
    return _bisect(short, 1.0, hi)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="a bench_linear.py JSON (decode cells over at least two weight counts)")
    ap.add_argument("--target", type=float, default=1.5, help="geomean speedup over dense bf16 to solve the floor cut for")
    ap.add_argument("--out", default="", help="write the models and buckets here as JSON")
    args = ap.parse_args(argv)
    with open(args.bench) as f:
        bench = json.load(f)
    rows = [r for r in bench["rows"] if r["M"] <= 16 and r.get("act", "none") == "none"]
    models = fit_series(rows)
    print(f"{'codebook':>8} {'K':>4} {'M':>3} {'dtype':>5} {'floor us':>9} {'T w/s':>7} {'max resid':>9}")
    for m in models:
        print(f"{m['codebook']:>8} {m['K']:>4g} {m['M']:>3} {m['dtype']:>5} {m['floor_us']:>9.2f} "
              f"{m['rate_tw_s']:>7.2f} {100 * m['max_rel_residual']:>8.1f}%")
    buckets = by_bucket(models)
    print(f"\n{'M':>3} {'floor us':>9} {'bf16 floor':>10} {'T w/s':>7} {'bf16 T w/s':>10} {'rate x bf16':>11}")
    for b in buckets:
        print(f"{b['M']:>3} {b['floor_us']:>9.2f} {b.get('bf16_floor_us', math.nan):>10.2f} {b['rate_tw_s']:>7.2f} "
              f"{b.get('bf16_rate_tw_s', math.nan):>10.2f} {b.get('rate_vs_bf16', math.nan):>11.3f}")
    fitted = speedup_geomean(rows, models)
    cut = floor_cut_for(rows, models, args.target)
    gain = rate_gain_for(rows, models, args.target)
    print(f"\ngeomean x dense bf16 of the fitted lines: {fitted:.3f}; {args.target:g}x needs every coded floor "
          f"{cut:.2f} us lower, or every coded rate {gain:.3f}x higher")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(source=args.bench, meta=bench.get("meta", {}), models=models, buckets=buckets,
                           fitted_geomean_vs_bf16=fitted, target=args.target, floor_cut_us=cut,
                           rate_gain=gain), f, indent=1)


if __name__ == "__main__":
    main()
