"""The coded GEMM for prefill on Hopper (templates/gemm.hip.j2, include/escha/wgmma.h): spec,
arguments and launch geometry (torch-free).

Block: 128 output features (one Hadamard block) x TOKENS tokens, the whole input dimension;
grid = (OC / 128, ceil(M / TOKENS)). The activations arrive rotated and fp16 from the prep kernel
(kernels.prep). wgmma is an sm_90a feature: the kernel compiles for ``sm_90a`` (runs on sm_90
GPUs: H100 / H200), and only there.
"""
from __future__ import annotations

from ..spec import KernelSpec
from ..trellis import tile_words
from . import DTYPE_CODES

PRODUCERS = 1         # producer warpgroups (decode): 1, or 2 with tokens <= 192 (experiment)
TOKENS = 256          # tokens per block (the wgmma N; 128 fp32 accumulators per consumer thread)
STAGES = 4            # ring stages: TOKENS x 64 fp16 activations (32 KiB) + 128 x 64 decoded weights (16 KiB)
COLS = 128
WORD_STAGES = 4       # the producer's trellis word ring (templates/gemm.hip.j2 WSTAGES)
OUT_DTYPES = ("f16", "bf16", "f32")
ARCHES = ("sm_90",)   # wgmma: Hopper only (sm_100 has a different matrix unit interface)
# xh, xh_exp, y, ldy, code, rout, s_out, bias, M, IC, OC, out_valid, xh's TMA descriptor (ops/gemm.py)
ARGS = ("ptr", "ptr", "ptr", "i64", "ptr", "ptr", "ptr", "ptr", "i32", "i32", "i32", "i32", "tmap")


def supported(arch: str) -> bool:
    return arch in ARCHES


def spec_for(arch: str, K: float, codebook: str, out_dtype: str, tokens: int = TOKENS,
             stages: int = STAGES, diag: int = 0, producers: int = PRODUCERS, cluster: int = 1) -> KernelSpec:
    """``diag`` (timing studies only, benchmarks/bench_gemm_parts.py): 1 = no decode, 2 = no wgmma."""
    if not supported(arch):
        raise ValueError(f"the coded GEMM needs Hopper wgmma ({ARCHES}), not {arch!r}")
    if tokens not in (64, 128, 192, 256):
        raise ValueError(f"tokens={tokens!r}: 64, 128, 192 or 256 tokens per block (the wgmma N, whole epilogue passes)")
    if cluster not in (1, 2, 4, 8):
        raise ValueError(f"cluster={cluster!r}: 1, 2, 4 or 8 column groups sharing an activation tile")
    if producers not in (1, 2) or (producers == 2 and tokens > 192):
        raise ValueError(f"producers={producers!r}, tokens={tokens!r}: 1 producer warpgroup, or 2 with at most "
                         f"192 tokens per block (512 threads leave 128 registers for the tokens / 2 accumulators)")
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"out_dtype {out_dtype!r}: expected one of {OUT_DTYPES}")
    return KernelSpec.make("gemm", arch + "a", K=K, codebook=codebook, in_dtype="f16", out_dtype=out_dtype,
                           tile={"tokens": tokens, "stages": stages, **({"diag": diag} if diag else {}),
                                 **({"producers": producers} if producers != 1 else {}),
                                 **({"cluster": cluster} if cluster != 1 else {})})


def render_extra(spec: KernelSpec) -> dict:
    return {"out_code": DTYPE_CODES[spec.out_dtype], "diag": spec.params.get("diag", 0),
            "producers": spec.params.get("producers", 1), "cluster": spec.params.get("cluster", 1)}


def variant(spec: KernelSpec, **tile) -> KernelSpec:
    """``spec`` with some tile parameters replaced (timing studies: benchmarks/bench_gemm_parts.py)."""
    p = {**spec.params, **tile}
    return spec_for(spec.arch[:-1], spec.K, spec.codebook, spec.out_dtype, p["tokens"], p["stages"],
                    p.get("diag", 0), p.get("producers", 1), p.get("cluster", 1))


def smem_bytes(spec: KernelSpec) -> int:
    """Dynamic shared memory of a launch: the stage ring (per stage the activation tile
    [tokens][64] and the decoded weight tile [128][64], fp16), the producer warps' trellis word
    rings, plus 1 KiB to align the ring to the 128-byte swizzle's 1024-byte period."""
    p = spec.params
    words = 4 * WORD_STAGES * 8 * (tile_words(spec.K) // 2) * 4     # 4 producer warps' trellis word rings
    return p["stages"] * (p["tokens"] + 128) * 64 * 2 + words + 1024


def threads(spec: KernelSpec) -> int:
    """Threads per block: 2 consumer warpgroups (TMA, wgmma, epilogue) + the producer warpgroups."""
    return 256 + 128 * spec.params.get("producers", 1)


def padded_rows(spec: KernelSpec, M: int) -> int:
    """Rows the prep buffer must have for M tokens: whole token tiles (the GEMM copies them whole;
    rows past M are never stored)."""
    t = spec.params["tokens"]
    return -(-M // t) * t


def grid(spec: KernelSpec, M: int, OC: int) -> tuple[int, int]:
    t = spec.params["tokens"]
    c = spec.params.get("cluster", 1)
    if (OC // COLS) % c:
        raise ValueError(f"cluster={c}: the {OC // COLS} column groups of OC={OC} do not form whole clusters")
    return OC // COLS, -(-M // t)


def cluster_dims(spec: KernelSpec) -> tuple[int, int, int] | None:
    """The launch's thread block cluster (column groups sharing an activation tile), or None."""
    c = spec.params.get("cluster", 1)
    return (c, 1, 1) if c > 1 else None


def box_rows(spec: KernelSpec) -> int:
    """Token rows of one TMA copy: the block's tile, or its cluster rank's slice of it."""
    return spec.params["tokens"] // spec.params.get("cluster", 1)
