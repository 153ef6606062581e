"""Trellis -> fp16 What (templates/reconstruct.hip.j2): spec and arguments."""
from __future__ import annotations

from ..spec import KernelSpec

WARPS = 8
ARGS = ("ptr", "ptr", "i32", "i32", "i64")


def spec_for(arch: str, K: float, codebook: str) -> KernelSpec:
    return KernelSpec.make("reconstruct", arch, K=K, codebook=codebook, out_dtype="f16", tile={"warps": WARPS})


def render_extra(spec: KernelSpec) -> dict:
    return {}
