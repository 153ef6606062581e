"""Codebooks: 16-bit trellis state -> fp16 value (FORMAT.md section 5), computed exactly.

The three codebooks are pure functions of a 16-bit state, so the whole table (65536 entries) is
computed once per codebook with numpy: products mod 2^32 in uint64, the pre-rounding value in
float64 (exact: a sum of two fp16 values spans at most 41 bits), then ONE correct rounding to
fp16 (numpy converts float64 -> float16 directly, without passing through float32).
Kernels implement the same formulas; tests compare them against these tables.
"""
from __future__ import annotations

import functools

import numpy as np

MULT = {"3inst": 89226354, "mcg": 0xCBAC1FED}
ADD_3INST = 64248484
MASK = 0x8FFF8FFF
XOR = 0x3B603B60
MUL1_MULT = 0x83DCD12D
MUL1_BIAS = 0x6400   # half(0x6400 + B) = 1024 + B
MUL1_SCALE = 0x1EEE  # fp16 bit patterns of the fused multiply-add operands
MUL1_ADD = 0xC931


def _half(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.uint16).view(np.float16)


@functools.lru_cache(maxsize=None)
def table(codebook: str) -> np.ndarray:
    """float16 [65536]: the decoded value of every state. Read-only."""
    s = np.arange(65536, dtype=np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    if codebook in ("3inst", "mcg"):
        x = (s * np.uint64(MULT[codebook])) & m32
        if codebook == "3inst":
            x = (x + np.uint64(ADD_3INST)) & m32
        y = (x & np.uint64(MASK)) ^ np.uint64(XOR)
        lo = _half(y & np.uint64(0xFFFF)).astype(np.float64)
        hi = _half(y >> np.uint64(16)).astype(np.float64)
        out = (lo + hi).astype(np.float16)
    elif codebook == "mul1":
        x = (s * np.uint64(MUL1_MULT)) & m32
        B = (x & np.uint64(0xFF)) + ((x >> np.uint64(8)) & np.uint64(0xFF)) \
            + ((x >> np.uint64(16)) & np.uint64(0xFF)) + (x >> np.uint64(24))
        h = _half(np.uint64(MUL1_BIAS) + B).astype(np.float64)
        scale = float(_half(np.array(MUL1_SCALE))) 
        add = float(_half(np.array(MUL1_ADD)))
        out = (h * scale + add).astype(np.float16)  # exact in float64, one rounding
    else:
        raise ValueError(f"unknown codebook {codebook!r}; expected '3inst', 'mcg' or 'mul1'")
    out.setflags(write=False)
    return out
