"""Candidate configurations of the fused kernel for one problem, pruned statically (torch-free).

Pruning uses the same shared-memory formula as the kernel (kernels.fused.smem_layout) and a
register estimate from the accumulators, so nothing that cannot launch is ever measured.
"""
from __future__ import annotations

import dataclasses
import itertools

from ..kernels.fused import SWAP_MAX_M, FusedConfig, FusedLaunch, has_clusters, split_fits
from ..kernels.limits import block_smem_limit
from ..spec import vendor_of

AMD_MAX_M_TILES = 8          # kernels.registry.AMD_FUSED_MAX_M_TILES: the gfx12 set stops there
REG_FILE = {"sm_90": 65536, "gfx1201": 65536}


@dataclasses.dataclass(frozen=True)
class Candidate:
    cfg: FusedConfig
    launch: FusedLaunch

    def key(self) -> str:
        c, l = self.cfg, self.launch
        cl = f"_c{c.cluster}" if c.cluster > 1 else ""
        rl = f"_rl{c.reg_level}" if c.reg_level >= 0 else ""
        xr = f"_xr{c.x_ring}" if c.x_ring else ""
        sc = "_sc" if c.split_cluster else ""
        return (f"w{c.warps}_mt{c.m_tiles}_r{c.rows_per_stage}_s{c.stages}_b{c.min_blocks}_x{c.xh}{cl}{xr}{sc}{rl}"
                f"_S{l.splits}")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def fused_candidates(arch: str, K: float, IC: int, OC: int, M: int, sms: int,
                     warps=(4, 8), rows=(2, 4, 8), stages=(2, 3, 4), min_blocks=(1, 2, 3), xh=(0, 1),
                     cluster=(1,), x_ring=(0,), max_waves: float = 8.0, min_waves: float = 0.5) -> list[Candidate]:
    """Every (config, launch) that fits the arch's shared memory and registers and tiles the
    problem; ordered deterministically. Cluster sizes above 1 apply where a cluster can share the
    prologue and where they were measured: NVIDIA, the fp16 route at M = 9..16 (above the swapped
    route's M, one m tile) with the in-kernel prologue (xh 0), and OC/128 a multiple of the size.
    A operand rings (``x_ring`` above 0) likewise where measured: sm_90, xh 1, one block cluster,
    more than one m tile (M > 16; kernels.fused.FusedConfig.x_ring)."""
    mt = 1
    while 16 * mt < M:
        mt *= 2
    if vendor_of(arch) == "amd" and mt > AMD_MAX_M_TILES:
        return []                                          # the dense-weight GEMM path takes these M
    groups = OC // 128
    cap = block_smem_limit(arch)
    out = []
    # clusters: measured at one m tile only (M = 9..16; session 16), so searched there only
    clusters = [c for c in cluster
                if c == 1 or (has_clusters(arch) and SWAP_MAX_M < M <= 16 and groups % c == 0)]
    # A operand rings: measured at M = 32 / 64 only (H100, session 40), so searched above one m tile
    rings = [x for x in x_ring if x == 0 or (has_clusters(arch) and mt > 1)]
    for w, r, st, mb, xm, cl, xr in itertools.product(warps, rows, stages, min_blocks, xh, clusters, rings):
        if (cl > 1 and xm) or (xr and (not xm or cl > 1)):
            continue
        # 16 waves (two K slices) run the fp16 route only: at M <= 8 NVIDIA takes the swapped route
        # (1.1-1.6x faster than the fp16 one, session 4), and gfx12's 64 KiB of LDS holds no doubled ring
        if w > 8 and (M <= SWAP_MAX_M or vendor_of(arch) == "amd"):
            continue
        threads = 32 * w
        regs_cap = REG_FILE.get(arch, 65536) // (threads * mb)
        if regs_cap < 64 + 8 * mt * max(1, 8 // w):        # accumulators + decode state must fit
            continue
        cfg = FusedConfig(warps=w, m_tiles=mt, rows_per_stage=r, stages=st, min_blocks=mb, xh=xm, cluster=cl,
                          x_ring=xr)
        fitting = [S for S in _divisors(IC // 128) if split_fits(cfg, K, IC, M, S, cap)]
        # enough blocks to fill the GPU, not so many that the split-K reduction dominates; when
        # shared memory forces more splits than that (large M), the fewest that fit
        chosen = [S for S in fitting if min_waves * sms <= groups * S <= max_waves * sms or S == 1]
        if not chosen and fitting:
            chosen = fitting[:1]
        out.extend(Candidate(cfg, FusedLaunch(S)) for S in chosen)
    return out
