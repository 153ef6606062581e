"""A refine step (autotune/refine.py): each winner compiled at a few ptxas register-usage levels.

ptxas schedules and allocates the same code differently at each level (same instruction counts
in the main loop, other order and registers), and that alone moved kernels by -6 %..+6 %
(benchmarks/RESULTS.md sessions 29, 30); levels 0-3 and 6-10 gave the only two schedules other
than the default's (5), so one level of each is tried.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .candidates import Candidate
from .table import Entry

if TYPE_CHECKING:                       # measure.py imports torch and the ops; these modules are torch-free
    from .measure import Problem

STEP = "reg_level"
LEVELS = (0, 10)
MARGIN = 0.01           # a level must beat the winner by more than this (timing noise is ~0.5 %)


def level_variants(arch: str, p: Problem, e: Entry, levels=LEVELS) -> list[Candidate]:
    """The entry at each of ``levels``; none where it already names one."""
    if e.cfg.reg_level >= 0:
        return []
    return [Candidate(dataclasses.replace(e.cfg, reg_level=lv), e.launch) for lv in levels]
