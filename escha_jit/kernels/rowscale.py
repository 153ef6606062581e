"""Per-row power-of-two scaling around the prefill path's fp16 GEMM (templates/rowscale.hip.j2):
stage "in" (x bf16/fp32 -> fp16 xs and int32 exponents; with a weight bound, exponents that keep
the GEMM's outputs inside fp16) and stage "out" (the GEMM's fp32 or fp16 output t ->
y = t * 2^e + bias in the output dtype). One block of THREADS threads per row.
"""
from __future__ import annotations

from ..spec import KernelSpec
from . import DTYPE_CODES

THREADS = 256
IN_DTYPES = ("bf16", "f32")            # fp16 activations go straight into the fp16 GEMM
OUT_DTYPES = ("f16", "bf16", "f32")
T_DTYPES = ("f32", "f16")                # the GEMM output stage "out" reads
# in:  x, ldx, xs, lds, row_exp, n, wmax_bits (null: no weight bound, the GEMM writes fp32)
ARGS_IN = ("ptr", "i64", "ptr", "i64", "ptr", "i32", "ptr")
# out: t, ldt, y, ldy, row_exp, bias, n
ARGS_OUT = ("ptr", "i64", "ptr", "i64", "ptr", "ptr", "i32")


def bounded(x_dtype: str, out_dtype: str) -> bool:
    """Whether the prefill path runs its GEMM with an fp16 output for these activation / output
    dtypes (x scaled by the weight's bound; the output pass reads half the bytes): bf16 / fp32
    activations into a 16-bit output. An fp32 output keeps the fp32 GEMM output (its 1e-3 budget
    has no room for an fp16 rounding of t); fp16 into fp16 needs no scaling at all."""
    return x_dtype in IN_DTYPES and out_dtype in ("f16", "bf16")


def spec_in(arch: str, in_dtype: str) -> KernelSpec:
    if in_dtype not in IN_DTYPES:
        raise ValueError(f"rowscale 'in' takes {IN_DTYPES}, got {in_dtype!r}")
    return KernelSpec.make("rowscale", arch, in_dtype=in_dtype, out_dtype="f16",
                           tile={"stage": "in", "threads": THREADS})


def spec_out(arch: str, out_dtype: str, t_dtype: str = "f32") -> KernelSpec:
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"rowscale 'out' writes {OUT_DTYPES}, got {out_dtype!r}")
    if t_dtype not in T_DTYPES:
        raise ValueError(f"rowscale 'out' reads {T_DTYPES}, got {t_dtype!r}")
    return KernelSpec.make("rowscale", arch, in_dtype=t_dtype, out_dtype=out_dtype,
                           tile={"stage": "out", "threads": THREADS})


def render_extra(spec: KernelSpec) -> dict:
    return {"in_code": DTYPE_CODES[spec.in_dtype], "out_code": DTYPE_CODES[spec.out_dtype]}


def shipped(arch: str) -> list[KernelSpec]:
    return ([spec_in(arch, d) for d in IN_DTYPES] + [spec_out(arch, d) for d in OUT_DTYPES]
            + [spec_out(arch, d, "f16") for d in OUT_DTYPES if d != "f32"])
