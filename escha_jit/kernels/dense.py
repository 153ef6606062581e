"""Trellis -> dense original-basis weight W [IC, OC] (templates/dense.hip.j2): spec and arguments.

W = diag(s_in*rin) . Hb . What . Hb . diag(rout*s_out), rounded once to fp16 or bf16; one block of
THREADS threads (8 waves) per 128x128 block of W, with the fp32 block in dynamic shared memory.
"""
from __future__ import annotations

from ..spec import KernelSpec, vendor_of
from . import DTYPE_CODES

THREADS = 256                       # 8 waves: one per tile column, then one per 16-row strip
BLOCK = 128                         # W rows and columns per block
SMEM_BYTES = BLOCK * BLOCK * 4      # 64 KiB: the fp32 block, dynamic (all of a gfx12 workgroup's LDS)
OUT_DTYPES = ("f16", "bf16")
# code, rin, s_in, rout, s_out, out, IC, OC, ldo, amax_bits (read by the `amax` variants only),
# rows_ahead (block rows below a block whose trellis words it fetches into L2: ops/dense.py)
ARGS = ("ptr", "ptr", "ptr", "ptr", "ptr", "ptr", "i32", "i32", "i64", "ptr", "i32")


# resident blocks per SM the registers are capped for: NVIDIA 3 (80 registers, no spills: pass 1
# holds 8 tiles' words and 64 fp32 sums, pass 2 64 fp32 values; 3 x 69 KiB of shared memory fit;
# 3 blocks measured 0.93x the time of 2, RESULTS.md session 33); gfx12: one 64 KiB block per CU
# whatever the VGPRs
MIN_BLOCKS = {"nvidia": 3, "amd": 1}
# The `amax` rates whose pass 2 ptxas spills (NVRTC 13.0 or 13.5, 80 registers) once pass 1 also
# fetches the next block's words into L2: they build without that prefetch (it took 0.964x the
# build's time over 48 cells, 0.90-0.94x on mul1 at K 2 and 4, none slower than 1.014x: RESULTS.md
# session 54). gfx12 has no L2 prefetch instruction.
NO_L2_PREFETCH_AMAX_RATES = (3.5, 5.0, 7.0)


def l2_prefetch(arch: str, K: float, amax: bool) -> bool:
    """Whether the kernel fetches the trellis words of a later block into L2 (``rows_ahead``)."""
    return vendor_of(arch) == "nvidia" and not (amax and K in NO_L2_PREFETCH_AMAX_RATES)


def spec_for(arch: str, K: float, codebook: str, out_dtype: str = "f16", amax: bool = False) -> KernelSpec:
    """``amax``: the variant that also reports max |W| (the bf16-activation prefill path's fp16
    weight: ops/linear.py bounds the fp16 GEMM's outputs with it)."""
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"dense weight dtype {out_dtype!r}: expected one of {OUT_DTYPES}")
    if amax and out_dtype != "f16":
        raise ValueError(f"the dense weight reports max |W| of an fp16 weight only, not {out_dtype!r}")
    tile = {"threads": THREADS, "min_blocks": MIN_BLOCKS[vendor_of(arch)]}
    if amax:
        tile["amax"] = 1
    if l2_prefetch(arch, K, amax):
        tile["l2_prefetch"] = 1
    return KernelSpec.make("dense", arch, K=K, codebook=codebook, out_dtype=out_dtype, tile=tile)


def render_extra(spec: KernelSpec) -> dict:
    return {"out_code": DTYPE_CODES[spec.out_dtype], "min_blocks": spec.params["min_blocks"],
            "amax": bool(spec.params.get("amax", 0)), "l2_prefetch": bool(spec.params.get("l2_prefetch", 0))}


def dynamic_smem(spec: KernelSpec) -> int:
    """Bytes of dynamic shared memory every launch of ``spec`` passes: the fp32 block tile, its rows
    padded to 136 floats on NVIDIA (no index arithmetic) and followed by the 128 column scales,
    swizzled in exactly 64 KiB on AMD."""
    return (BLOCK * (BLOCK + 8) + BLOCK) * 4 if vendor_of(spec.arch) == "nvidia" else SMEM_BYTES
