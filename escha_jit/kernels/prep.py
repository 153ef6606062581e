"""Input preparation for the fused kernel's XH mode (templates/prep.hip.j2): spec and arguments."""
from __future__ import annotations

import functools
from typing import Optional

from ..spec import KernelSpec, vendor_of
from . import DTYPE_CODES

# 16 waves x BATCH 8 (prep.hip.j2) = 128 Hadamard blocks: a row of up to 16384 features has all its
# loads in flight at once (one memory latency per call: the prep kernel is on every XH call's path).
# The kernel is compiled for at most THREADS and launched with threads_for(M).
THREADS = 512
MANY_ROWS = 256             # from here on (the coded GEMM's prefill), PREFILL_THREADS per row
PREFILL_THREADS = 128       # 4 waves a row: 8 blocks of 4 waves per SM (64 registers) keep 4x the
                            # loads of 2 blocks of 16 waves in flight, where rows outnumber the SMs
ARGS = ("ptr", "i64", "ptr", "ptr", "ptr", "ptr", "i32", "i32", "i32", "ptr")
WAVES = THREADS // 32       # one 128-feature block per wave and segment at decode sizes


def spec_for(arch: str, in_dtype: str, words: bool = False, groups: bool = False) -> KernelSpec:
    """The prep kernel of activations ``in_dtype``; ``words``: the swapped fused route's variant,
    which writes each value as the half2 word {h, h} in the unit's slot order and then each
    (row, 128-block)'s sum (templates/prep.hip.j2; buffer size: :func:`buffer_words`); NVIDIA only,
    as that route is. ``groups``: the coded GEMM's variant for launches over more than MANY_ROWS
    rows (PREFILL_THREADS a block, one block a row): a wave rotates 8 blocks of 128 features per
    step, 4 lanes each, with the same bits and ~0.4x the instructions."""
    if words and vendor_of(arch) != "nvidia":
        raise ValueError(f"prep words=True: the swapped route's A side, NVIDIA only; got arch {arch!r}")
    if words and groups:
        raise ValueError("prep words=True takes one 128-block per wave (its sums' order); groups=True does not")
    if groups:
        tile = {"threads": PREFILL_THREADS, "groups": 1}
    else:
        tile = {"threads": THREADS, "words": 1} if words else {"threads": THREADS}
    return KernelSpec.make("prep", arch, in_dtype=in_dtype, out_dtype="f16", tile=tile)


def specs_for(arch: str, in_dtype: str) -> list[KernelSpec]:
    """Every prep kernel of ``in_dtype`` a fused call on ``arch`` may launch: the fp16 rows, and on
    NVIDIA (the swapped route, kernels.fused.swap_route) for fp16 / bf16 activations the words."""
    out = [spec_for(arch, in_dtype)]
    if vendor_of(arch) == "nvidia" and in_dtype in ("f16", "bf16"):
        out.append(spec_for(arch, in_dtype, words=True))
    return out


def render_extra(spec: KernelSpec) -> dict:
    return {"in_code": DTYPE_CODES[spec.in_dtype], "words": int(spec.params.get("words", 0)),
            "groups": int(spec.params.get("groups", 0))}


def buffer_words(M: int, IC: int) -> int:
    """32-bit words of the words variant's output: [M][IC] {h, h} words, then fp32 [M][IC / 128] sums."""
    return M * IC + M * (IC // 128)


def threads_for(M: int) -> int:
    """Threads per block of a launch over M rows (each row split over segments() blocks)."""
    return PREFILL_THREADS if M > MANY_ROWS else THREADS


@functools.lru_cache(maxsize=None)          # on every xh = 1 call's path: computed once per shape
def segments(M: int, IC: int, sms: int, force: Optional[int] = None) -> tuple[int, int]:
    """(P, blocks of 128 features per segment): each row of a launch over M rows is split over P
    blocks. A row in one block costs time linear in IC: one SM rotates it (H200 per chained call:
    2.2 us at IC = 4096, 3.2 at 8192, 4.8 at 14336, 8.3 at 28672; split so that each wave rotates
    one 128-feature block: 2.7-3.0 us from 8192 to 28672, benchmarks/RESULTS.md session 18). A
    split row pays one atomic round trip (its blocks agree on the row's exponent), which loses at
    two segments (IC = 4096: 2.6 us), so rows of up to 2 x WAVES blocks stay whole, and so do
    prefill's many rows (M > MANY_ROWS); at most two blocks per SM in all. ``force``: that many
    segments (benchmarks, tests)."""
    nkb = IC // 128
    want = -(-nkb // WAVES)
    if force is not None:
        p = max(1, min(force, nkb))
    elif M > MANY_ROWS or want <= 2:
        p = 1
    else:
        p = max(1, min(want, (2 * sms) // max(M, 1)))
    seg = -(-nkb // p)
    return -(-nkb // seg), seg
