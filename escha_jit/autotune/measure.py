"""GPU timing of fused-kernel candidates (PERF.md method: CUDA-graph replay of a chain of calls
over distinct weight copies, more bytes than L2; median of replays; random inputs)."""
from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from typing import Callable, Mapping, Optional, Sequence

import torch

from ..kernels.fused import render_extra, spec_for
from ..ops.common import DTYPE_NAMES, arch_of
from ..ops.fused import fused_linear
from ..reference import LinearWeights
from ..trellis import tile_words
from .candidates import Candidate

log = logging.getLogger(__name__)
L2_BYTES = 60 << 20


@dataclasses.dataclass(frozen=True)
class Problem:
    IC: int
    OC: int
    K: float
    codebook: str
    M: int
    dtype: torch.dtype = torch.float16

    def __str__(self):
        return f"{self.IC}x{self.OC} K{self.K:g} {self.codebook} M{self.M} {DTYPE_NAMES[self.dtype]}"


def copies_for(bytes_per_copy: int, lo: int = 4, hi: int = 64) -> int:
    """Enough distinct copies that one pass over them is 3x the L2."""
    return max(lo, min(hi, math.ceil(3 * L2_BYTES / max(1, bytes_per_copy))))


def random_weights(p: Problem, n: int, device: torch.device, seed: int = 0) -> list[LinearWeights]:
    g = torch.Generator(device=device).manual_seed(seed)
    out = []
    for _ in range(n):
        code = torch.randint(-32768, 32768, (p.IC // 16, p.OC // 16, tile_words(p.K)), dtype=torch.int16,
                             device=device, generator=g)
        rin = ((torch.rand(p.IC, device=device, generator=g) + 0.5) / math.sqrt(p.IC)).half()
        rout = (torch.rand(p.OC, device=device, generator=g) + 0.5).half()
        out.append(LinearWeights(code, float(p.K), p.codebook, rin, rout))
    return out


def time_chain(calls: Sequence[Callable[[], None]], repeats: int) -> float:
    """Median seconds per call of a CUDA graph chaining ``calls`` (warmed up first)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        calls[0]()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    times = []
    for _ in range(max(1, repeats)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / len(calls))
    del g
    return statistics.median(times)


def fused_specs(arch: str, K: float, codebook: str, dtype: str, c: Candidate) -> list:
    """The fused kernels a candidate may run: its config and the swapped twin that dispatch may
    route it to (kernels.fused.swap_route)."""
    from ..kernels.registry import with_swap
    return [spec_for(arch, K, codebook, dtype, dtype, cfg) for cfg in with_swap(c.cfg, arch, codebook)]


def candidate_specs(arch: str, K: float, codebook: str, dtype: str, cands: Sequence[Candidate]):
    """(spec, render extras) of every kernel the candidates need (fused_specs of each, prep)."""
    from ..kernels import prep
    out = {ps: prep.render_extra(ps) for ps in prep.specs_for(arch, dtype)}
    for c in cands:
        for s in fused_specs(arch, K, codebook, dtype, c):
            out[s] = render_extra(s)
    return list(out.items())


def usable(arch: str, p: Problem, cands: Sequence[Candidate], unusable: Mapping[str, str]) -> list[Candidate]:
    """The candidates none of whose fused kernels is in ``unusable`` (str(spec) -> why: a compile
    error or a failed code-object check, e.g. spills, which make a kernel slow and which CI rejects
    in a shipped table); each one dropped is logged with the reason."""
    keep = []
    for c in cands:
        why = next((unusable[str(s)] for s in fused_specs(arch, p.K, p.codebook, DTYPE_NAMES[p.dtype], c)
                    if str(s) in unusable), None)
        if why is None:
            keep.append(c)
        else:
            log.warning("tune %s: candidate %s skipped: %s", p, c.key(), why)
    return keep


class FusedTimer:
    """timer(candidate, repeats) for successive_halving: one problem, weights made once."""

    def __init__(self, p: Problem, device: Optional[torch.device] = None, copies: Optional[int] = None):
        self.p = p
        self.device = device or torch.device("cuda")
        n = copies or copies_for(p.IC * p.OC * p.K / 8)
        self.layers = random_weights(p, n, self.device)
        self.x = torch.randn(p.M, p.IC, device=self.device).to(p.dtype)
        self.outs = [torch.empty(p.M, p.OC, device=self.device, dtype=p.dtype) for _ in self.layers]

    def specs(self, cands: Sequence[Candidate]):
        return candidate_specs(arch_of(self.device), self.p.K, self.p.codebook, DTYPE_NAMES[self.p.dtype], cands)

    def __call__(self, c: Candidate, repeats: int) -> float:
        calls = [lambda w=w, y=y: fused_linear(self.x, w, out=y, cfg=c.cfg, launch=c.launch)
                 for w, y in zip(self.layers, self.outs)]
        return time_chain(calls, repeats)
