"""128-block Hadamard with optional scales (templates/hadamard.hip.j2): spec and arguments."""
from __future__ import annotations

from ..spec import KernelSpec
from . import DTYPE_CODES

THREADS = 256
ARGS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "i32", "i32", "i64", "i64", "f32")


def spec_for(arch: str, in_dtype: str, out_dtype: str) -> KernelSpec:
    return KernelSpec.make("hadamard", arch, in_dtype=in_dtype, out_dtype=out_dtype, tile={"threads": THREADS})


def render_extra(spec: KernelSpec) -> dict:
    return {"in_code": DTYPE_CODES[spec.in_dtype], "out_code": DTYPE_CODES[spec.out_dtype]}
