"""The math of FORMAT.md in torch: the one reference every kernel is tested against.

Vectorised, device-agnostic (CPU included). Layouts:

* ``code``: int16 ``[IC/16, OC/16, W]`` (read as uint16), W = 16*K words per 16x16 tile.
* states: int32 ``[IC/16, OC/16, 256]``, the 16-bit state of each trellis position p (tile order).
* ``What``: fp16 ``[IC, OC]``, the rotated-basis weight; ``y = x @ W`` with ``x: [M, IC]``.

Decoding is integer-exact; the forward pass accumulates in fp32 (or fp64 on request).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from . import codebook as _codebook
from .trellis import (HAD_BLOCK, TILE, TILE_WEIGHTS, check_rate, check_rate_codebook, position_to_rc,
                      symbol_bits, symbol_end, tile_words)

HAD_SCALE_F32 = 0.088388347648
"""1/sqrt(128) as the reference runtime applies it (an fp32 multiply after the butterfly)."""


# ---------------------------------------------------------------- index tables (cached per K)

@functools.lru_cache(maxsize=None)
def _window_tables(K: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per position p: the 32-bit word holding the first bit of its 16-bit state window, the
    following word (cyclic), and the right shift that brings the window to bits 0..15 of the
    64-bit concatenation of the two words."""
    R = TILE_WEIGHTS * int(round(2 * K)) // 2  # ring bits, 256*K
    n_words = R // 32
    q0 = np.empty(TILE_WEIGHTS, np.int64)
    shift = np.empty(TILE_WEIGHTS, np.int64)
    for p in range(TILE_WEIGHTS):
        start = (symbol_end(K, p) - 16) % R
        q0[p], off = divmod(start, 32)
        shift[p] = 48 - off
    return q0, (q0 + 1) % n_words, shift


@functools.lru_cache(maxsize=None)
def _tile_place() -> np.ndarray:
    """int64 [256]: row*16 + col of position p inside its tile."""
    return np.array([r * TILE + c for r, c in (position_to_rc(p) for p in range(TILE_WEIGHTS))], np.int64)


def _check_code(code: torch.Tensor, K: float) -> None:
    if code.dtype != torch.int16:
        raise TypeError(f"code must be int16 [IC/16, OC/16, W], got dtype {code.dtype}")
    if code.dim() != 3 or code.shape[2] != tile_words(K):
        raise ValueError(f"code must be [IC/16, OC/16, {tile_words(K)}] for K={K}, got {tuple(code.shape)}")


def _words32(code: torch.Tensor) -> torch.Tensor:
    """int64 [T, W/2]: uint16 pairs joined little-endian, u[t] = w[2t] | w[2t+1] << 16."""
    w = code.reshape(-1, code.shape[-1]).to(torch.int32) & 0xFFFF
    w = w.to(torch.int64)
    return w[:, 0::2] | (w[:, 1::2] << 16)


def unpack_states(code: torch.Tensor, K: float) -> torch.Tensor:
    """int32 ``[IC/16, OC/16, 256]``: the 16-bit state of every trellis position (tile order)."""
    K = check_rate(K)
    _check_code(code, K)
    q0, _, shift = (torch.from_numpy(a).to(code.device) for a in _window_tables(K))
    u = _words32(code)
    pairs = (u << 32) | torch.roll(u, -1, 1)       # word q and its cyclic successor, 64 bits
    T = u.shape[0]
    out = torch.empty(T, TILE_WEIGHTS, dtype=torch.int32, device=code.device)
    step = 1024   # chunks small enough for the int64 temporaries to stay in cache
    for s in range(0, T, step):
        out[s:s + step] = (pairs[s:s + step][:, q0] >> shift) & 0xFFFF
    return out.reshape(code.shape[0], code.shape[1], TILE_WEIGHTS)


