"""Every shipped kernel specialization, per target arch (torch-free: used by offline compiles).

``shipped_specs(arch, full=True)`` is what CI compiles for sm_90 and gfx1201 and what
``escha-jit compile --all`` builds; ``full=False`` is a representative subset (every op and
codebook at one rate and dtype) for a quick check.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

from ..spec import KernelSpec, vendor_of
from ..trellis import all_rate_codebooks
from . import dense, fused, gemm, hadamard, prep, reconstruct, rowscale
from .limits import AMD_LDS_BYTES as AMD_LDS_BYTES, block_smem_limit    # AMD_LDS_BYTES: re-exported

DTYPES = ("f16", "bf16", "f32")
FUSED_DTYPES = ("f16", "bf16")


def _distinct_configs(configs_for, max_m: int) -> list:
    seen = []
    for M in range(1, max_m + 1):
        for c in configs_for(M):
            if c not in seen:
                seen.append(c)
    return seen


def fused_default_configs(vendor: str = "nvidia", codebook: Optional[str] = None, K: Optional[float] = None) -> list:
    """The distinct untuned fused configurations (fused.default_configs) over every M the fused
    kernel takes, for a codebook's layers at rate K (None: any)."""
    return _distinct_configs(lambda M: fused.default_configs(M, vendor, codebook, K), fused.MAX_M)


def fused_i8_default_configs(vendor: str = "nvidia") -> list:
    """The distinct default configurations of the int8-activation kernels (M <= I8_MAX_M)."""
    return _distinct_configs(lambda M: [fused.default_config_i8(M, vendor)], fused.I8_MAX_M)


def with_swap(cfg, arch: str, codebook: str) -> list:
    """``cfg`` and, where calls of it may take the swapped fp16 route (fused.swap_route), its
    swapped twin: both are dispatched, so both are shipped."""
    out = [cfg]
    if not cfg.swap and fused.swap_allowed(cfg, vendor_of(arch), codebook):
        out.append(dataclasses.replace(cfg, swap=1))
    return out


def fused_supported(arch: str) -> bool:
    """NVIDIA (mma.m16n8k16) and AMD gfx12 / RDNA4 (wave32 WMMA, include/escha/matunit_wmma.h)."""
    return vendor_of(arch) == "nvidia" or arch.startswith("gfx12")


AMD_FUSED_MAX_M_TILES = 8
"""gfx12 ships m_tiles <= 8: at 16 m tiles the A operand alone (256 rows x 136 fp16 at the smallest
K range) is 68 KiB > 64 KiB of LDS, and the epilogue's ``break`` out of its MT=16 loop leaves the
loop rolled (LLVM fully unrolls unknown trip counts only up to 8), so acc[] goes to scratch."""


NVIDIA_SMEM_BYTES = fused.NVIDIA_BLOCK_SMEM


def dynamic_smem(spec: KernelSpec) -> Optional[int]:
    """Bytes of dynamic shared memory every launch of ``spec`` passes, where that is fixed by the
    spec (None where it depends on the call, e.g. the fused kernel's M and split)."""
    if spec.op == "dense":
        return dense.dynamic_smem(spec)
    if spec.op == "gemm":
        return gemm.smem_bytes(spec)
    return None


def smem_limit(arch: str) -> int:
    """Most static + dynamic shared memory / LDS one block may use on ``arch`` (kernels.limits)."""
    return block_smem_limit(arch)


def check_fused_smem(arch: str, cfg, total: int) -> None:
    """ValueError naming the fused configuration whose shared-memory layout (``total`` bytes, from
    kernels.fused.smem_layout for the call's M and K range) exceeds what one block can have on
    ``arch`` (the driver would refuse the launch with a bare INVALID_VALUE)."""
    if total > smem_limit(arch):
        raise ValueError(f"config {cfg} needs {total} bytes of shared memory per block for this call, more "
                         f"than the {smem_limit(arch)} of {arch}: more splits (fewer input features per "
                         f"block), fewer stages, rows per stage or waves")


