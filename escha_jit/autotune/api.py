"""``escha_jit.tune(model)`` and ``escha_jit.warmup(model)``: up-front work for every coded
projection a model holds, so that serving never compiles or tunes (and can run in CUDA graphs).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Iterable, Mapping, Optional, Sequence

import torch

from .. import __version__
from ..kernels.fused import (MAX_M, ROUTE_MAX_M, ClusterSlots, FusedConfig, default_config_for, default_launch,
                             driver_probe_configs, has_clusters, swap_route)
from ..nn import EschaLinear
from ..offline import compile_all
from ..ops.common import DTYPE_NAMES, arch_of
from ..progress import Progress
from ..spec import vendor_of
from .candidates import Candidate, fused_candidates
from .search import successive_halving
from .shapes import LayerShape
from .occupancy import stamped
from . import reg_levels, split_clusters
from .table import ROUTE_BUCKETS, Entry, TuningTable, check_route_buckets, entry_key, launch_json, read_table, tables, user_table_path

log = logging.getLogger(__name__)
DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# tune()'s refine steps, in order (autotune/refine.py): (name, variants of a winner, margin a variant
# must win by); split clusters first, so that a winner they change is still tried at ptxas levels
REFINE_STEPS = ((split_clusters.STEP, split_clusters.cluster_variants, split_clusters.MARGIN),
                (reg_levels.STEP, reg_levels.level_variants, reg_levels.MARGIN))
# The grid tune() searches: the H200 sweeps (benchmarks/results) found warps, rows per stage, the
# split count and the XH mode to matter and stages to move times by ~1 %; min_blocks 1 (with 8 or
# 16 waves) lets a split count of 1 fill the GPU at M = 16 (4096x14336: 0.87-0.93x the time,
# benchmarks/RESULTS.md session 13). Warps 16 is searched from M = 9 on (candidates.py). Both A
# sides at every M: the in-kernel prologue (xh 0) repeats the input Hadamard in every column
# group, the prep kernel (xh 1) costs a launch; at M = 16 the first wins on 4096x4096 and smaller
# shapes (with 16 waves sharing it), the second on the wider ones (session 14). Clusters of column
# groups sharing the in-kernel prologue (NVIDIA, M = 9..16 with xh 0): 2 at 4096x4096 M = 16 0.92-0.96x
# the time (session 16), 4 won 9 of the 12 M = 16 problems of 4096x14336 (session 17); 8 was slower
# wherever measured, and each size is one more kernel per xh 0 candidate to compile. The A operand
# in a ring of 3 one-step chunks (sm_90, xh 1, M > 16): 8 waves at 2 blocks per SM fit at M = 64,
# 0.83-0.96x the time of the tuned entries on 4096x14336 and 14336x4096 and slower elsewhere (H200,
# session 41: 21 of 24 entries took a ring variant, 0.902x the time over them in an A/B; the H100
# alike, session 40; a ring of 2 won nowhere that one of 3 did not win by more); its GPU tests (same
# bits as the whole K range) pass. 16 waves with the ring at ONE split (the whole K range per block)
# ran the M = 32 / 64 entries of 4096x14336 and 8192x28672 in 0.66-1.00x their time (H100, session 42;
# the H200 alike, session 43): the grid has it (S = 1 is always a candidate where it fits), and the
# untuned choice takes it where it fills the SMs (kernels.fused._ring_fills).
TUNE_GRID = dict(warps=(4, 8, 16), rows=(4, 8, 16), stages=(2, 3), min_blocks=(1, 2), xh=(0, 1), cluster=(1, 2, 4),
                 x_ring=(0, 3))
GRID_AXES = tuple(TUNE_GRID)        # what tune_grid's overrides may name


def tune_grid(overrides: Optional[Mapping[str, Sequence[int]]] = None) -> dict:
    """The grid tune() searches: TUNE_GRID with the axes named in ``overrides`` (warps, rows,
    stages, min_blocks, xh, cluster, x_ring) replaced, e.g.
    ``{"rows": (8, 16, 32)}``; each value is checked as FusedConfig checks it (ValueError naming
    the axis)."""
    grid = dict(TUNE_GRID)
    for axis, values in (overrides or {}).items():
        if axis not in GRID_AXES:
            raise ValueError(f"tune grid axis {axis!r}: expected one of {sorted(GRID_AXES)}")
        vals = tuple(values)
        if not vals:
            raise ValueError(f"tune grid axis {axis!r}: no values")
        for v in vals:
            try:
                FusedConfig(**{"rows_per_stage" if axis == "rows" else axis: v})
            except ValueError as e:
                raise ValueError(f"tune grid axis {axis!r}: {e}") from None
        grid[axis] = vals
    return grid


def layer_shapes(model_or_layers) -> list[LayerShape]:
    """The distinct coded-projection shapes of a model (EschaLinear modules), in first-seen order."""
    mods = model_or_layers.modules() if isinstance(model_or_layers, torch.nn.Module) else model_or_layers
    out: list[LayerShape] = []
    for m in mods:
        if isinstance(m, EschaLinear):
            s = LayerShape(m.code.shape[0] * 16, m.code.shape[1] * 16, m.K, m.codebook)
            if s not in out:
                out.append(s)
    return out


@dataclasses.dataclass
class TuneRow:
    """One tuned problem: a fused entry (best: the config; heuristic_us: the untuned config's time)
    or a route entry (best: the route; heuristic_us: the built-in rule's route's time)."""
    key: str
    best: str
    best_us: float
    heuristic_us: float
    candidates: int
    measured: int
    failed: int
    seconds: float


@dataclasses.dataclass
class TuneReport:
    arch: str
    rows: list
    table_path: Optional[str]
    seconds: float

    def summary(self) -> str:
        lines = [f"{'problem':<44} {'best us':>8} {'heur us':>8} {'gain':>6} {'cands':>6} {'s':>5}  best config"]
        for r in self.rows:
            lines.append(f"{r.key:<44} {r.best_us:>8.2f} {r.heuristic_us:>8.2f} {r.heuristic_us / r.best_us:>6.2f} "
                         f"{r.candidates:>6} {r.seconds:>5.1f}  {r.best}")
        lines.append(f"{len(self.rows)} problems tuned for {self.arch} in {self.seconds:.1f} s"
                     + (f"; table: {self.table_path}" if self.table_path else ""))
        return "\n".join(lines)


def tune(model_or_layers, m_buckets: Sequence[int] = DEFAULT_BUCKETS,
         dtypes: Sequence[torch.dtype] = (torch.float16,), budget_s: float = 20.0,
         device: Optional[torch.device] = None, save: bool = True, progress: bool = True,
         shapes: Optional[Iterable[LayerShape]] = None,
         grid: Optional[Mapping[str, Sequence[int]]] = None, refine: bool = True,
         route_buckets: Sequence[int] = ROUTE_BUCKETS) -> TuneReport:
    """Measure and record the best fused-kernel configuration of every (shape, dtype, M bucket)
    of the model's coded projections that the built-in rule routes to the fused kernel (buckets
    above kernels.fused.ROUTE_MAX_M of the device's vendor are skipped), then, for each
    ``route_buckets`` (autotune.table.ROUTE_BUCKETS; () to skip), which path serves a call of that
    many rows fastest: the fused kernel, the coded GEMM (Hopper) or the dense-weight path
    (autotune/routes.py; ops.linear.route_for follows it). Writes the user table in the cache dir
    (it wins over the shipped one) after every problem, so an interrupted run keeps what it
    measured, unless ``save`` is False. ``budget_s`` bounds each fused problem's search; ``grid``
    widens or narrows the searched axes (see tune_grid). On NVIDIA each winner is then refined
    (autotune/refine.py, REFINE_STEPS) unless ``refine`` is False: its split-K blocks as one
    cluster (autotune/split_clusters.py), then ptxas register-usage levels (autotune/reg_levels.py)."""
    search = tune_grid(grid)
    from .measure import FusedTimer, Problem, candidate_specs, usable
    from .routes import measure_routes
    route_buckets = check_route_buckets(route_buckets)
    t_start = time.perf_counter()
    dev = device or torch.device("cuda")
    arch = arch_of(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    shapes = list(shapes) if shapes is not None else layer_shapes(model_or_layers)
    buckets = sorted({b for b in m_buckets if b <= ROUTE_MAX_M[vendor_of(arch)]})
    problems = [Problem(s.IC, s.OC, s.K, s.codebook, M, dt) for s in shapes for dt in dtypes for M in buckets]
    bar = Progress(len(problems) + 1 + len(shapes) * len(dtypes) * len(route_buckets), "tune", enabled=progress)
    specs, searched = {}, []                           # searched: (problem, candidates)
    for p in problems:
        cands = fused_candidates(arch, p.K, p.IC, p.OC, p.M, sms, **search)
        # the untuned choice without the driver's cluster counts, and every kernel those counts are
        # asked of (which the untuned choice may then run): compiled here in the pool, not one by
        # one when the heuristic is worked out below
        heur = heuristic_candidate(p, sms, arch)
        probes = [Candidate(c, heur.launch) for c in driver_probe_configs(p.K, p.codebook, p.IC, p.OC, p.M, sms, arch)]
        specs.update(dict(candidate_specs(arch, p.K, p.codebook, DTYPE_NAMES[p.dtype], cands + [heur] + probes)))
        searched.append((p, cands))
    if route_buckets:                    # the routes' kernels (dense weight, row scaling, coded GEMM), in the same pool
        from .shapes import model_specs
        specs.update(dict(model_specs(arch, shapes, [DTYPE_NAMES[dt] for dt in dtypes])))
    # thousands of candidates on a fresh cache take minutes (H200 machine, 16 cores: 2018 in 287 s)
    cbar = Progress(len(specs), "tune: compile", enabled=progress, min_interval_s=10.0)
    compiled = compile_all(arch, specs=list(specs.items()), jobs=os.cpu_count(),
                           progress=lambda row: cbar.update(row.spec))
    unusable = {r.spec: r.error or "; ".join(r.problems) for r in compiled if not r.ok}
    bar.update(f"compiled {len(specs)} specializations")
    timers = [(p, cands, _untuned_split_cluster(dev, p, heuristic_candidate(p, sms, arch, _cluster_slots(dev, p))))
              for p, cands in searched]         # timers: (problem, candidates, the untuned choice)
    table = TuningTable({"device": torch.cuda.get_device_name(dev), "arch": arch, "sm_count": sms,
                         "toolchain": _toolchain_id(arch), "package_version": __version__,
                         "date": time.strftime("%Y-%m-%d %H:%M:%S"), "method": "CUDA-graph replay over distinct "
                         "weight copies (3x L2), successive halving, median"}, {})
    # the user table is written after every problem, so that an interrupted run (Ctrl-C, a time
    # limit, a crash) keeps what it measured
    path = user_table_path(arch) if save else None
    base = (read_table(path) or TuningTable()) if save else None   # an unreadable one is replaced
    rows = []
    for p, cands, heur in timers:
        t0 = time.perf_counter()
        timer = FusedTimer(p, dev)
        t_heur = timer(heur, 15)
        rep = successive_halving(usable(arch, p, cands, unusable), timer, budget_s=budget_s, describe=Candidate.key)
        best = rep.best
        key = entry_key("fused", p.K, p.codebook, p.IC, p.OC, DTYPE_NAMES[p.dtype], p.M)
        if best is None or best.seconds > t_heur:         # never record something slower than the heuristic
            choice, us = heur, t_heur
        else:
            choice, us = best.candidate, best.seconds
        runner = next((r for r in rep.ranked if r.candidate != choice), None)
        # stamped: the blocks per SM it was timed at, kept through later kernel changes (autotune.occupancy)
        table.entries[key] = stamped(key, Entry(choice.cfg, choice.launch, us * 1e6, {
            "weight_gb_s": round(p.IC * p.OC * p.K / 8 / us / 1e9, 1), "heuristic_us": round(t_heur * 1e6, 3),
            "runner_up": None if runner is None else {"config": dataclasses.asdict(runner.candidate.cfg),
                                                       "launch": launch_json(runner.candidate.launch),
                                                       "us": round(runner.seconds * 1e6, 3)}}), dev)
        rows.append(TuneRow(key, choice.key(), us * 1e6, t_heur * 1e6, len(cands), rep.measured, len(rep.failed),
                            time.perf_counter() - t0))
        if save:
            base.merged(table).save(path)
            tables().invalidate()
        bar.update(key)
        del timer
        torch.cuda.empty_cache()
    from .refine import refine as refine_step
    for step, variants_of, margin in (REFINE_STEPS if refine else ()):
        won = {r.key for r in refine_step(table, [p for p, _, _ in timers], step, variants_of, margin, dev,
                                          progress=progress) if r.chosen}
        for r in rows:
            if r.key in won:
                e = table.entries[r.key]
                r.best, r.best_us = Candidate(e.cfg, e.launch).key(), e.us
        if save:
            base.merged(table).save(path)
            tables().invalidate()
    def record(res) -> None:             # each route bucket as it is measured, saved like the fused problems
        if res.entry is not None:
            e = res.entry
            table.routes[res.key] = e
            rows.append(TuneRow(res.key, e.route, e.us[e.route], e.us.get(e.rule, float("nan")),
                                len(e.us) + len(res.failed), len(e.us), len(res.failed), res.seconds))
            if save:
                base.merged(table).save(path)
                tables().invalidate()
        bar.update(res.key)

    for s in shapes:                     # after the fused entries: the fused route runs its tuned configs
        for dt in dtypes:
            measure_routes(s, dt, route_buckets, dev, on_bucket=record)
    return TuneReport(arch, rows, path, time.perf_counter() - t_start)


def heuristic_candidate(p, sms: int, arch: str = "sm_90", cluster_slots: Optional[ClusterSlots] = None) -> Candidate:
    """What an untuned call of problem ``p`` runs (the config and launch of ops/fused.py plan_for;
    ``cluster_slots`` as there, None: no clusters), but for the split clusters plan_for may take at
    M <= 8 on sm_90 from the driver's counts (tune() adds them: _untuned_split_cluster)."""
    cfg = default_config_for(p.K, p.codebook, p.IC, p.OC, p.M, sms, arch, cluster_slots)
    routed = swap_route(cfg, vendor_of(arch), p.codebook, p.M)   # the launch is sized for the route it runs
    return Candidate(cfg, default_launch(routed, p.K, p.IC, p.OC, p.M, sms, arch))


def _untuned_split_cluster(dev: torch.device, p, heur: Candidate) -> Candidate:
    """``heur`` as an untuned call runs it on ``dev``: at M <= 8 on sm_90 perhaps as split clusters
    (ops/fused.py untuned_split_cluster asks the driver), which heuristic_candidate, driver-free,
    leaves out."""
    from ..ops.fused import untuned_split_cluster
    if not has_clusters(arch_of(dev)):
        return heur
    dt = DTYPE_NAMES[p.dtype]
    routed = swap_route(heur.cfg, vendor_of(arch_of(dev)), p.codebook, p.M)
    cfg, launch = untuned_split_cluster(dev, p.K, p.codebook, dt, dt, p.M, p.IC, p.OC, routed, heur.launch)
    return heur if not cfg.split_cluster else Candidate(cfg, launch)


def _cluster_slots(dev: torch.device, p) -> Optional[ClusterSlots]:
    from ..ops.fused import cluster_slots
    dt = DTYPE_NAMES[p.dtype]
    return cluster_slots(dev, p.K, p.codebook, dt, dt, p.M, p.IC)


def _toolchain_id(arch: str) -> str:
    from ..jit import toolchain_for
    try:
        return toolchain_for(arch).version()
    except Exception as e:  # noqa: BLE001
        return f"unknown ({e})"


def warmup_sizes(m_buckets: Sequence[int]) -> list[int]:
    """The row counts warmup() calls each projection with, largest first (see warmup)."""
    top = max(m_buckets)
    above = {MAX_M + 1, *(b for b in ROUTE_BUCKETS if MAX_M < b < top)} if top > MAX_M else set()
    return sorted(set(m_buckets) | above, reverse=True)


def warmup(model_or_layers, m_buckets: Sequence[int] = DEFAULT_BUCKETS,
           dtypes: Sequence[torch.dtype] = (torch.float16,), device: Optional[torch.device] = None,
           progress: bool = False) -> int:
    """Compile (or load from the cache) and load every kernel the model's coded projections need
    for these M buckets and dtypes, and size the scratch buffers for the largest M, without
    measuring anything. Returns the number of plans made. Run it before CUDA-graph capture.
    Where a bucket exceeds the fused kernel's MAX_M, one call per route bucket up to it is made as
    well (MAX_M + 1 and autotune.table.ROUTE_BUCKETS): the paths above MAX_M (coded GEMM, dense
    weight) compile one kernel set for any M, and the tuned routes may take either."""
    mods = [m for m in (model_or_layers.modules() if isinstance(model_or_layers, torch.nn.Module)
                        else model_or_layers) if isinstance(m, EschaLinear)]
    n = 0
    sizes = warmup_sizes(m_buckets)
    bar = Progress(len(mods) * len(dtypes) * len(sizes), "warmup", enabled=progress)
    with torch.no_grad():
        for mod in mods:
            dev = device or mod.code.device
            for dt in dtypes:
                for M in sizes:                                    # largest first: scratch sized once
                    mod(torch.zeros(M, mod.in_features, dtype=dt, device=dev))
                    n += 1
                    bar.update()
    torch.cuda.synchronize()
    return n