def pack(states: torch.Tensor, K: float, check: bool = True) -> torch.Tensor:
    """Inverse of :func:`unpack_states`: int32/int64 states ``[IC/16, OC/16, 256]`` -> int16 code.

    Position p contributes the low D(p) bits of its state as ring bits E(p)-D(p) .. E(p)-1. With
    ``check`` the result is unpacked again and compared: states that are not a consistent
    tail-biting sequence (each state's high bits must be its predecessors' symbols) raise.
    """
    K = check_rate(K)
    if states.dim() != 3 or states.shape[2] != TILE_WEIGHTS:
        raise ValueError(f"states must be [IC/16, OC/16, 256], got {tuple(states.shape)}")
    R = int(round(TILE_WEIGHTS * K))
    owner = np.empty(R, np.int64)
    bitpos = np.empty(R, np.int64)
    for p in range(TILE_WEIGHTS):
        e, d = symbol_end(K, p), symbol_bits(K, p)
        for b in range(e - d, e):
            owner[b] = p
            bitpos[b] = e - 1 - b   # the symbol's MSB comes first in the ring
    st = states.reshape(-1, TILE_WEIGHTS).to(torch.int64)
    bits = (st[:, torch.from_numpy(owner).to(st.device)] >> torch.from_numpy(bitpos).to(st.device)) & 1
    weights = torch.tensor([1 << (31 - i) for i in range(32)], dtype=torch.int64, device=st.device)
    u = (bits.reshape(-1, R // 32, 32) * weights).sum(-1)          # MSB-first 32-bit words
    w = torch.stack((u & 0xFFFF, u >> 16), dim=-1).reshape(st.shape[0], -1)
    w = torch.where(w >= 32768, w - 65536, w).to(torch.int16)
    code = w.reshape(states.shape[0], states.shape[1], tile_words(K))
    if check and not torch.equal(unpack_states(code, K).to(torch.int64), states.to(torch.int64) & 0xFFFF):
        raise ValueError("states are not a consistent tail-biting trellis sequence for "
                         f"K={K}: state p must equal (state p-1 << D(p) | symbol p) & 0xFFFF")
    return code


def codebook_table(codebook: str, device: torch.device | str = "cpu") -> torch.Tensor:
    """fp16 [65536]: the value of every state under ``codebook`` (exact, see codebook.py)."""
    return torch.from_numpy(_codebook.table(codebook).copy()).to(device)


def decode(states: torch.Tensor, codebook: str) -> torch.Tensor:
    """fp16 tensor of the states' shape: each 16-bit state decoded by ``codebook``."""
    lut = codebook_table(codebook, states.device)
    idx = (states.reshape(-1) & 0xFFFF).to(torch.int32)
    return lut.index_select(0, idx).reshape(states.shape)   # much faster than lut[idx] on CPU


def tiles_to_dense(values: torch.Tensor) -> torch.Tensor:
    """[IC/16, OC/16, 256] per-position values -> [IC, OC] (row = input feature)."""
    t1, t2, _ = values.shape
    place = torch.from_numpy(np.argsort(_tile_place())).to(values.device)
    tiles = values[:, :, place].reshape(t1, t2, TILE, TILE)       # [i, j, row, col]
    return tiles.permute(0, 2, 1, 3).reshape(t1 * TILE, t2 * TILE)


def dense_to_tiles(dense: torch.Tensor) -> torch.Tensor:
    """[IC, OC] -> [IC/16, OC/16, 256] in trellis position order (inverse of tiles_to_dense)."""
    ic, oc = dense.shape
    tiles = dense.reshape(ic // TILE, TILE, oc // TILE, TILE).permute(0, 2, 1, 3).reshape(ic // TILE, oc // TILE, -1)
    return tiles[:, :, torch.from_numpy(_tile_place()).to(dense.device)]


def reconstruct(code: torch.Tensor, K: float, codebook: str) -> torch.Tensor:
    """fp16 ``[IC, OC]``: the rotated-basis weight What decoded from ``code`` (bit-exact)."""
    check_rate_codebook(K, codebook)
    return tiles_to_dense(decode(unpack_states(code, K), codebook))


# ---------------------------------------------------------------- Hadamard

def hadamard128(x: torch.Tensor, pre_scale: Optional[torch.Tensor] = None,
                post_scale: Optional[torch.Tensor] = None, out_scale: float = 1.0,
                out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """128-point orthonormal Hadamard over the last dim, in blocks of 128, fp32 inside.

    The order of operations is the reference runtime's, so fp16 results match it bit for bit:
    ``x * pre_scale`` in x's dtype, the butterfly in fp32 with strides 1, 2, ..., 64, a multiply
    by fp32(1/sqrt(128)) (and ``out_scale``), one rounding to ``out_dtype`` (default x's dtype),
    then ``* post_scale`` in ``out_dtype``. The last dim must be a multiple of 128.
    """
    n = x.shape[-1]
    if n % HAD_BLOCK:
        raise ValueError(f"hadamard128: last dim {n} is not a multiple of {HAD_BLOCK}")
    out_dtype = out_dtype or x.dtype
    if pre_scale is not None:
        x = x * pre_scale.to(x.dtype)
    v = x.to(torch.float32).reshape(-1, n // HAD_BLOCK, HAD_BLOCK)
    lead = v.shape[:2]
    s = 1
    while s < HAD_BLOCK:
        w = v.reshape(*lead, HAD_BLOCK // (2 * s), 2, s)
        a, b = w[..., 0, :], w[..., 1, :]
        v = torch.stack((a + b, a - b), dim=-2).reshape(*lead, HAD_BLOCK)
        s *= 2
    v = v * torch.tensor(HAD_SCALE_F32 * out_scale, dtype=torch.float32)
    v = v.reshape(x.shape).to(out_dtype)
    if post_scale is not None:
        v = v * post_scale.to(out_dtype)
    return v


def hadamard_matrix(n: int = HAD_BLOCK, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Natural-order Sylvester H_n / sqrt(n): H[i, j] = (-1)^popcount(i & j) / sqrt(n)."""
    i = torch.arange(n)
    bits = i[:, None] & i[None, :]
    pop = torch.zeros_like(bits)
    for k in range(int(math.log2(n)) + 1):
        pop += (bits >> k) & 1
    return (1 - 2 * (pop % 2)).to(dtype) / math.sqrt(n)


# ---------------------------------------------------------------- forward

@dataclass(frozen=True)
class LinearWeights:
    """The tensors of one coded linear, in compute form (escha names; EXL3 maps onto them).

    code int16 [IC/16, OC/16, W]; rin fp16 [IC] (pre-Hadamard input scale); rout fp16 [OC]
    (post-Hadamard output scale); s_in fp32 [IC] / s_out fp32 [OC] (None = 1); bias [OC] or None
    (applied when present: EXL3 layers; escha layers never pass theirs). ``in_features`` /
    ``out_features`` are the logical dims (<= IC / OC when the model was padded to 128).
    """
    code: torch.Tensor
    K: float
    codebook: str
    rin: torch.Tensor
    rout: torch.Tensor
    s_in: Optional[torch.Tensor] = None
    s_out: Optional[torch.Tensor] = None
    bias: Optional[torch.Tensor] = None
    in_features: Optional[int] = None
    out_features: Optional[int] = None

    @property
    def IC(self) -> int:
        return self.code.shape[0] * TILE

    @property
    def OC(self) -> int:
        return self.code.shape[1] * TILE

    @property
    def logical_in(self) -> int:
        return self.in_features or self.IC

    @property
    def logical_out(self) -> int:
        return self.out_features or self.OC

    def to(self, device: torch.device | str) -> "LinearWeights":
        def mv(t):
            return None if t is None else t.to(device)
        return LinearWeights(mv(self.code), self.K, self.codebook, mv(self.rin), mv(self.rout), mv(self.s_in),
                             mv(self.s_out), mv(self.bias), self.in_features, self.out_features)


def input_scale(layer: LinearWeights, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """s_in * rin as one [IC] vector (the order FORMAT.md section 2 applies them in)."""
    s = layer.rin.to(torch.float32)
    if layer.s_in is not None:
        s = layer.s_in.to(torch.float32) * s
    return s.to(dtype)


def output_scale(layer: LinearWeights, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    s = layer.rout.to(torch.float32)
    if layer.s_out is not None:
        s = s * layer.s_out.to(torch.float32)
    return s.to(dtype)


def forward(x: torch.Tensor, layer: LinearWeights, out_dtype: Optional[torch.dtype] = None,
            weight: Optional[torch.Tensor] = None, compute_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """y = x @ W for one coded linear (FORMAT.md section 2); x: [..., in_features].

    fp16 / bf16 / fp32 in; ``out_dtype`` defaults to x's dtype. Computes in ``compute_dtype``
    (fp32 by default; fp64 gives the exact product used to judge kernels). ``weight`` may pass a
    precomputed :func:`reconstruct` result. Padded inputs are zero-filled, padded outputs dropped.
    """
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise TypeError(f"x must be fp16, bf16 or fp32, got {x.dtype}")
    if x.shape[-1] != layer.logical_in:
        raise ValueError(f"x has {x.shape[-1]} features, the layer expects {layer.logical_in}")
    out_dtype = out_dtype or x.dtype
    lead = x.shape[:-1]
    xs = x.reshape(-1, x.shape[-1]).to(compute_dtype)
    if layer.logical_in != layer.IC:
        xs = torch.nn.functional.pad(xs, (0, layer.IC - layer.logical_in))
    H = hadamard_matrix(HAD_BLOCK, compute_dtype).to(x.device)
    xs = xs * input_scale(layer, compute_dtype).to(x.device)
    xh = (xs.reshape(-1, layer.IC // HAD_BLOCK, HAD_BLOCK) @ H).reshape(-1, layer.IC)
    if weight is None:
        weight = reconstruct(layer.code.to(x.device), layer.K, layer.codebook)
    t = xh @ weight.to(compute_dtype)
    y = (t.reshape(-1, layer.OC // HAD_BLOCK, HAD_BLOCK) @ H).reshape(-1, layer.OC)
    y = y * output_scale(layer, compute_dtype).to(x.device)
    if layer.bias is not None:
        y = y + layer.bias.to(compute_dtype).to(x.device)
    y = y[:, :layer.logical_out]
    return y.to(out_dtype).reshape(*lead, layer.logical_out)


def dense_weight(layer: LinearWeights, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The original-basis weight ``diag(s_in*rin) Hb What Hb diag(rout*s_out)``, [IC, OC]."""
    What = reconstruct(layer.code, layer.K, layer.codebook).to(dtype)
    H = hadamard_matrix(HAD_BLOCK, dtype).to(What.device)
    ic, oc = What.shape
    w = (H @ What.reshape(ic // HAD_BLOCK, HAD_BLOCK, oc)).reshape(ic, oc)
    w = (w.reshape(ic, oc // HAD_BLOCK, HAD_BLOCK) @ H).reshape(ic, oc)
    return input_scale(layer, dtype)[:, None] * w * output_scale(layer, dtype)[None, :]
