"""The coded GEMM for prefill on Hopper (templates/gemm.hip.j2, include/escha/wgmma.h): spec,
arguments and launch geometry (torch-free).

Block: 128 output features (one Hadamard block) x TOKENS tokens, the whole input dimension;
grid = (OC / 128, ceil(M / TOKENS)), or with clusters of ``share`` token blocks that split each
stage's decode (share_for(): pairs wherever the token blocks pair up) (token blocks, OC / 128).
The activations arrive rotated and fp16 from the prep kernel (kernels.prep). wgmma is an sm_90a
feature: the kernel compiles for ``sm_90a`` (runs on sm_90 GPUs: H100 / H200), and only there.
"""
from __future__ import annotations

from ..spec import KernelSpec
from ..trellis import tile_words
from . import DTYPE_CODES

THREADS = 384         # 2 consumer warpgroups (wgmma, epilogue) + 1 producer warpgroup (decode, activation copies)
TOKENS = 256          # tokens per block (the wgmma N; 128 fp32 accumulators per consumer thread)
SHARE = 1             # token blocks per cluster sharing each stage's decode (templates/gemm.hip.j2 SHARE)
# Cluster sizes share_for() picks from, largest first. Pairs: 0.937x the time of share 1 at M = 1024
# and 0.954x at M = 4096 (geomeans of 16 cells, none slower than 0.983x; H100, benchmarks/RESULTS.md
# session 56). Not 4: 0.85-0.88x on 4096x14336 at M = 1024, but 1.5-1.6x where share 1 fills the GPU
# in one wave of single blocks (OC = 4096 at M = 1024): clusters of 4 fit fewer at once.
SHARES: tuple = (2,)
STAGES = 4            # ring stages: TOKENS x 64 fp16 activations (32 KiB) + 128 x 64 decoded weights (16 KiB)
COLS = 128
WORD_STAGES = 4       # the producer's trellis word ring (templates/gemm.hip.j2 WSTAGES)
OUT_DTYPES = ("f16", "bf16", "f32")
ARCHES = ("sm_90",)   # wgmma: Hopper only (sm_100 has a different matrix unit interface)
# xh, xh_exp, y, ldy, code, rout, s_out, bias, M, IC, OC, out_valid, xh's TMA descriptor (ops/gemm.py)
ARGS = ("ptr", "ptr", "ptr", "i64", "ptr", "ptr", "ptr", "ptr", "i32", "i32", "i32", "i32", "tmap")


# The rule where the tuned table has no route entry (ops.linear.rule_route; tune() measures the
# routes per shape, autotune/routes.py): calls of one or two token blocks (above the fused kernel's
# ROUTE_MAX_M, up to MID_M_MAX rows) go to the coded GEMM where its OC / 128 column-group blocks fill the GPU: each
# weight is decoded once per token block, inside the GEMM, and no dense weight is written. H200
# (benchmarks/bench_crossover.py --gemm), K2/K4 mcg: at M = 64..256 0.50-0.61x the dense path's time
# with 112 and 224 column groups (4096x14336, 8192x28672), 1.6-1.9x with 32 (4096x4096, 14336x4096)
# (RESULTS.md session 33); at M = 384 / 512 0.77-0.97x with 112 / 224 groups, at 768 0.93-1.06x and
# at 1024 0.94-1.26x (session 34): two token blocks, not three.
MID_M_MIN_GROUPS_PER_SM = 0.75
MID_M_MAX = 2 * TOKENS


def takes_mid_m(OC: int, M: int, sms: int) -> bool:
    """Whether a call of M <= MID_M_MAX rows is better served by the coded GEMM than by the
    dense-weight path on a GPU of ``sms`` SMs: its OC / 128 blocks fill at least
    MID_M_MIN_GROUPS_PER_SM of them."""
    return 0 < M <= MID_M_MAX and OC // COLS >= MID_M_MIN_GROUPS_PER_SM * sms


