"""A refine step (autotune/refine.py): each winner's split-K blocks as one thread block cluster.

FusedConfig.split_cluster launches the S split blocks of a column group as one cluster that sums
their partial rows in the first block's shared memory (include/escha/fused.h SC): no workspace,
fence or counter, the same bits. Whether that pays depends on the shape: on an H100 it took
0.906-0.978x the time on 4096x14336 at M = 1 / 4 and 1.04-1.64x elsewhere (benchmarks/RESULTS.md
sessions 46, 47: clusters are placed whole, and on shapes of few column groups the last ones start
a round late), so it is tried on each winner rather than guessed, at the winner's own split count
and at 2, 4 and 8.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..kernels.fused import FusedLaunch, has_clusters, split_fits
from ..kernels.limits import block_smem_limit
from .candidates import Candidate
from .table import Entry

if TYPE_CHECKING:                       # measure.py imports torch and the ops; these modules are torch-free
    from .measure import Problem

STEP = "split_cluster"
SPLITS = (2, 4, 8)      # 8: the portable cluster size limit
MARGIN = 0.02           # the threshold session 46's adoptions used; a cluster launch's time varies more


def cluster_variants(arch: str, p: Problem, e: Entry, splits=SPLITS) -> list[Candidate]:
    """Split-cluster twins of entry ``e`` (same config, split_cluster=1) at its own split count (where
    2..8) and at each of ``splits`` that tiles p.IC and fits shared memory as the tuner's candidates
    do; none off sm_90+, for entries with column-group clusters or more than one m tile (the
    kernel's limits, kernels.fused.spec_for) and for entries already split-clustered."""
    cfg = e.cfg
    if not has_clusters(arch) or cfg.split_cluster or cfg.cluster > 1 or cfg.m_tiles > 1:
        return []
    sc = dataclasses.replace(cfg, split_cluster=1)
    return [Candidate(sc, FusedLaunch(S)) for S in sorted({*splits, e.launch.splits})
            if 2 <= S <= 8 and split_fits(sc, p.K, p.IC, p.M, S, block_smem_limit(arch))]
