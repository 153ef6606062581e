"""Which path serves a call of M rows, measured: the fused kernel (ops.fused, M <= 256), the coded
GEMM (ops.gemm, Hopper) and the dense-weight path (ops.linear.linear_unfused), each timed on the
same layers and activations at the upper end of every route bucket (autotune.table.ROUTE_BUCKETS),
by the tuner's method (CUDA-graph replay over distinct weight copies, median). The fastest becomes
the bucket's route entry (the built-in rule's route where it is within table.ROUTE_MARGIN of the
fastest); ops.linear.route_for follows it.

Why measured: where the paths cross depends on the layer's width (the coded GEMM's OC / 128 blocks
against the SMs), the activation dtype (bf16 adds two passes to the dense path) and M within a
token block, more than one rule can hold (benchmarks/RESULTS.md sessions 33, 34).
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable, Optional, Sequence

import torch

from ..ops.common import DTYPE_NAMES
from ..ops.fused import fused_linear
from ..ops.gemm import coded_gemm
from ..ops.linear import linear_unfused, route_runs, rule_route
from .measure import Problem, copies_for, random_weights, time_chain
from .shapes import LayerShape
from .table import ROUTES, RouteEntry, check_route_buckets, pick_route, route_key

log = logging.getLogger(__name__)

ROUTE_FNS: dict[str, Callable] = {"fused": fused_linear, "gemm": coded_gemm, "dense": linear_unfused}


@dataclasses.dataclass
class RouteResult:
    key: str
    entry: Optional[RouteEntry]          # None where no route could be measured
    failed: dict                         # route -> error text
    seconds: float


def measure_routes(shape: LayerShape, dtype: torch.dtype, buckets: Sequence[int], device: torch.device,
                   repeats: int = 10, on_bucket: Optional[Callable[[RouteResult], None]] = None) -> list[RouteResult]:
    """Time every route that can run each bucket's M on ``device`` for one layer shape and
    activation dtype (output in the same dtype), and pick the fastest per bucket. A route that
    fails (a compile error, a launch error) is logged and left out of that bucket, never fatal."""
    buckets = check_route_buckets(buckets)
    if not buckets:
        return []
    p = Problem(shape.IC, shape.OC, shape.K, shape.codebook, max(buckets), dtype)
    layers = random_weights(p, copies_for(p.IC * p.OC * p.K / 8), device)
    g = torch.Generator(device=device).manual_seed(1)
    x_all = torch.randn(p.M, p.IC, device=device, generator=g).to(dtype)
    dt = DTYPE_NAMES[dtype]
    out: list[RouteResult] = []
    for M in buckets:
        t0 = time.perf_counter()
        x = x_all[:M]
        ys = [torch.empty(M, p.OC, dtype=dtype, device=device) for _ in layers]
        us, failed = {}, {}
        for r in ROUTES:
            if not route_runs(device, p.K, M, r):
                continue
            fn = ROUTE_FNS[r]
            try:
                us[r] = 1e6 * time_chain([lambda w=w, y=y: fn(x, w, out=y) for w, y in zip(layers, ys)], repeats)
            except Exception as e:  # noqa: BLE001 - one failing route must not end the tuning run
                failed[r] = f"{type(e).__name__}: {e}"
                log.warning("route %s for %s M=%d failed: %s", r, p, M, failed[r])
        key = route_key(p.K, p.codebook, p.IC, p.OC, dt, M)
        rule = rule_route(device, p.K, p.OC, M)
        entry = RouteEntry(pick_route(us, rule), us, rule) if us else None
        res = RouteResult(key, entry, failed, time.perf_counter() - t0)
        out.append(res)
        if on_bucket is not None:
            on_bucket(res)
        del ys
    del layers
    torch.cuda.empty_cache()
    return out
