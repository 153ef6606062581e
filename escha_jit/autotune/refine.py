"""The tuner's last steps on NVIDIA: variants of each problem's winner.

Some knobs are worth a try only on the configuration that already won (ptxas register-usage
levels, autotune/reg_levels.py; split-K blocks as one cluster, autotune/split_clusters.py):
searching them over every candidate would multiply the compile work. A step compiles every
winner's variants together (all cores), times each problem's variants interleaved with its winner
over ``rounds`` rounds, and replaces the table entry in place only where a variant is faster by more
than ``margin``. A variant that fails to compile or spills is not timed.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import statistics
from typing import Callable, Optional, Sequence

import torch

from ..offline import compile_all
from ..ops.common import DTYPE_NAMES, arch_of
from ..progress import Progress
from ..spec import vendor_of
from .candidates import Candidate
from .measure import FusedTimer, Problem, candidate_specs, usable
from .occupancy import stamped
from .table import Entry, TuningTable, entry_key

log = logging.getLogger(__name__)
ROUNDS = 3              # interleaved rounds; a candidate's time is the median of its round medians

# (arch, problem, its table entry) -> the variants of that entry worth timing ([]: none)
VariantsOf = Callable[[str, Problem, Entry], Sequence[Candidate]]


@dataclasses.dataclass
class RefineRow:
    key: str                # the table key
    step: str               # the step's name, e.g. "reg_level"
    base_us: float          # the winner's time in this step's rounds (microseconds per call)
    variant_us: dict        # Candidate.key() -> microseconds per call, of each variant timed
    chosen: str             # the adopted variant's Candidate.key(); "" where the winner was kept


def refine(table: TuningTable, problems: Sequence[Problem], step: str, variants_of: VariantsOf, margin: float,
           device: Optional[torch.device] = None, rounds: int = ROUNDS, progress: bool = True) -> list[RefineRow]:
    """Try ``variants_of`` each problem's entry in ``table`` (NVIDIA only; problems without an entry
    or without variants are skipped) and replace an entry where its fastest variant takes less than
    (1 - ``margin``) of its time. The replaced entry keeps its extras, gains ``<step>_us`` (every
    time measured here), a time scaled by the gain measured here (its other figures come from
    the tuning run, whose clock this run may not share) and the blocks per SM of its kernel on the
    device (occupancy.stamped). Rows for every problem tried."""
    dev = device or torch.device("cuda")
    arch = arch_of(dev)
    if vendor_of(arch) != "nvidia":
        return []
    work = []
    for p in problems:
        key = entry_key("fused", p.K, p.codebook, p.IC, p.OC, DTYPE_NAMES[p.dtype], p.M)
        e = table.entries.get(key)
        variants = list(variants_of(arch, p, e)) if e is not None else []
        if variants:
            work.append((p, key, Candidate(e.cfg, e.launch), variants))
    specs = {}
    for p, _, base, variants in work:
        specs.update(dict(candidate_specs(arch, p.K, p.codebook, DTYPE_NAMES[p.dtype], [base, *variants])))
    unusable = {r.spec: r.error or "; ".join(r.problems)
                for r in compile_all(arch, specs=list(specs.items()), jobs=os.cpu_count()) if not r.ok}
    rows = []
    bar = Progress(len(work), f"tune: {step}", enabled=progress)
    for p, key, base, variants in work:
        ok = usable(arch, p, variants, unusable)
        timer = FusedTimer(p, dev)
        times: dict = {c: [] for c in [base, *ok]}
        for _ in range(rounds):
            for c in times:
                times[c].append(timer(c, 10))
        us = {c: statistics.median(t) * 1e6 for c, t in times.items()}
        best = min(ok, key=lambda c: us[c], default=None)
        chosen = ""
        if best is not None and us[best] < (1 - margin) * us[base]:
            e = table.entries[key]
            extra = {**e.extra, f"{step}_us": {c.key(): round(us[c], 3) for c in times}}
            # pinned at the blocks per SM it was timed at: its kernel changed (autotune/occupancy.py)
            table.entries[key] = stamped(key, Entry(best.cfg, best.launch, e.us * us[best] / us[base] if e.us
                                                    else us[best], extra), dev)
            chosen = best.key()
            log.info("tune %s: %s %s, %.2f us against %.2f us", p, step, chosen, us[best], us[base])
        rows.append(RefineRow(key, step, us[base], {c.key(): us[c] for c in ok}, chosen))
        bar.update(key)
        del timer
        torch.cuda.empty_cache()
    return rows
