"""Successive halving over candidates with an injectable timer (torch-free, deterministic).

``timer(candidate, repeats) -> seconds`` measures one candidate (median of ``repeats``) and may
raise: a candidate that fails to compile or launch is dropped with a log line, never fatal.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Generic, Optional, Sequence, TypeVar

log = logging.getLogger(__name__)
C = TypeVar("C")


@dataclass
class Result(Generic[C]):
    candidate: C
    seconds: float
    rounds: int


@dataclass
class SearchReport(Generic[C]):
    ranked: list = field(default_factory=list)          # Result, best first
    failed: list = field(default_factory=list)          # (candidate, error text)
    measured: int = 0
    elapsed_s: float = 0.0

    @property
    def best(self) -> Optional["Result[C]"]:
        return self.ranked[0] if self.ranked else None


def successive_halving(candidates: Sequence[C], timer: Callable[[C, int], float], *, repeats: Sequence[int] = (3, 10, 25),
                       keep: float = 0.34, budget_s: Optional[float] = None,
                       clock: Callable[[], float] = time.perf_counter, describe=str) -> SearchReport:
    """Round i measures every survivor with repeats[i]; the fastest `keep` fraction survives.
    Ties keep the earlier candidate (stable order). A time budget stops adding rounds (the
    first round always completes so every candidate gets a measurement)."""
    t0 = clock()
    rep = SearchReport()
    alive: list[tuple[int, C]] = list(enumerate(candidates))
    scores: dict[int, tuple[float, int]] = {}
    for rnd, n in enumerate(repeats):
        timed = []
        for idx, c in alive:
            try:
                s = float(timer(c, n))
            except Exception as e:  # noqa: BLE001 - a broken candidate is dropped, not fatal
                log.info("tuning candidate %s dropped: %s: %s", describe(c), type(e).__name__, str(e).splitlines()[0][:200])
                rep.failed.append((c, f"{type(e).__name__}: {e}"))
                continue
            rep.measured += 1
            scores[idx] = (s, rnd + 1)
            timed.append((s, idx, c))
        timed.sort(key=lambda t: (t[0], t[1]))
        last = rnd == len(repeats) - 1 or (budget_s is not None and clock() - t0 > budget_s)
        if last or len(timed) <= 1:
            alive = [(i, c) for _, i, c in timed]
            break
        alive = [(i, c) for _, i, c in timed[:max(1, int(round(len(timed) * keep)))]]
    order = sorted(scores, key=lambda i: (-scores[i][1], scores[i][0], i))     # later rounds are better data
    rep.ranked = [Result(candidates[i], scores[i][0], scores[i][1]) for i in order]
    rep.elapsed_s = clock() - t0
    return rep