def share_for(M: int, tokens: int = TOKENS) -> int:
    """Token blocks per cluster for a call of M rows: the largest of SHARES that divides its token
    blocks (no padded blocks), else 1. Each block of a cluster decodes 1 / share of the weights."""
    blocks = -(-M // tokens)
    return next((s for s in SHARES if blocks % s == 0), 1)


def shares() -> tuple:
    """Every cluster size a call may take (share_for), for prebuilt and offline-compiled kernels."""
    return (1,) + SHARES


def supported(arch: str) -> bool:
    return arch in ARCHES


def spec_for(arch: str, K: float, codebook: str, out_dtype: str, tokens: int = TOKENS,
             stages: int = STAGES, diag: int = 0, share: int = SHARE) -> KernelSpec:
    """``share``: token blocks per thread block cluster that split each stage's decode (1, 2, 4).
    ``diag`` (timing studies only, benchmarks/bench_gemm_parts.py): 1 = no decode, 2 = no wgmma."""
    if not supported(arch):
        raise ValueError(f"the coded GEMM needs Hopper wgmma ({ARCHES}), not {arch!r}")
    if tokens not in (64, 128, 192, 256):
        raise ValueError(f"tokens={tokens!r}: 64, 128, 192 or 256 tokens per block (the wgmma N, whole epilogue passes)")
    if share not in (1, 2, 4):
        raise ValueError(f"share={share!r}: 1, 2 or 4 token blocks per cluster")
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"out_dtype {out_dtype!r}: expected one of {OUT_DTYPES}")
    return KernelSpec.make("gemm", arch + "a", K=K, codebook=codebook, in_dtype="f16", out_dtype=out_dtype,
                           tile={"tokens": tokens, "stages": stages, **({"diag": diag} if diag else {}),
                                 **({"share": share} if share != 1 else {})})


def render_extra(spec: KernelSpec) -> dict:
    return {"out_code": DTYPE_CODES[spec.out_dtype], "diag": spec.params.get("diag", 0), "share": share_of(spec)}


def share_of(spec: KernelSpec) -> int:
    """Token blocks per thread block cluster (1: no clusters)."""
    return spec.params.get("share", 1)


def variant(spec: KernelSpec, **tile) -> KernelSpec:
    """``spec`` with some tile parameters replaced (timing studies: benchmarks/bench_gemm_parts.py)."""
    p = {**spec.params, **tile}
    return spec_for(spec.arch[:-1], spec.K, spec.codebook, spec.out_dtype, p["tokens"], p["stages"],
                    p.get("diag", 0), p.get("share", 1))


def smem_bytes(spec: KernelSpec) -> int:
    """Dynamic shared memory of a launch: the stage ring (per stage the activation tile
    [tokens][64] and the decoded weight tile [128][64], fp16), the producer warps' trellis word
    rings, the ring's mbarriers (full and empty per stage, 8 bytes each) and the codebook mask
    (templates/gemm.hip.j2, in this order), plus 1 KiB to align the ring to the 128-byte swizzle's
    1024-byte period."""
    p = spec.params
    words = 4 * WORD_STAGES * (8 // share_of(spec)) * (tile_words(spec.K) // 2) * 4     # 4 producer warps' word rings
    barriers = 16 * p["stages"] + 16
    return p["stages"] * (p["tokens"] + 128) * 64 * 2 + words + barriers + 1024


def token_blocks(spec: KernelSpec, M: int) -> int:
    """Token blocks of a launch for M tokens: whole clusters of them (blocks past M decode their share
    for the others and store nothing)."""
    c = share_of(spec)
    return -(-M // (spec.params["tokens"] * c)) * c


def padded_rows(spec: KernelSpec, M: int) -> int:
    """Rows the prep buffer must have for M tokens: whole token blocks (the GEMM copies their tiles
    whole; rows past M are never stored)."""
    return token_blocks(spec, M) * spec.params["tokens"]


def grid(spec: KernelSpec, M: int, OC: int) -> tuple[int, int]:
    """(column groups, token blocks), or with clusters (token blocks, column groups): clusters run
    along grid x."""
    if share_of(spec) > 1:
        return token_blocks(spec, M), OC // COLS
    return OC // COLS, token_blocks(spec, M)
