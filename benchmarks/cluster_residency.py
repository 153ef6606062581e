"""How many of a fused launch's blocks the GPU holds at once, tuned entry against its split-cluster
twins (FusedConfig.split_cluster, S blocks of a column group as one cluster): the driver's counts
(cuOccupancyMaxActiveBlocksPerMultiprocessor x SMs, cuOccupancyMaxActiveClusters x S), no timing.
A launch whose blocks do not all fit at once runs in more than one round. Prints a table, writes JSON.

    python benchmarks/cluster_residency.py --shapes 4096x4096,4096x14336 --ms 1,4 --out residency.json
    python benchmarks/cluster_residency.py --shapes 4096x4096 --set min_blocks=3   # twins with other fields too
    python benchmarks/cluster_residency.py --untuned --shapes 5120x5120,8192x8192   # the untuned choice's launches
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from escha_jit.autotune.table import TuningTable, parse_key, shipped_table_path  # noqa: E402
from escha_jit.kernels.fused import FusedLaunch  # noqa: E402
from escha_jit.ops import fused as F  # noqa: E402
from escha_jit.ops.common import arch_of  # noqa: E402


def residency(dev, k, cfg, launch) -> dict:
    """Blocks in the grid, blocks resident at once, blocks per SM and shared memory of one launch."""
    plan = F.plan_for(dev, k.K, k.codebook, k.IC, k.OC, k.dtype, k.dtype, k.M, cfg, launch)
    threads, groups, S = 32 * plan.cfg.warps, k.OC // 128, plan.launch.splits
    per_sm = plan.kernel.max_active_blocks(threads, plan.smem)
    if plan.cfg.split_cluster:
        resident = plan.kernel.max_active_clusters((threads,), plan.smem, S) * S
    else:
        resident = per_sm * F.sm_count(dev)
    return dict(blocks=groups * S, resident=resident, per_sm=per_sm, smem=plan.smem, splits=S)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096,8192x28672")
    ap.add_argument("--ms", default="1,4")
    ap.add_argument("--dtypes", default="f16")
    ap.add_argument("--splits", default="2,4,8", help="split counts of the split-cluster twins (and the entry's own)")
    ap.add_argument("--set", default="", help="comma-separated FusedConfig fields the twins take besides "
                    "split_cluster=1, e.g. min_blocks=3")
    ap.add_argument("--untuned", action="store_true",
                    help="the untuned choice's launch (kernels/fused.py default_config_for) of every shape x --ks x "
                         "--codebooks x M instead of the shipped table's entries: shapes outside the table")
    ap.add_argument("--ks", default="2,4", help="--untuned: bit rates")
    ap.add_argument("--codebooks", default="mcg,mul1", help="--untuned: codebooks")
    ap.add_argument("--out", default="cluster_residency.json")
    args = ap.parse_args(argv)
    dev = torch.device("cuda")
    table = TuningTable.load(shipped_table_path(arch_of(dev)))
    shapes = {tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")}
    ms = {int(m) for m in args.ms.split(",")}
    over = {f: int(v) for f, v in (kv.split("=") for kv in args.set.split(",") if kv)}
    rows = []
    print(f"{'entry':<40} {'tuned: blocks/resident (per SM)':>32}   split clusters S: blocks/resident (per SM)")
    if args.untuned:            # (key, problem, config, launch): the configuration plan_for picks untuned
        problems = []
        for (IC, OC) in sorted(shapes):
            for K in (float(v) for v in args.ks.split(",")):
                for cb in args.codebooks.split(","):
                    for M in sorted(ms):
                        for dt in args.dtypes.split(","):
                            k = SimpleNamespace(K=K, codebook=cb, IC=IC, OC=OC, M=M, dtype=dt)
                            plan = F.plan_for(dev, K, cb, IC, OC, dt, dt, M)
                            problems.append((f"untuned|K{K:g}|{cb}|{IC}x{OC}|{dt}|M{M}", k, plan.cfg, plan.launch))
    else:
        problems = [(key, parse_key(key), e.cfg, e.launch) for key, e in sorted(table.entries.items())]
    for key, k, cfg, launch in problems:
        if (k.IC, k.OC) not in shapes or k.M not in ms or k.dtype not in args.dtypes.split(","):
            continue
        if cfg.cluster > 1 or cfg.m_tiles > 1:
            continue
        tuned = residency(dev, k, cfg, launch)
        sc = dataclasses.replace(cfg, split_cluster=1, **over)
        twins = {}
        for S in sorted({launch.splits, *(int(s) for s in args.splits.split(","))}):
            if 2 <= S <= 8 and k.IC % (128 * S) == 0:
                try:
                    twins[S] = residency(dev, k, sc, FusedLaunch(S))
                except (ValueError, RuntimeError) as err:
                    twins[S] = {"error": str(err)[:120]}
        cells = "  ".join(f"S{S}: {t['blocks']}/{t['resident']} ({t['per_sm']})" if "error" not in t else f"S{S}: -"
                          for S, t in twins.items())
        print(f"{key:<40} {tuned['blocks']:>6}/{tuned['resident']:<6} ({tuned['per_sm']}) S{tuned['splits']:<14}   {cells}")
        rows.append(dict(key=key, tuned=tuned, split_cluster={str(S): t for S, t in twins.items()}))
    with open(args.out, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(dev), twin_fields=over, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
