"""Stamp each fused entry of a tuning table with the blocks per SM its kernel gets on this GPU
(``launch.blocks_per_sm``: the driver's occupancy at the launch's shared memory, for the entry's M
bucket), so that the launch keeps that occupancy after a kernel change frees registers.

Why (benchmarks/RESULTS.md session 45): most fused kernels' register counts are set by their
split-K finishing code, and an entry's time depends on how many blocks share an SM. A change that
took the finishing code from 102-110 to 64-86 registers let 53 of 103 decode kernels stack more
blocks per SM than their entries were timed with (1.079x the time); held at the former occupancy
the same change took 0.994x. Run this with the package the table was timed with (its kernels set
the occupancy), then apply the kernel change:

    python benchmarks/stamp_occupancy.py --table tuning/sm_90.json --out tuning/sm_90.json

Entries that already carry blocks_per_sm are re-stamped. Prints one line per entry; needs the GPU.
``--check`` stamps nothing: it lists the entries whose pin differs from what this machine's kernels
fit unpinned (the launches the pin pads, or cannot hold up), e.g. after a compiler upgrade.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))     # sass_stats, also when imported by path
from escha_jit import env  # noqa: E402
from escha_jit.autotune.occupancy import occupancy_of, pinned  # noqa: E402
from escha_jit.autotune.table import TuningTable, parse_key, shipped_table_path  # noqa: E402
from escha_jit.kernels import fused as KF  # noqa: E402
from escha_jit.offline import compile_all  # noqa: E402
from escha_jit.ops.common import arch_of  # noqa: E402
from sass_stats import dispatched_specs  # noqa: E402  (benchmarks/: the table's kernels as dispatched)

log = logging.getLogger("stamp_occupancy")


def prebuild(table: TuningTable, arch: str, jobs) -> None:
    """Compile every kernel the table's fused entries dispatch (each as its M bucket routes it) on
    all cores first: plan_for would compile them one at a time."""
    specs = [(s, KF.render_extra(s)) for s, _ in dispatched_specs(table, arch, set()).values()]
    bad = [r for r in compile_all(arch, cache_dir=env.cache_dir(), jobs=jobs, specs=specs) if not r.ok]
    if bad:
        raise RuntimeError(f"{len(bad)} kernels failed to compile, first: {bad[0].spec}: {bad[0].error}")


def stamp(table: TuningTable, dev: torch.device) -> dict[str, tuple[int, int]]:
    """Each fused entry's (blocks per SM, dynamic shared memory) on ``dev`` unpinned; the table's
    entries get the blocks as launch.blocks_per_sm (in place; autotune.occupancy)."""
    out = {}
    for key, e in sorted(table.entries.items()):
        if parse_key(key).op != "fused":
            continue
        blocks, smem = out[key] = occupancy_of(key, e, dev)
        table.entries[key] = pinned(e, blocks)
        print(f"{key:<44} {str(e.cfg):<150} S={e.launch.splits:<3} smem {smem:>6}  {blocks} per SM", flush=True)
    return out


def check(table: TuningTable, dev: torch.device) -> tuple[list[tuple[str, int, int]], int]:
    """(key, pinned blocks per SM, unpinned blocks per SM on ``dev``) of every stamped fused entry
    whose two differ (above the pin the launch is padded down to it, below it the pin cannot hold),
    and how many stamped fused entries there are."""
    out, n = [], 0
    for key, e in sorted(table.entries.items()):
        if parse_key(key).op != "fused" or not e.launch.blocks_per_sm:
            continue
        n += 1
        blocks, smem = occupancy_of(key, e, dev)
        if blocks != e.launch.blocks_per_sm:
            out.append((key, e.launch.blocks_per_sm, blocks))
            print(f"{key:<44} pinned {e.launch.blocks_per_sm} per SM, fits {blocks} (smem {smem})", flush=True)
    return out, n


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default="", help="the table (default: the shipped one of this GPU's arch)")
    ap.add_argument("--out", default="", help="where the stamped table goes (may be --table)")
    ap.add_argument("--check", action="store_true", help="stamp nothing: list the entries whose pin "
                    "differs from this machine's unpinned occupancy")
    ap.add_argument("--jobs", type=int, default=None, help="compiler processes for the prebuild (default: CPUs)")
    args = ap.parse_args(argv)
    if not args.out and not args.check:
        ap.error("--out (the stamped table) or --check is required")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    dev = torch.device("cuda")
    path = args.table or shipped_table_path(arch_of(dev))
    table = TuningTable.load(path)
    prebuild(table, arch_of(dev), args.jobs)
    if args.check:
        diff, n = check(table, dev)
        log.info("%d of %d stamped entries of %s differ on %s", len(diff), n, path, torch.cuda.get_device_name(dev))
        return
    got = stamp(table, dev)
    table.save(args.out)
    log.info("%d entries of %s stamped on %s -> %s", len(got), path, torch.cuda.get_device_name(dev), args.out)


if __name__ == "__main__":
    main()
