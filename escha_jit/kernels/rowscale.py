"""Per-row power-of-two scaling around the prefill path's fp16 GEMM (templates/rowscale.hip.j2):
stage "in" (x bf16/fp32 -> fp16 xs and int32 exponents) and stage "out" (fp32 GEMM output ->
y = t * 2^e + bias in the output dtype). One block of THREADS threads per row."""
from __future__ import annotations

from ..spec import KernelSpec
from . import DTYPE_CODES

THREADS = 256
IN_DTYPES = ("bf16", "f32")            # fp16 activations go straight into the fp16 GEMM
OUT_DTYPES = ("f16", "bf16", "f32")
# in:  x, ldx, xs, lds, row_exp, n
ARGS_IN = ("ptr", "i64", "ptr", "i64", "ptr", "i32")
# out: t, ldt, y, ldy, row_exp, bias, n
ARGS_OUT = ("ptr", "i64", "ptr", "i64", "ptr", "ptr", "i32")


def spec_in(arch: str, in_dtype: str) -> KernelSpec:
    if in_dtype not in IN_DTYPES:
        raise ValueError(f"rowscale 'in' takes {IN_DTYPES}, got {in_dtype!r}")
    return KernelSpec.make("rowscale", arch, in_dtype=in_dtype, out_dtype="f16",
                           tile={"stage": "in", "threads": THREADS})


def spec_out(arch: str, out_dtype: str) -> KernelSpec:
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"rowscale 'out' writes {OUT_DTYPES}, got {out_dtype!r}")
    return KernelSpec.make("rowscale", arch, in_dtype="f32", out_dtype=out_dtype,
                           tile={"stage": "out", "threads": THREADS})


def render_extra(spec: KernelSpec) -> dict:
    return {"in_code": DTYPE_CODES[spec.in_dtype], "out_code": DTYPE_CODES[spec.out_dtype]}


def shipped(arch: str) -> list[KernelSpec]:
    return [spec_in(arch, d) for d in IN_DTYPES] + [spec_out(arch, d) for d in OUT_DTYPES]
