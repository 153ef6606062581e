"""Re-tune only the split count of a table's fused entries (NVIDIA): each entry's configuration at
its tuned split against the same configuration at every other split of
escha_jit.autotune.candidates.split_options (the divisors of the K units and the uneven counts
that fill the SMs' last round), interleaved over ``--rounds`` rounds (median per split). An entry
moves only where another split is at least ``--min-gain`` faster. Writes the table (``--out``) and
a report; the kernels are the entries' own (a split is a launch parameter), so nothing new compiles.

    python benchmarks/tune_splits.py --shapes 4096x14336 --out tuned.json --report splits.json

Why: the kernel deals K units to the splits as evenly as integers allow (kernels/fused.py
k_split_max), so S need not divide them; 4096x14336's 112 column groups fill 132 SMs unevenly at
every divisor (x 4 = 448 blocks: a quarter of the SMs run one block fewer than the rest).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.candidates import Candidate, split_options  # noqa: E402
from escha_jit.autotune.measure import FusedTimer, Problem  # noqa: E402
from escha_jit.autotune.table import Entry, TuningTable, parse_key, shipped_table_path  # noqa: E402
from escha_jit.kernels.fused import COLS, FusedLaunch, split_unit  # noqa: E402
from escha_jit.ops.common import arch_of  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default="", help="the table to start from (default: the shipped one)")
    ap.add_argument("--shapes", required=True, help="ICxOC list: the entries of these shapes")
    ap.add_argument("--buckets", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-blocks-per-sm", type=float, default=8.0, help="splits beyond this many blocks per SM "
                    "are not tried")
    ap.add_argument("--min-gain", type=float, default=0.01, help="move an entry only if another split is this "
                    "much faster (fraction of its time)")
    ap.add_argument("--out", default="tuned.json")
    ap.add_argument("--report", default="tune_splits.json")
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    arch = arch_of(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    path = a.table or shipped_table_path(arch)
    table = TuningTable.load(path)
    shapes = set(a.shapes.split(","))
    buckets = {int(b) for b in a.buckets.split(",")}
    rows = []
    for key, e in sorted(table.entries.items()):
        k = parse_key(key)
        if k.op != "fused" or f"{k.IC}x{k.OC}" not in shapes or k.M not in buckets:
            continue
        groups = k.OC // COLS
        options = [S for S in split_options(k.IC, split_unit(e.cfg), groups, sms)
                   if groups * S <= a.max_blocks_per_sm * sms or S == e.launch.splits]
        timer = FusedTimer(Problem(k.IC, k.OC, k.K, k.codebook, k.M, DTYPES[k.dtype]), dev)
        times = {S: [] for S in options}
        failed = {}
        for _ in range(a.rounds):
            for S in options:
                if S in failed:
                    continue
                try:
                    times[S].append(timer(Candidate(e.cfg, FusedLaunch(S)), a.repeats) * 1e6)
                except (ValueError, RuntimeError) as err:     # e.g. shared memory at a longer K range
                    failed[S] = str(err)
        us = {S: statistics.median(t) for S, t in times.items() if t}
        best = min(us, key=us.get)
        cur = us[e.launch.splits]
        moved = best != e.launch.splits and us[best] <= (1 - a.min_gain) * cur
        if moved:
            table.entries[key] = Entry(e.cfg, FusedLaunch(best), us[best],
                                       dict(e.extra or {}, split_retune={"from": e.launch.splits, "us_before": cur}))
        rows.append(dict(key=key, config=dataclasses.asdict(e.cfg), tuned_split=e.launch.splits, us=us,
                         failed=failed, chose=best if moved else e.launch.splits))
        print(f"{key:<40} S {e.launch.splits:>2} {cur:7.2f} us | " +
              " ".join(f"S{S}={t:.2f}" for S, t in sorted(us.items())) +
              (f"  -> S {best} ({us[best] / cur:.3f}x)" if moved else ""), flush=True)
        del timer
        torch.cuda.empty_cache()
    table.save(a.out)
    with open(a.report, "w") as f:
        json.dump(dict(date=time.strftime("%Y-%m-%d %H:%M:%S"), gpu=torch.cuda.get_device_name(dev), table=path,
                       rows=rows), f, indent=1)
    moved = sum(1 for r in rows if r["chose"] != r["tuned_split"])
    print(f"{len(rows)} entries, {moved} moved; table -> {a.out}")


if __name__ == "__main__":
    main()
