"""Reference (torch, CPU or GPU) of the opt-in int8-activation route of the fused kernels
(``act_quant='int8'``, mul1 layers; include/escha/fused.h, "int8 route").

The route, step by step (what the kernels compute, in the same fp32 operations up to the
quantization, float64 after it):

1. ``v = H128((x * s_in) * rin) * fp32(1/sqrt(128))`` per 128-feature block (fp32, the reference
   Hadamard's order);
2. per (token m, 128-block kb): ``amax = max |v|``, ``q = clamp(round_half_even(v * (127/amax)),
   -127, 127)`` (int8), ``step = amax / 127``;
3. ``t[m, n] = sum_kb step[m, kb] * sum_(k in kb) q[m, k] * w[k, n]`` with the EXACT mul1 weight
   ``w = (1774 * B - 905216) / 2^18`` (B = byte sum of the state's hash): the codebook's value
   before the fp16 rounding that :func:`escha_jit.reference.reconstruct` applies (they differ by at
   most half an fp16 ulp);
4. ``y = H128(t) * rout * s_out (+ bias)``.
"""
from __future__ import annotations

from typing import Optional

import torch

from . import reference as R

MUL1_MULT = 0x83DCD12D
MUL1_NUM = 1774
MUL1_DEN = 1 << 18
MUL1_OFF = 905216
I8_BLOCK = 128


def mul1_exact_values(states: torch.Tensor) -> torch.Tensor:
    """float64 of the states' shape: (1774 * B - 905216) / 2^18, B = byte sum of state * 0x83DCD12D."""
    h = ((states.to(torch.int64) & 0xFFFF) * MUL1_MULT) & 0xFFFFFFFF
    B = (h & 0xFF) + ((h >> 8) & 0xFF) + ((h >> 16) & 0xFF) + (h >> 24)
    return (MUL1_NUM * B - MUL1_OFF).to(torch.float64) / MUL1_DEN


def mul1_exact_weight(code: torch.Tensor, K: float) -> torch.Tensor:
    """float64 ``[IC, OC]``: the rotated-basis weight with the exact (unrounded) mul1 values."""
    return R.tiles_to_dense(mul1_exact_values(R.unpack_states(code, K)))


def quantize_blocks(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 ``v`` [M, IC] -> (int8-valued q [M, IC] as int32, fp32 step [M, IC/128]) per 128-block."""
    M, IC = v.shape
    blocks = v.reshape(M, IC // I8_BLOCK, I8_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    inv = torch.where(amax > 0, torch.tensor(127.0, dtype=torch.float32) / amax, torch.zeros_like(amax))
    q = torch.round(blocks * inv[..., None]).clamp(-127, 127).to(torch.int32)
    return q.reshape(M, IC), amax / torch.tensor(127.0, dtype=torch.float32)


def rotate_input(x: torch.Tensor, layer: R.LinearWeights) -> torch.Tensor:
    """fp32 [M, IC]: H128((x * s_in) * rin) scaled by fp32(1/sqrt(128)), padded inputs zero."""
    v = x.reshape(-1, x.shape[-1]).to(torch.float32)
    if layer.s_in is not None:
        v = v * layer.s_in.to(torch.float32)[: layer.logical_in].to(v.device)
    v = v * layer.rin.to(torch.float32)[: layer.logical_in].to(v.device)
    if layer.logical_in != layer.IC:
        v = torch.nn.functional.pad(v, (0, layer.IC - layer.logical_in))
    return R.hadamard128(v, out_dtype=torch.float32)


def forward_int8(x: torch.Tensor, layer: R.LinearWeights, out_dtype: Optional[torch.dtype] = None,
                 weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """y [..., out_features] of the int8 route for a mul1 layer; ``weight`` may pass
    :func:`mul1_exact_weight` (float64 [IC, OC]) computed once."""
    if layer.codebook != "mul1":
        raise ValueError(f"the int8 route needs the mul1 codebook, the layer uses {layer.codebook!r}")
    if x.shape[-1] != layer.logical_in:
        raise ValueError(f"x has {x.shape[-1]} features, the layer expects {layer.logical_in}")
    out_dtype = out_dtype or x.dtype
    lead = x.shape[:-1]
    q, step = quantize_blocks(rotate_input(x, layer))
    W = weight if weight is not None else mul1_exact_weight(layer.code.to(x.device), layer.K)
    W = W.to(torch.float64).to(x.device)
    M = q.shape[0]
    nkb = layer.IC // I8_BLOCK
    qb = q.to(torch.float64).reshape(M, nkb, I8_BLOCK)
    Wb = W.reshape(nkb, I8_BLOCK, layer.OC)
    t = torch.einsum("mbk,bkn,mb->mn", qb, Wb, step.to(torch.float64))
    H = R.hadamard_matrix(R.HAD_BLOCK, torch.float64).to(x.device)
    y = (t.reshape(M, layer.OC // R.HAD_BLOCK, R.HAD_BLOCK) @ H).reshape(M, layer.OC)
    y = y * R.output_scale(layer, torch.float64).to(x.device)
    if layer.bias is not None:
        y = y + layer.bias.to(torch.float64).to(x.device)
    return y[:, : layer.logical_out].to(out_dtype).reshape(*lead, layer.logical_out)
