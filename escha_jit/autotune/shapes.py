"""Coded-projection shapes of a model, and the kernel specializations they need (torch-free
except for reading checkpoints)."""
from __future__ import annotations

import dataclasses
from typing import Iterable, Optional, Sequence

from ..kernels import dense, fused, gemm, prep, rowscale
from ..kernels.registry import fused_default_configs, fused_fits, fused_supported, with_swap
from ..spec import KernelSpec, vendor_of
from .table import M_BUCKETS, TuningTable, entry_key


@dataclasses.dataclass(frozen=True)
class LayerShape:
    IC: int
    OC: int
    K: float
    codebook: str


def checkpoint_shapes(path: str) -> list[LayerShape]:
    """Distinct shapes of the coded projections of a checkpoint directory (validates it)."""
    from ..format import open_checkpoint
    ck = open_checkpoint(path)
    out: list[LayerShape] = []
    for layer in ck.coded.values():
        s = LayerShape(layer.IC, layer.OC, layer.K, layer.codebook)
        if s not in out:
            out.append(s)
    return out


def model_specs(arch: str, shapes: Iterable[LayerShape], dtypes: Sequence[str] = ("f16", "bf16"),
                table: Optional[TuningTable] = None) -> list[tuple[KernelSpec, dict]]:
    """Every specialization a model with these projections can dispatch to on ``arch``: the
    fused kernel under each default configuration (the heuristic covers any M <= 256) and each
    tuned entry, the prep kernel, and the prefill paths (the fp16 dense weight of each shape, and
    the row-scaling kernels around its GEMM for bf16 / fp32 activations, with bf16 the dense
    weight's variant that reports max |W|; on Hopper also the
    opt-in coded GEMM of each shape)."""
    out: dict[KernelSpec, dict] = {}

    def add(s: KernelSpec, extra: dict) -> None:
        out.setdefault(s, extra)

    shapes = list(shapes)
    for sh in shapes:
        s = dense.spec_for(arch, sh.K, sh.codebook, "f16")
        add(s, dense.render_extra(s))
    for dt in dtypes:
        if dt != "f16":                                     # fp16 activations go straight to the GEMM
            bounded = rowscale.bounded(dt, dt)              # bf16: the fp16-output GEMM and max |W|
            for sh in shapes:
                s = dense.spec_for(arch, sh.K, sh.codebook, "f16", amax=bounded)
                add(s, dense.render_extra(s))
            for s in (rowscale.spec_in(arch, dt), rowscale.spec_out(arch, dt, "f16" if bounded else "f32")):
                add(s, rowscale.render_extra(s))
    if not fused_supported(arch):
        return list(out.items())
    for dt in dtypes:
        for s in prep.specs_for(arch, dt):
            add(s, prep.render_extra(s))
        if gemm.supported(arch):                           # the opt-in coded GEMM (ESCHA_JIT_PREFILL=gemm)
            s = prep.spec_for(arch, dt, groups=True)        # its prep kernel over many rows
            add(s, prep.render_extra(s))
            for sh in shapes:
                for share in gemm.shares():
                    s = gemm.spec_for(arch, sh.K, sh.codebook, dt, share=share)
                    add(s, gemm.render_extra(s))
        for sh in shapes:
            cfgs = list(fused_default_configs(vendor_of(arch), sh.codebook, sh.K))
            if table is not None:
                for M in M_BUCKETS:
                    e = table.entries.get(entry_key("fused", sh.K, sh.codebook, sh.IC, sh.OC, dt, M))
                    if e is not None and e.cfg not in cfgs:
                        cfgs.append(e.cfg)
            for cfg in cfgs:
                if not fused_fits(arch, cfg, sh.K):         # e.g. gfx12: 64 KiB LDS, m_tiles <= 8
                    continue
                for c in with_swap(cfg, arch, sh.codebook):
                    s = fused.spec_for(arch, sh.K, sh.codebook, dt, dt, c)
                    add(s, fused.render_extra(s))
    return list(out.items())