def fused_fits(arch: str, cfg, K: float, i8: bool = False, M: Optional[int] = None) -> bool:
    """Whether ``cfg`` at rate K can launch on ``arch`` for M rows (default: the smallest M routed to
    it, default_config) at the smallest input range a block takes (kr = 128): the shared-memory
    formula of kernels/fused.smem_layout against one block's limit on the arch (kernels.limits:
    227 KiB on sm_90, 99 KiB on sm_86 / sm_89 / sm_120, 64 KiB of LDS on gfx12); clusters (of column
    groups or of splits) and the A operand ring from sm_90 on; gfx12 up to AMD_FUSED_MAX_M_TILES m tiles."""
    vendor = vendor_of(arch)
    if (cfg.cluster > 1 or cfg.x_ring or cfg.split_cluster) and not fused.has_clusters(arch):
        return False
    if vendor == "amd" and cfg.m_tiles > AMD_FUSED_MAX_M_TILES:
        return False
    if M is None:
        if i8:
            ms = [m for m in range(1, fused.I8_MAX_M + 1) if fused.default_config_i8(m, vendor) == cfg]
        else:
            ms = [m for m in range(1, fused.MAX_M + 1) if fused.default_config(m, vendor) == cfg]
        M = min(ms or [16 * cfg.m_tiles])
    return fused.smem_layout(cfg, K, M, 128, i8).total <= block_smem_limit(arch)


def shipped_specs(arch: str, full: bool = True) -> Iterator[tuple[KernelSpec, dict[str, Any]]]:
    """(spec, render extras) for every shipped specialization of ``arch``."""
    pairs = all_rate_codebooks()
    for K, cb in pairs:
        if full or K == 4.0:
            yield reconstruct.spec_for(arch, K, cb), reconstruct.render_extra(None)
    for K, cb in pairs:
        for dt in dense.OUT_DTYPES:
            if full or (K == 4.0 and dt == "f16"):
                s = dense.spec_for(arch, K, cb, dt)
                yield s, dense.render_extra(s)
        if full:                                      # the bf16-activation prefill path's weight
            s = dense.spec_for(arch, K, cb, "f16", amax=True)
            yield s, dense.render_extra(s)
    for s in rowscale.shipped(arch):
        yield s, rowscale.render_extra(s)
    for i in DTYPES:
        for o in DTYPES:
            if full or i == o:
                s = hadamard.spec_for(arch, i, o)
                yield s, hadamard.render_extra(s)
    if gemm.supported(arch):                          # the coded wgmma GEMM (sm_90a), every output dtype
        for K, cb in pairs:
            for dt in gemm.OUT_DTYPES:
                if full or (K == 4.0 and dt == "f16"):
                    for share in gemm.shares():
                        s = gemm.spec_for(arch, K, cb, dt, share=share)
                        yield s, gemm.render_extra(s)
        for dt in DTYPES:                             # its prep kernel over many rows
            s = prep.spec_for(arch, dt, groups=True)
            yield s, prep.render_extra(s)
    if not fused_supported(arch):
        return
    for dt in DTYPES:                                 # prep: the fused kernel's fp16 / bf16, the GEMM's f32 too
        for s in prep.specs_for(arch, dt):
            yield s, prep.render_extra(s)
    seen = set()
    for K, cb in pairs:
        configs = fused_default_configs(vendor_of(arch), cb, K)
        for dt in FUSED_DTYPES:
            for i, cfg in enumerate(configs):
                if not full and (K != 4.0 or dt != "f16" or i != 0):
                    continue
                if not fused_fits(arch, cfg, K):
                    continue
                for c in with_swap(cfg, arch, cb):
                    s = fused.spec_for(arch, K, cb, dt, dt, c)
                    seen.add(s)
                    yield s, fused.render_extra(s)
    for K, cb in pairs:                               # the opt-in int8-activation kernels (mul1)
        if cb not in fused.I8_CODEBOOKS:
            continue
        for dt in FUSED_DTYPES:
            for i, cfg in enumerate(fused_i8_default_configs(vendor_of(arch))):
                if not full and (K != 4.0 or dt != "f16" or i != 0):
                    continue
                if fused_fits(arch, cfg, K, i8=True):
                    s = fused.spec_for(arch, K, cb, dt, dt, cfg, act_quant="int8")
                    yield s, fused.render_extra(s)
    if full:                                          # every configuration the shipped table picks
        from ..autotune.table import TableError, TuningTable, parse_key, shipped_table_path
        try:
            table = TuningTable.load(shipped_table_path(arch))
        except (FileNotFoundError, TableError):
            return
        for key, e in sorted(table.entries.items()):
            k = parse_key(key)
            for c in with_swap(e.cfg, arch, k.codebook):
                s = fused.spec_for(arch, k.K, k.codebook, k.dtype, k.dtype, c)
                if s not in seen and fused_fits(arch, c, s.K):
                    seen.add(s)
                    yield s, fused.render_extra(s)
