"""Facts of the trellis format that do not depend on torch (FORMAT.md sections 1, 3, 4, 5).

Everything here is plain Python so the compile side (spec, render, toolchains) can use it where
torch is not installed. Bit rates are carried as floats (2.0, 2.5, ...); ``rate_id`` (= 2*K) is
the integer form used in keys and in ``escha_config``.
"""
from __future__ import annotations

from typing import Final

CODEBOOKS: Final = ("3inst", "mcg", "mul1")
"""Codebook names, indexed by ``codebook_id`` (FORMAT.md section 1)."""

RATES: Final = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0)
"""Every bit rate K the format defines. Half-integer rates exist only with the mul1 codebook."""

TILE: Final = 16          # a tile is 16 x 16 weights
TILE_WEIGHTS: Final = 256
HAD_BLOCK: Final = 128    # Hadamard block; IC and OC must be multiples of it


def check_rate(K: float) -> float:
    """Return K as a float if it is one of :data:`RATES`, else raise ValueError."""
    k = float(K)
    if k not in RATES:
        raise ValueError(f"bit rate K={K!r} is not one of {RATES}")
    return k


def is_half_rate(K: float) -> bool:
    return float(K) != int(K)


def rate_id(K: float) -> int:
    """round(2*K): the integer encoding of a rate stored in ``escha_config``."""
    return int(round(2 * check_rate(K)))


def rate_from_id(rid: int) -> float:
    return check_rate(rid / 2)


def rate_name(K: float) -> str:
    """'2', '2p5': the spelling used in case names and kernel names."""
    k = check_rate(K)
    return str(int(k)) if k == int(k) else f"{int(k)}p5"


def tile_words(K: float) -> int:
    """uint16 words per tile: 16*K for integer K, 16*KA + 8 for K = KA + 0.5 (both = 16*K)."""
    return int(round(16 * check_rate(K)))


def rate_from_words(W: int) -> float:
    """Inverse of :func:`tile_words`; raises ValueError when W is not a valid tile width."""
    for k in RATES:
        if tile_words(k) == W:
            return k
    raise ValueError(f"{W} words per tile matches no bit rate (valid: {[tile_words(k) for k in RATES]})")


def codebook_id(name: str) -> int:
    try:
        return CODEBOOKS.index(str(name).lower())
    except ValueError:
        raise ValueError(f"unknown codebook {name!r}; expected one of {CODEBOOKS}") from None


def codebook_name(cid: int) -> str:
    if not 0 <= int(cid) < len(CODEBOOKS):
        raise ValueError(f"unknown codebook_id {cid}; expected 0..{len(CODEBOOKS) - 1}")
    return CODEBOOKS[int(cid)]


def check_rate_codebook(K: float, codebook: str) -> None:
    """Raise ValueError for a pair the format does not define (half rates need mul1)."""
    check_rate(K)
    codebook_id(codebook)
    if is_half_rate(K) and codebook != "mul1":
        raise ValueError(f"half-integer K={K} exists only with the mul1 codebook, not {codebook!r}")


def all_rate_codebooks() -> list[tuple[float, str]]:
    """The 27 (K, codebook) pairs of the format, in a fixed order."""
    return [(k, cb) for cb in CODEBOOKS for k in RATES if not (is_half_rate(k) and cb != "mul1")]


def symbol_bits(K: float, p: int) -> int:
    """D(p): ring bits owned by position p."""
    k = check_rate(K)
    ka = int(k)
    return ka + (p % 2) if is_half_rate(k) else ka


def symbol_end(K: float, p: int) -> int:
    """E(p): exclusive end of position p's bits in the ring."""
    k = check_rate(K)
    ka = int(k)
    return ((p + 1) * (2 * ka + 1)) // 2 if is_half_rate(k) else (p + 1) * ka


def position_to_rc(p: int) -> tuple[int, int]:
    """(row, col) within the 16x16 tile of trellis position p (row = input feature).

    p = 8*L + j: lane L's eight positions are the B-operand registers of an mma.m16n8k16 for the
    tile's two n8 halves (FORMAT.md section 4).
    """
    L, j = divmod(p, 8)
    row = 2 * (L % 4) + (j % 2) + 8 * ((j // 2) % 2)
    col = L // 4 + 8 * (j // 4)
    return row, col
