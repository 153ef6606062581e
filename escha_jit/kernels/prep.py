"""Input preparation for the fused kernel's XH mode (templates/prep.hip.j2): spec and arguments."""
from __future__ import annotations

from ..spec import KernelSpec
from . import DTYPE_CODES

# 16 waves x BATCH 8 (prep.hip.j2) = 128 Hadamard blocks: a row of up to 16384 features has all its
# loads in flight at once (one memory latency per call: the prep kernel is on every XH call's path).
# The kernel is compiled for at most THREADS and launched with threads_for(M).
THREADS = 512
MANY_ROWS = 256             # from here on (the coded GEMM's prefill), PREFILL_THREADS per row
PREFILL_THREADS = 128       # 4 waves a row: 8 blocks of 4 waves per SM (64 registers) keep 4x the
                            # loads of 2 blocks of 16 waves in flight, where rows outnumber the SMs
ARGS = ("ptr", "i64", "ptr", "ptr", "ptr", "ptr", "i32", "i32")


def spec_for(arch: str, in_dtype: str) -> KernelSpec:
    return KernelSpec.make("prep", arch, in_dtype=in_dtype, out_dtype="f16", tile={"threads": THREADS})


def render_extra(spec: KernelSpec) -> dict:
    return {"in_code": DTYPE_CODES[spec.in_dtype]}


def threads_for(M: int) -> int:
    """Threads per block (one block per row) of a launch over M rows."""
    return PREFILL_THREADS if M > MANY_ROWS else THREADS
