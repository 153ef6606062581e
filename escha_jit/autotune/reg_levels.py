"""The tuner's last step on NVIDIA: each winner compiled at a few ptxas register-usage levels.

ptxas schedules and allocates the same code differently at each level (same instruction counts
in the main loop, other order and registers), and that alone moved kernels by -6 %..+6 %
(benchmarks/RESULTS.md sessions 29, 30). Searching it over every candidate would triple the
compile work, so only each problem's winner is tried: its variants are compiled together, then
timed interleaved with it, and one replaces it only when faster by more than ``margin``.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import statistics
from typing import Optional, Sequence

import torch

from ..offline import compile_all
from ..ops.common import DTYPE_NAMES, arch_of
from ..progress import Progress
from ..spec import vendor_of
from .candidates import Candidate
from .measure import FusedTimer, Problem, candidate_specs, usable
from .table import Entry, TuningTable, entry_key

log = logging.getLogger(__name__)
LEVELS = (0, 10)        # ptxas' default is 5; levels 0-3 and 6-10 gave the only two other schedules (session 30)
MARGIN = 0.01           # a variant must beat the winner by more than this (timing noise is ~0.5 %)
ROUNDS = 3              # interleaved rounds; a candidate's time is the median of its round medians


@dataclasses.dataclass
class LevelRow:
    key: str
    base_us: float
    level_us: dict          # level -> us
    chosen: int             # -1: the winner kept


def refine(table: TuningTable, problems: Sequence[Problem], device: Optional[torch.device] = None,
           levels: Sequence[int] = LEVELS, margin: float = MARGIN, progress: bool = True) -> list[LevelRow]:
    """Try ``levels`` on the table's entry of each problem (NVIDIA only; problems without an entry,
    or whose entry already names a level, are skipped) and replace entries in place where a level
    wins by more than ``margin``. A variant that fails to compile or spills is not timed."""
    dev = device or torch.device("cuda")
    arch = arch_of(dev)
    if vendor_of(arch) != "nvidia":
        return []
    work = []
    for p in problems:
        key = entry_key("fused", p.K, p.codebook, p.IC, p.OC, DTYPE_NAMES[p.dtype], p.M)
        e = table.entries.get(key)
        if e is None or e.cfg.reg_level >= 0:
            continue
        base = Candidate(e.cfg, e.launch)
        variants = [Candidate(dataclasses.replace(e.cfg, reg_level=lv), e.launch) for lv in levels]
        work.append((p, key, base, variants))
    specs = {}
    for p, _, base, variants in work:
        specs.update(dict(candidate_specs(arch, p.K, p.codebook, DTYPE_NAMES[p.dtype], [base, *variants])))
    unusable = {r.spec: r.error or "; ".join(r.problems)
                for r in compile_all(arch, specs=list(specs.items()), jobs=os.cpu_count()) if not r.ok}
    rows = []
    bar = Progress(len(work), "tune: ptxas levels", enabled=progress)
    for p, key, base, variants in work:
        ok = usable(arch, p, variants, unusable)
        timer = FusedTimer(p, dev)
        times: dict = {c: [] for c in [base, *ok]}
        for _ in range(ROUNDS):
            for c in times:
                times[c].append(timer(c, 10))
        us = {c: statistics.median(t) * 1e6 for c, t in times.items()}
        best = min(ok, key=lambda c: us[c], default=None)
        chosen = -1
        if best is not None and us[best] < (1 - margin) * us[base]:
            e = table.entries[key]
            extra = {**e.extra, "reg_level_us": {str(c.cfg.reg_level): round(us[c], 3) for c in times}}
            # the entry's time scaled by the gain measured here: its other figures (heuristic_us,
            # runner_up) come from the tuning run, whose clock this run may not share
            scaled = e.us * us[best] / us[base] if e.us else us[best]
            table.entries[key] = Entry(best.cfg, best.launch, scaled, extra)
            chosen = best.cfg.reg_level
            log.info("tune %s: ptxas register-usage level %d, %.2f us against %.2f us", p, chosen, us[best], us[base])
        rows.append(LevelRow(key, us[base], {c.cfg.reg_level: us[c] for c in ok}, chosen))
        bar.update(key)
        del timer
        torch.cuda.empty_cache()
    return rows
