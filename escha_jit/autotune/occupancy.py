"""The occupancy a tuned entry was timed at (FusedLaunch.blocks_per_sm), read from the driver.

An entry's time depends on how many of its blocks share an SM, and for most fused kernels that is
set by registers the split-K finishing code takes, not by the main loop (benchmarks/RESULTS.md
session 45: a change that freed 20-40 registers stacked more blocks per SM and took 1.079x the
time; held at the former occupancy, 0.994x). An entry that records its blocks per SM keeps them
through later kernel changes (ops/fused.py pads the launch's shared memory to them)."""
from __future__ import annotations

import dataclasses

import torch

from .table import Entry, parse_key


def occupancy_of(key: str, e: Entry, dev: torch.device) -> tuple[int, int]:
    """(blocks per SM, dynamic shared memory in bytes) of entry ``e`` of table key ``key`` on ``dev``
    unpinned: the blocks of its kernel (as its M bucket routes it) one SM holds at the launch's own
    shared memory, the driver's count (needs the GPU)."""
    from ..ops import fused as F
    k = parse_key(key)
    launch = dataclasses.replace(e.launch, blocks_per_sm=0)
    plan = F.plan_for(dev, k.K, k.codebook, k.IC, k.OC, k.dtype, k.dtype, k.M, e.cfg, launch)
    blocks = plan.kernel.max_active_blocks(32 * plan.cfg.warps, plan.smem)
    if blocks < 1:
        raise RuntimeError(f"{key}: the driver fits no block of {plan.cfg} with {plan.smem} bytes of shared memory")
    return blocks, plan.smem


def pinned(e: Entry, blocks_per_sm: int) -> Entry:
    """Entry ``e`` with launch.blocks_per_sm = ``blocks_per_sm``."""
    return dataclasses.replace(e, launch=dataclasses.replace(e.launch, blocks_per_sm=blocks_per_sm))


def stamped(key: str, e: Entry, dev: torch.device) -> Entry:
    """Entry ``e`` pinned at its unpinned blocks per SM on ``dev`` (occupancy_of)."""
    return pinned(e, occupancy_of(key, e, dev)[0])
